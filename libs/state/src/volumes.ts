import { SandgateError, type JobVolume } from '@sandgate/contracts';
import type { Keys } from './keys.ts';
import type { LuaRedis } from './lua-scripts.ts';
import { randomHex } from './random-ids.ts';

/** A tenant's volume, as Redis holds it; its files are in the data directory under its id. */
export interface VolumeRecord {
  id: string;
  tenant: string;
  name: string;
  sizeBytes: number;
  createdAt: number;
}

/** A live session mounting a volume. */
export interface VolumeUserRecord {
  sessionId: string;
  path: string;
  readOnly: boolean;
}

/** A mount as a session asks for it: the volume's name, where, and how. */
export interface MountRequest {
  name: string;
  path: string;
  read_only: boolean;
}

export const newVolumeId = () => `vol_${randomHex(6)}`;

const notFound = (name: string) =>
  new SandgateError('volume_not_found', `no volume ${name}; GET /v1/volumes lists the tenant's volumes`);

/**
 * The tenants' volumes, in Redis: each tenant's by name, each volume's record by id, and the sessions that mount each
 * (its users). A volume's size is taken from its tenant's storage quota (the StorageLedger, under the volume's id) when
 * it is made and given back when it is deleted. One writer at a time: a session mounts a volume read-write only while
 * no other live session does (claim), a check made atomically with the claim itself.
 */
export class VolumeStore {
  readonly #redis: LuaRedis;
  readonly #k: Keys;
  constructor(redis: LuaRedis, k: Keys) {
    this.#redis = redis;
    this.#k = k;
  }

