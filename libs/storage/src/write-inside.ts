import { randomBytes } from 'node:crypto';
import { constants, type Stats } from 'node:fs';
import { link, mkdir, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { SandgateError } from '@sandgate/contracts';
import { RESERVED_PREFIX, normalizeUserPath, splitPath } from './user-path.ts';
import { at, errno, openChildDir, openRoot } from './fd-path.ts';

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = constants;
export const TEMP_PREFIX = `${RESERVED_PREFIX}-tmp-`;
const FILE_MODE = 0o644;
const DIR_MODE = 0o755;

export interface Owner {
  uid: number;
  gid: number;
}
export interface WriteOptions {
  maxBytes: number;
  overwrite: boolean;
  owner?: Owner;
  /** Called with the bytes written before the file takes its name; throwing leaves everything as it was. */
  beforePlace?(bytes: number): Promise<void>;
}

/** Opens (creating when missing) each parent directory, refusing anything that is not a real directory. */
async function openParents(root: string, relPath: string, segments: string[], owner?: Owner): Promise<FileHandle> {
  let dir: FileHandle;
  try {
    dir = await openRoot(root);
  } catch (e) {
    throw new SandgateError('file_not_found', 'the workspace directory does not exist', { cause: e });
  }
  try {
    for (const segment of segments) {
      const parent = dir;
      dir = await openOrCreateDir(parent, segment, relPath, owner);
      await parent.close();
    }
    return dir;
  } catch (e) {
    await dir.close().catch(() => undefined);
    throw e;
  }
}

async function openOrCreateDir(parent: FileHandle, name: string, relPath: string, owner?: Owner): Promise<FileHandle> {
  // A symlink answers ELOOP or ENOTDIR (kernels differ), a file or special file ENOTDIR.
  const refuse = (e: unknown) =>
    ['ELOOP', 'ENOTDIR'].includes(errno(e) ?? '')
      ? new SandgateError('invalid_path', `"${name}" in "${relPath}" exists and is not a directory`, { cause: e })
      : errno(e) === 'ENOENT'
        ? vanished(relPath, e)
        : e;
  try {
    return await openChildDir(parent, name);
  } catch (e) {
    if (errno(e) !== 'ENOENT') throw refuse(e);
  }
  try {
    // mkdir never follows a symlink at its last component: one planted meanwhile fails with EEXIST.
    await mkdir(at(parent, name), DIR_MODE);
  } catch (e) {
    if (errno(e) !== 'EEXIST') throw refuse(e);
  }
  let dir: FileHandle;
  try {
    dir = await openChildDir(parent, name);
  } catch (e) {
    throw refuse(e);
  }
  // Through the fd, never the path: a path-based chown could be redirected by a swap to a symlink.
  try {
    await dir.chmod(DIR_MODE);
    if (owner) await dir.chown(owner.uid, owner.gid);
    return dir;
  } catch (e) {
    await dir.close().catch(() => undefined);
    throw e;
  }
}

/** Copies `source` into `file`, stopping (and destroying the source) the moment it passes `maxBytes`. */
async function copyLimited(
  source: NodeJS.ReadableStream | Readable,
  file: FileHandle,
  maxBytes: number,
): Promise<void> {
  let total = 0;
  try {
    for await (const chunk of source as AsyncIterable<Buffer | string>) {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      total += buf.length;
      if (total > maxBytes) {
        throw new SandgateError('payload_too_large', `file is larger than the limit of ${maxBytes} bytes`);
      }
      // One chunk at a time: the for-await pulls the next one only after this write, so memory stays flat.
      let offset = 0;
      while (offset < buf.length) offset += (await file.write(buf, offset, buf.length - offset)).bytesWritten;
    }
  } catch (e) {
    // Leaving the loop early already ends a Readable's iterator; an old-style stream needs telling.
    const destroyable = source as { destroy?: (err?: Error) => void };
    if (typeof destroyable.destroy === 'function') destroyable.destroy();
    throw e;
  }
}

/**
 * Streams `source` into root/relPath atomically through a temp file in the target directory. No fsync: workspaces
 * are scratch space and a crash loses the session anyway, so atomic visibility is what matters, not durability.
 */
export async function writeFileInside(
  root: string,
  relPath: string,
  source: NodeJS.ReadableStream | Readable,
  opts: WriteOptions,
): Promise<Stats> {
  let dir: FileHandle | undefined;
  try {
    const { parents, leaf } = splitPath(normalizeUserPath(relPath));
    dir = await openParents(root, relPath, parents, opts.owner);
    // A refusal before reading leaves `source` untouched: the caller can still drain it and answer on the same socket.
    return await writeInDir(dir, leaf, relPath, source, opts);
  } finally {
    await dir?.close();
  }
}

async function writeInDir(
  dir: FileHandle,
  leaf: string,
  relPath: string,
  source: NodeJS.ReadableStream | Readable,
  opts: WriteOptions,
): Promise<Stats> {
  const temp = `${TEMP_PREFIX}${randomBytes(12).toString('hex')}`;
  // O_EXCL|O_CREAT never follows a symlink, O_NOFOLLOW says so twice.
  const file = await open(at(dir, temp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, FILE_MODE).catch((e: unknown) => {
    throw errno(e) === 'ENOENT' ? vanished(relPath, e) : e;
  });
  let placed = false;
  try {
    await file.chmod(FILE_MODE);
    await copyLimited(source, file, opts.maxBytes);
    if (opts.beforePlace) await opts.beforePlace((await file.stat()).size);
    await place(dir, temp, leaf, relPath, opts.overwrite);
    placed = true;
    // After placing, so a non-root gateway with CAP_CHOWN still passes protected_hardlinks on link().
    if (opts.owner) await file.chown(opts.owner.uid, opts.owner.gid);
    return await file.stat();
  } finally {
    await file.close();
    if (!placed) await unlink(at(dir, temp)).catch(() => undefined);
  }
}

/** A directory we hold or were about to use was deleted (or renamed over) by the sandbox while we worked. */
function vanished(relPath: string, cause: unknown): SandgateError {
  return new SandgateError('invalid_path', `the directory of "${relPath}" was removed while writing`, { cause });
}

async function place(dir: FileHandle, temp: string, leaf: string, relPath: string, overwrite: boolean): Promise<void> {
  const exists = (cause: unknown) =>
    new SandgateError('file_exists', overwrite ? `"${relPath}" is a directory` : `"${relPath}" already exists`, {
      cause,
    });
  if (overwrite) {
    // rename replaces a file or a symlink itself (never its target), and fails on a directory.
    try {
      await rename(at(dir, temp), at(dir, leaf));
    } catch (e) {
      if (['EISDIR', 'ENOTEMPTY', 'EEXIST', 'ENOTDIR'].includes(errno(e) ?? '')) throw exists(e);
      throw errno(e) === 'ENOENT' ? vanished(relPath, e) : e;
    }
    return;
  }
  // link() fails atomically when the name is taken by anything at all, which rename cannot promise.
  try {
    await link(at(dir, temp), at(dir, leaf));
  } catch (e) {
    if (errno(e) === 'EEXIST') throw exists(e);
    throw errno(e) === 'ENOENT' ? vanished(relPath, e) : e;
  }
  await unlink(at(dir, temp));
}
