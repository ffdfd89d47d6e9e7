import { constants as osConstants } from 'node:os';

/**
 * The few libc calls Node has no binding for, through koffi (an FFI; docs/adr/0015-btrfs-ioctls-through-koffi.md says
 * why): loaded once, on first use. Each call runs on libuv's thread pool, so one that waits (a btrfs snapshot waits
 * for a transaction commit) never blocks the event loop; koffi hands back the errno of that thread.
 */
interface Call<A extends unknown[]> {
  async(...args: [...A, (err: unknown, result: number) => void]): void;
}

interface Libc {
  ioctl: Call<[fd: number, request: number, arg: Buffer]>;
  renameat2: Call<[oldDir: number, oldPath: string, newDir: number, newPath: string, flags: number]>;
  errno(): number;
}

let loaded: Promise<Libc> | undefined;

function libc(): Promise<Libc> {
  loaded ??= import('koffi').then(({ default: koffi }) => {
    const lib = koffi.load('libc.so.6');
    return {
      ioctl: lib.func('int ioctl(int fd, unsigned long request, void *arg)') as unknown as Libc['ioctl'],
      renameat2: lib.func(
        'int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)',
      ) as unknown as Libc['renameat2'],
      errno: () => koffi.errno(),
    };
  });
  return loaded;
}

const ERRNO_NAMES = new Map(Object.entries(osConstants.errno).map(([name, code]) => [code, name]));

/** Settles with the call's result: 0 resolves, anything else rejects with the errno (`code`) it failed with. */
function settle(what: string, errno: () => number, resolve: () => void, reject: (e: Error) => void) {
  return (err: unknown, result: number): void => {
    if (err) return reject(err as Error);
    if (result === 0) return resolve();
    const code = errno();
    const name = ERRNO_NAMES.get(code) ?? `errno ${code}`;
    reject(Object.assign(new Error(`${what}: ${name}`), { code: name, errno: -code }));
  };
}

/** ioctl(fd, request, arg) on the thread pool. */
export async function ioctl(what: string, fd: number, request: number, arg: Buffer): Promise<void> {
  const c = await libc();
  await new Promise<void>((resolve, reject) => c.ioctl.async(fd, request, arg, settle(what, c.errno, resolve, reject)));
}

const AT_FDCWD = -100;
const RENAME_EXCHANGE = 2;

/** Swaps the entries at two absolute paths in one step (renameat2 RENAME_EXCHANGE): neither is ever missing. */
export async function exchangePaths(a: string, b: string): Promise<void> {
  const c = await libc();
  await new Promise<void>((resolve, reject) =>
    c.renameat2.async(
      AT_FDCWD,
      a,
      AT_FDCWD,
      b,
      RENAME_EXCHANGE,
      settle(`exchanging ${a} and ${b}`, c.errno, resolve, reject),
    ),
  );
}