  /**
   * Records a new volume of `id` (its directory made by the caller first). volume_exists, max_volumes, or
   * storage_quota_exceeded when its size does not fit in what the tenant's quota has left.
   */
  async create(
    tenant: string,
    id: string,
    name: string,
    sizeBytes: number,
    { maxVolumes, storageLimit }: { maxVolumes: number; storageLimit: number },
  ): Promise<VolumeRecord> {
    const now = Date.now();
    const [answer, used] = (await this.#redis.sgCreateVolume(
      this.#k.tenantVolumes(tenant),
      this.#k.volume(id),
      this.#k.tenantStorage(tenant),
      name,
      id,
      tenant,
      sizeBytes,
      now,
      maxVolumes,
      storageLimit,
    )) as [string, string?];
    if (answer === 'exists') throw new SandgateError('volume_exists', `the tenant has a volume named ${name} already`);
    if (answer === 'max') {
      throw new SandgateError(
        'max_volumes',
        `the tenant has ${maxVolumes} volumes, its maximum (SANDGATE_MAX_VOLUMES); delete one first`,
      );
    }
    if (answer === 'quota') {
      throw new SandgateError(
        'storage_quota_exceeded',
        `a volume of ${sizeBytes} bytes would take the tenant's storage to ${Number(used) + sizeBytes} bytes; ` +
          `the quota is ${storageLimit} bytes. Make it smaller, or delete files, sessions or volumes first.`,
      );
    }
    return { id, tenant, name, sizeBytes, createdAt: now };
  }

  /** The tenant's volume of that name, or null (another tenant's is never found). */
  async get(tenant: string, name: string): Promise<VolumeRecord | null> {
    const id = await this.#redis.hget(this.#k.tenantVolumes(tenant), name);
    if (id === null) return null;
    const rec = await this.byId(id);
    return rec?.tenant === tenant ? rec : null;
  }

  async require(tenant: string, name: string): Promise<VolumeRecord> {
    const rec = await this.get(tenant, name);
    if (!rec) throw notFound(name);
    return rec;
  }

  /** A volume by id, whoever's it is (a signed download link names the id); null once it is deleted. */
  async byId(id: string): Promise<VolumeRecord | null> {
    const h = await this.#redis.hgetall(this.#k.volume(id));
    if (!h.tenant || !h.name) return null;
    return { id, tenant: h.tenant, name: h.name, sizeBytes: Number(h.size), createdAt: Number(h.created_at) };
  }

  /** The tenant's volumes, by name. */
  async list(tenant: string): Promise<VolumeRecord[]> {
    const ids = await this.#redis.hvals(this.#k.tenantVolumes(tenant));
    const recs = await Promise.all(ids.map((id) => this.byId(id)));
    return recs
      .filter((r): r is VolumeRecord => r !== null && r.tenant === tenant)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** The live sessions that mount the volume. */
  async users(id: string): Promise<VolumeUserRecord[]> {
    const flat = (await this.#redis.sgVolumeUsers(
      this.#k.volumeMounts(id),
      this.#k.sessionExpiry(),
      Date.now(),
      this.#k.sessionPrefix(),
    )) as string[];
    return pairs(flat);
  }

  /**
   * Deletes the tenant's volume record and gives its size back to the tenant's quota; the caller removes its
   * directory. volume_not_found, or volume_in_use (with the sessions that mount it) while any live session does.
   */
  async delete(tenant: string, name: string): Promise<VolumeRecord> {
    const rec = await this.require(tenant, name);
    const [answer, ...rest] = (await this.#redis.sgDeleteVolume(
      this.#k.tenantVolumes(tenant),
      this.#k.tenantStorage(tenant),
      this.#k.sessionExpiry(),
      name,
      Date.now(),
      this.#k.volumePrefix(),
      this.#k.sessionPrefix(),
    )) as string[];
    if (answer === 'not_found') throw notFound(name);
    if (answer === 'in_use') {
      const users = pairs(rest).map((u) => u.sessionId);
      throw new SandgateError(
        'volume_in_use',
        `volume ${name} is mounted by ${users.join(', ')}; delete ${users.length === 1 ? 'that session' : 'those sessions'} first`,
      );
    }
    return rec;
  }

  /**
   * Mounts the tenant's volumes for the session (which must exist): all of them or none. volume_not_found for a name
   * the tenant has no volume by; volume_in_use when a read-write mount meets another live session that mounts the
   * volume read-write. Records the mounts on the session, with each volume's id and size, and answers them.
   */
  async claim(session: { id: string; tenant: string }, mounts: MountRequest[]): Promise<JobVolume[]> {
    const [answer, a, b] = (await this.#redis.sgClaimVolumes(
      this.#k.tenantVolumes(session.tenant),
      this.#k.session(session.id),
      this.#k.sessionExpiry(),
      session.id,
      session.tenant,
      Date.now(),
      this.#k.volumePrefix(),
      this.#k.sessionPrefix(),
      JSON.stringify(mounts),
    )) as string[];
    if (answer === 'no_session') {
      throw new SandgateError('session_not_found', `session ${session.id} does not exist or has expired`);
    }
    if (answer === 'not_found') throw notFound(a!);
    if (answer === 'in_use') {
      throw new SandgateError(
        'volume_in_use',
        `volume ${a} is mounted read-write by ${b}: a volume has one writer at a time. Mount it read-only ` +
          `("read_only": true), or delete ${b} first.`,
      );
    }
    return JSON.parse(a!) as JobVolume[];
  }

  /** The session no longer uses its volumes (it was deleted): they are free for another writer at once. */
  async release(sessionId: string, mounts: readonly Pick<JobVolume, 'id'>[]): Promise<void> {
    if (mounts.length === 0) return;
    const m = this.#redis.multi();
    for (const v of mounts) m.hdel(this.#k.volumeMounts(v.id), sessionId);
    await m.exec();
  }
}

function pairs(flat: string[]): VolumeUserRecord[] {
  const out: VolumeUserRecord[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const m = JSON.parse(flat[i + 1]!) as { path: string; read_only: boolean };
    out.push({ sessionId: flat[i]!, path: m.path, readOnly: m.read_only === true });
  }
  return out.sort((x, y) => (x.sessionId < y.sessionId ? -1 : 1));
}
