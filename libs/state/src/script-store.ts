import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Language } from '@sandgate/contracts';
import type { Keys } from './keys.ts';

/** A saved script, as kept. */
export interface ScriptRecord {
  name: string;
  language: Language;
  code: string;
  description: string;
  sha256: string;
  created_at: number;
}

/** What `save` did: made it, found the same content under a name already, or found the name taken by other code. */
export type SaveOutcome =
  | { kind: 'created'; script: ScriptRecord }
  | { kind: 'duplicate'; script: ScriptRecord }
  | { kind: 'name_taken'; script: ScriptRecord }
  | { kind: 'full' };

/** The hash scripts are deduplicated by: of the language and the code together. */
export const scriptHash = (language: string, code: string): string =>
  createHash('sha256').update(language).update('\0').update(code).digest('hex');

// Saves atomically: the same content (by hash) answers the script that has it; a name taken by other content, or a
// tenant at its maximum, saves nothing. KEYS: scripts hash, hash → name. ARGV: name, hash, record JSON, max.
const SAVE = `
local existing = redis.call('HGET', KEYS[2], ARGV[2])
if existing then return {'duplicate', redis.call('HGET', KEYS[1], existing)} end
local taken = redis.call('HGET', KEYS[1], ARGV[1])
if taken then return {'name_taken', taken} end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return {'full', ''} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
return {'created', ARGV[3]}
`;

/**
 * A tenant's saved scripts (POST /v1/scripts), kept in Redis until deleted: by name, and by content hash so the same
 * code is kept once. Another tenant never sees them.
 */
export class ScriptStore {
  readonly #redis: Redis;
  readonly #k: Keys;
  constructor(redis: Redis, k: Keys) {
    this.#redis = redis;
    this.#k = k;
  }

  async save(tenant: string, record: ScriptRecord, max: number): Promise<SaveOutcome> {
    const [kind, raw] = (await this.#redis.eval(
      SAVE,
      2,
      this.#k.tenantScripts(tenant),
      this.#k.tenantScriptHashes(tenant),
      record.name,
      record.sha256,
      JSON.stringify(record),
      String(max),
    )) as [SaveOutcome['kind'], string];
    if (kind === 'full') return { kind };
    return { kind, script: JSON.parse(raw) as ScriptRecord };
  }

  async get(tenant: string, name: string): Promise<ScriptRecord | undefined> {
    const raw = await this.#redis.hget(this.#k.tenantScripts(tenant), name);
    return raw === null ? undefined : (JSON.parse(raw) as ScriptRecord);
  }

  /** Every script of the tenant, by name. */
  async list(tenant: string): Promise<ScriptRecord[]> {
    const all = await this.#redis.hgetall(this.#k.tenantScripts(tenant));
    return Object.values(all)
      .map((raw) => JSON.parse(raw) as ScriptRecord)
      .sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  /** Deletes it; false when there was none. */
  async delete(tenant: string, name: string): Promise<boolean> {
    const script = await this.get(tenant, name);
    if (script === undefined) return false;
    await this.#redis
      .multi()
      .hdel(this.#k.tenantScripts(tenant), name)
      .hdel(this.#k.tenantScriptHashes(tenant), script.sha256)
      .exec();
    return true;
  }

  /** Keeps a completed run's language and code for `ttlSeconds`, so that it can be saved as a script. */
  async keepRunCode(executionId: string, language: Language, code: string, ttlSeconds: number): Promise<void> {
    await this.#redis.set(this.#k.executionCode(executionId), JSON.stringify({ language, code }), 'EX', ttlSeconds);
  }

  /** The code a completed run kept, if it is still kept. */
  async runCode(executionId: string): Promise<{ language: Language; code: string } | undefined> {
    const raw = await this.#redis.get(this.#k.executionCode(executionId));
    return raw === null ? undefined : (JSON.parse(raw) as { language: Language; code: string });
  }
}
