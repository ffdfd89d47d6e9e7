import { createHmac } from 'node:crypto';

/**
 * A tenant's webhook signing secret, in Standard Webhooks' `whsec_<base64>` form: derived from the deployment's
 * signing key, so every replica signs alike and no tenant can sign (or verify) another tenant's deliveries.
 */
export const webhookSecret = (signingKey: Buffer | string, tenant: string) =>
  `whsec_${createHmac('sha256', signingKey).update(`webhook-secret\n${tenant}`).digest('base64')}`;
