import { Type, type Static } from '@sinclair/typebox';

/** One allow-list entry: a host name (`api.example.com`, `*.example.com`), an address or a range; optionally a port. */
const EgressEntrySchema = Type.String({
  pattern: '^(\\*|(\\*\\.)?[A-Za-z0-9.-]+(:\\d{1,5})?|[0-9A-Fa-f:.]+(/\\d{1,3})?|\\[[0-9A-Fa-f:.]+\\](:\\d{1,5})?)$',
});

/**
 * SANDGATE_EGRESS: `{ "<tenant>" | "*": [entry, …] }`. A tenant with entries (its own, or `*`'s) has network egress
 * in its sessions' sandboxes, through sandgate's egress proxy and only to those hosts; every other sandbox has no
 * network at all. Entries read as in SANDGATE_WEBHOOK_ALLOW (HostAllowList): names resolving to loopback, private or
 * link-local addresses are refused unless the address or range itself is listed.
 */
export const EgressRegistrySchema = Type.Record(
  Type.String({ pattern: '^([A-Za-z0-9_-]{1,64}|\\*)$' }),
  Type.Array(EgressEntrySchema, { maxItems: 1000 }),
);
export type EgressRegistry = Static<typeof EgressRegistrySchema>;

/** What a tenant's sandboxes may reach: `*`'s entries and its own; empty: no egress. */
export const egressEntries = (registry: EgressRegistry, tenant: string): string[] => [
  ...(registry['*'] ?? []),
  ...(Object.hasOwn(registry, tenant) ? registry[tenant]! : []),
];
