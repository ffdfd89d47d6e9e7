import { egressEntries, type EgressRegistry } from '@sandgate/config';
import { HostAllowList } from './host-allow-list.ts';

/** A tenant's egress allow-list, as the proxy checks it. */
export const egressAllowList = (registry: EgressRegistry, tenant: string): HostAllowList =>
  new HostAllowList(egressEntries(registry, tenant), `the egress allow-list of tenant ${tenant} (SANDGATE_EGRESS)`);
