import {
  MAX_SESSION_VOLUMES,
  SandgateError,
  VOLUME_PATH_PATTERN,
  VOLUMES_ROOT,
  type CreateVolume,
  type MountVolume,
  type Volume,
} from '@sandgate/contracts';
import { limitsFor } from '@sandgate/config';
import { newVolumeId, type MountRequest, type VolumeRecord } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import type { FileSpace } from './file-space.ts';

const MOUNT_PATH = new RegExp(VOLUME_PATH_PATTERN);
const bad = (detail: string) => new SandgateError('validation_failed', detail);

/** The tenants' volumes: made, listed, deleted, their files reached, and checked as sessions ask to mount them. */
export class VolumeControl {
  readonly #d: GatewayDeps;
  constructor(d: GatewayDeps) {
    this.#d = d;
  }

  /**
   * A new volume: its directory (a subvolume limited to its size where the data disk has quotas), then its record,
   * which takes its size from the tenant's storage quota. Nothing is left behind when either is refused.
   */
  async create(tenant: string, { name, size_bytes }: CreateVolume): Promise<Volume> {
    const { config, volumes, workspaces } = this.#d;
    if (size_bytes > config.maxVolumeBytes) {
      throw bad(`size_bytes ${size_bytes} exceeds this deployment's maximum of ${config.maxVolumeBytes}`);
    }
    // A cheap look first, so that a taken name costs no directory; the record below decides for good.
    if (await volumes.get(tenant, name)) {
      throw new SandgateError('volume_exists', `the tenant has a volume named ${name} already`);
    }
    const id = newVolumeId();
    await workspaces.volumes.create(id, size_bytes);
    try {
      const rec = await volumes.create(tenant, id, name, size_bytes, {
        maxVolumes: config.maxVolumes,
        storageLimit: limitsFor(config, tenant).storage_bytes,
      });
      return await this.#present(rec);
    } catch (err) {
      await workspaces.volumes.remove(id).catch(() => {});
      throw err;
    }
  }

  async list(tenant: string): Promise<Volume[]> {
    const recs = await this.#d.volumes.list(tenant);
    return Promise.all(recs.map((r) => this.#present(r)));
  }

  async get(tenant: string, name: string): Promise<Volume> {
    return this.#present(await this.#d.volumes.require(tenant, name));
  }

  /** Deletes the volume and its files; volume_in_use while a live session (idle, busy or paused) mounts it. */
  async delete(tenant: string, name: string): Promise<void> {
    const rec = await this.#d.volumes.delete(tenant, name);
    await this.#d.workspaces.volumes.remove(rec.id);
  }

  /** The volume's files as a FileSpace: a new file must fit beside what the volume holds, within its size. */
  async space(tenant: string, name: string): Promise<FileSpace> {
    const rec = await this.#d.volumes.require(tenant, name);
    const { volumes } = this.#d.workspaces;
    const full = (detail: string) => new SandgateError('volume_full', detail);
    return {
      owner: rec.id,
      dir: volumes.dir(rec.id),
      admit: async (bytes) => {
        const used = await volumes.usedBytes(rec.id);
        if (used + bytes > rec.sizeBytes) {
          throw full(
            `this file of ${bytes} bytes does not fit in volume ${name}: it holds ${used} of its ` +
              `${rec.sizeBytes} bytes. Delete files from it first.`,
          );
        }
      },
      measure: async () => {},
      full: () => full(`volume ${name} is full (${rec.sizeBytes} bytes); delete files from it first`),
    };
  }

  /**
   * The mounts a session asks for, checked (at most MAX_SESSION_VOLUMES, each volume once, paths under /mnt/volumes
   * that neither repeat nor nest) and completed (path defaults to /mnt/volumes/<name>, read_only to false). Each volume
   * must exist; whether it may be mounted read-write is decided when the session claims it (VolumeStore.claim).
   */
  async mounts(tenant: string, asked: readonly MountVolume[] | undefined): Promise<MountRequest[]> {
    if (asked === undefined || asked.length === 0) return [];
    if (asked.length > MAX_SESSION_VOLUMES) throw bad(`a session mounts at most ${MAX_SESSION_VOLUMES} volumes`);
    const mounts = asked.map((m) => ({
      name: m.name,
      path: m.path ?? `${VOLUMES_ROOT}/${m.name}`,
      read_only: m.read_only ?? false,
    }));
    for (const [i, m] of mounts.entries()) {
      if (!MOUNT_PATH.test(m.path) || m.path.length > 255) {
        throw bad(`volume ${m.name}: path "${m.path}" must be under ${VOLUMES_ROOT}/ (letters, digits, ., _, -)`);
      }
      for (const other of mounts.slice(0, i)) {
        if (other.name === m.name) throw bad(`volume ${m.name} is mounted twice; mount a volume once per session`);
        const [a, b] = [`${m.path}/`, `${other.path}/`];
        if (a.startsWith(b) || b.startsWith(a)) {
          throw bad(`volumes ${other.name} and ${m.name}: ${other.path} and ${m.path} overlap; give each its own path`);
        }
      }
    }
    for (const m of mounts) await this.#d.volumes.require(tenant, m.name);
    return mounts;
  }

  async #present(rec: VolumeRecord): Promise<Volume> {
    const [used, users] = await Promise.all([
      this.#d.workspaces.volumes.usedBytes(rec.id),
      this.#d.volumes.users(rec.id),
    ]);
    return {
      id: rec.id,
      name: rec.name,
      size_bytes: rec.sizeBytes,
      used_bytes: used,
      created_at: new Date(rec.createdAt).toISOString(),
      mounted_by: users.map((u) => ({ session_id: u.sessionId, path: u.path, read_only: u.readOnly })),
    };
  }
}
