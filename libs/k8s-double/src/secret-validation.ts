import { badRequest } from './status.ts';
import type { K8sObject } from './store.ts';
import { checkMeta, checkSchema, FieldErrors, nameOf } from './validate.ts';

const KEY = /^[-._a-zA-Z0-9]+$/;
const MAX_BYTES = 1 << 20;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Validates a Secret as the API server does and normalises it as it is stored: `stringData` merged into
 * `data` (base64, stringData winning) and dropped, `type` defaulted to Opaque. `previous` is the stored Secret
 * on a replace, for the immutability rules.
 */
export function admitSecret(secret: K8sObject, previous?: K8sObject): void {
  checkSchema('Secret', secret);
  const errors = new FieldErrors('Secret', nameOf(secret));
  checkMeta(secret, errors);
  const data = (secret.data ?? {}) as Record<string, string>;
  for (const v of Object.values(data)) {
    if (!BASE64.test(v) || v.length % 4 !== 0) {
      throw badRequest(
        `Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte ${badByte(v)}`,
      );
    }
  }
  for (const [k, v] of Object.entries((secret.stringData ?? {}) as Record<string, string>)) {
    data[k] = Buffer.from(v, 'utf8').toString('base64');
  }
  delete secret.stringData;
  secret.data = data;
  secret.type ??= 'Opaque';
  let total = 0;
  for (const [k, v] of Object.entries(data)) {
    if (!KEY.test(k)) {
      errors.invalid(
        `data[${k}]`,
        k,
        "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name', " +
          " or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
      );
    }
    total += Buffer.from(v, 'base64').length;
  }
  if (total > MAX_BYTES) errors.tooLong('data', MAX_BYTES);
  if (previous) {
    if (previous.type !== secret.type) errors.invalid('type', secret.type, 'field is immutable');
    if (previous.immutable === true) {
      if (JSON.stringify(previous.data ?? {}) !== JSON.stringify(data))
        errors.forbidden('data', 'field is immutable when `immutable` is set');
      if (secret.immutable !== true) errors.forbidden('immutable', 'field is immutable when `immutable` is set');
    }
  }
  errors.done();
}

function badByte(v: string): number {
  const i = [...v].findIndex((c) => !/[A-Za-z0-9+/=]/.test(c));
  return i === -1 ? v.length : i;
}
