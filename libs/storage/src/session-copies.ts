import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { copyFile, lstat, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SandgateError, SNAPSHOT_NAME_PATTERN } from '@sandgate/contracts';
import { deleteSubvolume, limitSubvolume, snapshotSubvolume, SUBVOLUME_ROOT_INO } from './btrfs.ts';
import { copyTree } from './copy-tree.ts';
import { errno, openRoot } from './fd-path.ts';
import { exchangePaths } from './libc.ts';
import { removeDirAt } from './remove-tree.ts';
import type { Workspaces } from './workspaces.ts';

/** The file a stateful session's saved interpreter is kept in, beside its files (never unpickled out of a sandbox). */
export const INTERPRETER_FILE = 'interpreter.dill';
const FILES = 'files';
const UNSAVED_FILE = 'unsaved.json';
const UNDO_STEP = /^(\d{10})-([A-Za-z0-9_]{1,64})$/;
const SNAPSHOT_NAME = new RegExp(SNAPSHOT_NAME_PATTERN);

/** One undo step of a session: its files as they were before a run (and its interpreter, with `undo: "state"`). */
export interface UndoStep {
  seq: number;
  /** The run it was kept before. */
  executionId: string;
  dir: string;
}

const exists = (path: string): Promise<boolean> =>
  lstat(path).then(
    () => true,
    () => false,
  );

/**
 * Copies of sessions, in the data directory beside their files: a fork's files, named snapshots, undo steps, and a
 * stateful session's saved interpreter. Under disk quotas (btrfs) every copy of files is a subvolume snapshot, which
 * copies nothing (read-only for snapshots and undo steps; a fork's is writable and gets the session quota); elsewhere
 * it is a copy, by reflink where the filesystem can (copy-tree.ts). Layout, under SANDGATE_DATA_DIR:
 *   state/<id>/interpreter.dill                  the saved interpreter of a paused stateful session
 *   snapshots/<id>/<name>/files/ [interpreter.dill]
 *   undo/<id>/<seq>-<execution id>/files/ [interpreter.dill]
 * Ids and names are checked (SESSION_ID_PATTERN, SNAPSHOT_NAME_PATTERN) before they reach here.
 */
export class SessionCopies {
  readonly #workspaces: Workspaces;
  readonly #dataDir: string;

  constructor(workspaces: Workspaces) {
    this.#workspaces = workspaces;
    this.#dataDir = workspaces.dataDir;
  }

  /** `snapshot`: copies are btrfs snapshots (nothing copied); `copy`: files are copied. Undo needs snapshots. */
  get kind(): 'snapshot' | 'copy' {
    return this.#workspaces.quota ? 'snapshot' : 'copy';
  }

  /** The session id, checked: it becomes part of host paths. */
  #id(sessionId: string): string {
    this.#workspaces.dir(sessionId);
    return sessionId;
  }

  stateDir(sessionId: string): string {
    return join(this.#dataDir, 'state', this.#id(sessionId));
  }

  /** Where the session's saved interpreter is (it may not exist). */
  stateFile(sessionId: string): string {
    return join(this.stateDir(sessionId), INTERPRETER_FILE);
  }

  /** Bytes of the saved interpreter; 0 when there is none. */
  async stateBytes(sessionId: string): Promise<number> {
    return stat(this.stateFile(sessionId)).then(
      (s) => s.size,
      () => 0,
    );
  }

  /** Notes the variables a save left out, to be named again when they are loaded (the `resumed` event). */
  async noteUnsaved(sessionId: string, unsaved: { name: string; reason: string }[]): Promise<void> {
    await mkdir(this.stateDir(sessionId), { recursive: true, mode: 0o700 });
    await writeFile(join(this.stateDir(sessionId), UNSAVED_FILE), JSON.stringify(unsaved.slice(0, 1000)), {
      mode: 0o600,
    });
  }

  /** The variables the session's last save left out (noteUnsaved); none when nothing was noted. */
  async unsavedOf(sessionId: string): Promise<{ name: string; reason: string }[]> {
    const text = await readFile(join(this.stateDir(sessionId), UNSAVED_FILE), 'utf8').catch(() => '[]');
    try {
      const list = JSON.parse(text) as unknown;
      return Array.isArray(list) ? (list as { name: string; reason: string }[]) : [];
    } catch {
      return [];
    }
  }

  /** Makes `file` (a checkpoint of another session's interpreter) the session's saved interpreter. */
  async adoptState(file: string, sessionId: string): Promise<void> {
    await this.#copyState(file, this.stateFile(sessionId));
  }

  /** Whether an undo step kept the interpreter's variables too. */
  hasUndoState(step: UndoStep): Promise<boolean> {
    return exists(join(step.dir, INTERPRETER_FILE));
  }

  /** Where an undo step keeps the interpreter's variables (undo "state"). */
  undoStateFile(step: UndoStep): string {
    return join(step.dir, INTERPRETER_FILE);
  }

  async removeState(sessionId: string): Promise<void> {
    await rm(this.stateDir(sessionId), { recursive: true, force: true });
  }

  /** A new session's files (and saved interpreter) as a copy of another's. `to` must have no directory yet. */
  async fork(from: string, to: string): Promise<void> {
    await this.#copyFiles(this.#workspaces.dir(from), this.#workspaces.dir(to), false);
    await this.#copyState(this.stateFile(from), this.stateFile(to));
    await this.#copyState(join(this.stateDir(from), UNSAVED_FILE), join(this.stateDir(to), UNSAVED_FILE));
  }

  snapshotDir(sessionId: string, name: string): string {
    if (!SNAPSHOT_NAME.test(name)) throw new SandgateError('validation_failed', `"${name}" is no snapshot name`);
    return join(this.#snapshotsOf(sessionId), name);
  }

  #snapshotsOf(sessionId: string): string {
    return join(this.#dataDir, 'snapshots', this.#id(sessionId));
  }

  /**
   * Keeps the session's files as they are now, with `state` (a file holding a saved interpreter) when given, as the
   * snapshot `name`; answers its bytes (files and interpreter). snapshot_exists when there is one by that name.
   */
  async snapshot(sessionId: string, name: string, state?: string): Promise<number> {
    const dir = this.snapshotDir(sessionId, name);
    await mkdir(join(dir, '..'), { recursive: true, mode: 0o700 });
    await mkdir(dir, { mode: 0o700 }).catch((e: unknown) => {
      if (errno(e) === 'EEXIST')
        throw new SandgateError('snapshot_exists', `session ${sessionId} has a snapshot ${name}`);
      throw e;
    });
    try {
      await this.#copyFiles(await this.#workspaces.create(sessionId), join(dir, FILES), true);
      if (state !== undefined) await this.#copyState(state, join(dir, INTERPRETER_FILE));
    } catch (err) {
      await this.#removeCopy(dir).catch(() => {});
      throw err;
    }
    return (await this.#workspaces.usedBytesAt(join(dir, FILES))) + (await this.#size(join(dir, INTERPRETER_FILE)));
  }

  /** The saved interpreter a snapshot holds, if it holds one. */
  async snapshotState(sessionId: string, name: string): Promise<string | undefined> {
    const file = join(this.snapshotDir(sessionId, name), INTERPRETER_FILE);
    return (await exists(file)) ? file : undefined;
  }

  /**
   * Makes `into`'s files (and saved interpreter: the snapshot's, or none) those of the snapshot. The session's
   * sandbox must be gone: it would keep the files it had mounted.
   */
  async restoreSnapshot(sessionId: string, name: string, into: string = sessionId): Promise<void> {
    const dir = this.snapshotDir(sessionId, name);
    if (!(await exists(join(dir, FILES)))) {
      throw new SandgateError('snapshot_not_found', `session ${sessionId} has no snapshot ${name}`);
    }
    await this.#replaceFiles(into, join(dir, FILES));
    await this.removeState(into);
    const state = await this.snapshotState(sessionId, name);
    if (state !== undefined) await this.#copyState(state, this.stateFile(into));
  }

  async deleteSnapshot(sessionId: string, name: string): Promise<void> {
    await this.#removeCopy(this.snapshotDir(sessionId, name));
  }

  undoDir(sessionId: string): string {
    return join(this.#dataDir, 'undo', this.#id(sessionId));
  }

  /** The session's undo steps, newest first. */
  async undoSteps(sessionId: string): Promise<UndoStep[]> {
    const dir = this.undoDir(sessionId);
    const names = await readdir(dir).catch((e: unknown) => {
      if (errno(e) === 'ENOENT') return [];
      throw e;
    });
    return names
      .flatMap((n) => {
        const m = UNDO_STEP.exec(n);
        return m ? [{ seq: Number(m[1]), executionId: m[2]!, dir: join(dir, n) }] : [];
      })
      .sort((a, b) => b.seq - a.seq);
  }

  /**
   * Keeps the session's files as they are, before the run `executionId`: an undo step (a read-only snapshot). Answers
   * the step; the caller may add the interpreter to it (`INTERPRETER_FILE` in its dir), and prunes with pruneUndo.
   */
  async keepUndo(sessionId: string, executionId: string, steps?: UndoStep[]): Promise<UndoStep> {
    const dir = this.undoDir(sessionId);
    const seq = ((steps ?? (await this.undoSteps(sessionId)))[0]?.seq ?? 0) + 1;
    const step = { seq, executionId, dir: join(dir, `${String(seq).padStart(10, '0')}-${executionId}`) };
    await mkdir(step.dir, { recursive: true, mode: 0o700 });
    await this.#copyFiles(this.#workspaces.dir(sessionId), join(step.dir, FILES), true);
    return step;
  }

  /** Drops all but the newest `keep` undo steps. */
  async pruneUndo(sessionId: string, keep: number, steps?: UndoStep[]): Promise<void> {
    for (const step of (steps ?? (await this.undoSteps(sessionId))).slice(keep)) await this.#removeCopy(step.dir);
  }

  /**
   * Brings the session's files back to the newest undo step, which goes (so the next undo goes one run further back);
   * its saved interpreter, if it kept one, becomes the session's. Null when there is no step. The session's sandbox
   * must be gone.
   */
  async undo(sessionId: string): Promise<(UndoStep & { state: boolean }) | null> {
    const [step] = await this.undoSteps(sessionId);
    if (step === undefined) return null;
    await this.#replaceFiles(sessionId, join(step.dir, FILES));
    const state = join(step.dir, INTERPRETER_FILE);
    const withState = await exists(state);
    if (withState) {
      await this.removeState(sessionId);
      await mkdir(this.stateDir(sessionId), { recursive: true, mode: 0o700 });
      await rename(state, this.stateFile(sessionId));
    }
    await this.#removeCopy(step.dir);
    return { ...step, state: withState };
  }

  /** Everything kept for a session that is gone: its saved interpreter, snapshots and undo steps. */
  async removeAll(sessionId: string): Promise<void> {
    await this.removeState(sessionId);
    for (const dir of [this.#snapshotsOf(sessionId), this.undoDir(sessionId)]) {
      const names = await readdir(dir).catch(() => []);
      for (const name of names) await this.#removeCopy(join(dir, name));
      await rm(dir, { recursive: true, force: true });
    }
  }

  /** Makes `to` a copy of the directory `from`: a snapshot where `from` is a subvolume, else a copy of its tree. */
  async #copyFiles(from: string, to: string, readOnly: boolean): Promise<void> {
    const quota = this.#workspaces.quota;
    if (quota !== undefined && (await stat(from)).ino === SUBVOLUME_ROOT_INO) {
      await snapshotSubvolume(from, to, { readOnly });
      if (!readOnly) await limitSubvolume(to, quota.bytes);
      return;
    }
    await copyTree(from, to);
  }

  async #copyState(from: string, to: string): Promise<void> {
    if (!(await exists(from))) return;
    await mkdir(join(to, '..'), { recursive: true, mode: 0o700 });
    await rm(to, { force: true });
    await copyFile(from, to, constants.COPYFILE_FICLONE);
  }

  async #size(path: string): Promise<number> {
    return stat(path).then(
      (s) => s.size,
      () => 0,
    );
  }

  /** Swaps the session's directory for a writable copy of `source` in one step, then removes the old one. */
  async #replaceFiles(sessionId: string, source: string): Promise<void> {
    const dir = await this.#workspaces.create(sessionId);
    const spare = join(this.#dataDir, 'sessions', `.replace-${randomBytes(6).toString('hex')}`);
    await this.#copyFiles(source, spare, false);
    try {
      await exchangePaths(spare, dir);
    } catch (err) {
      await this.#removeCopy(spare).catch(() => {});
      throw err;
    }
    await this.#removeCopy(spare);
  }

  /** Removes a copy: a subvolume is deleted whole (read-only or not), a directory tree without following anything. */
  async #removeCopy(dir: string): Promise<void> {
    const st = await lstat(dir).catch(() => undefined);
    if (st === undefined) return;
    if (st.isDirectory()) {
      for (const name of await readdir(dir).catch(() => [] as string[])) {
        const child = join(dir, name);
        const cst = await lstat(child).catch(() => undefined);
        if (cst?.isDirectory() && cst.ino === SUBVOLUME_ROOT_INO && this.#workspaces.quota) {
          await deleteSubvolume(child);
        }
      }
    }
    if (st.ino === SUBVOLUME_ROOT_INO && this.#workspaces.quota) {
      await deleteSubvolume(dir);
      return;
    }
    const parent = await openRoot(join(dir, '..'));
    try {
      await removeDirAt(parent, dir.split('/').pop()!);
    } finally {
      await parent.close();
    }
  }
}
