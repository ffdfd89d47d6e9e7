import assert from 'node:assert/strict';
import { access, readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Where scripts/setup.sh --for-tests installs n8n: SANDGATE_CACHE_DIR, shared by every clone on the machine. */
const CACHE =
  process.env.SANDGATE_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'sandgate');
const DIR = join(CACHE, 'n8n-2.8.4');
export const N8N = join(DIR, 'node_modules/.bin/n8n');
/** A first install (npm, then a native build) takes minutes on a small machine. */
const INSTALL_WAIT_MS = 15 * 60_000;

const read = (path: string): Promise<string | undefined> => readFile(path, 'utf8').catch(() => undefined);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Waits for n8n, which setup installs in the background (scripts/install-n8n.sh writes its exit status to
 * <dir>.status when it ends); fails with the install's log if it failed, or says how to get it if nothing installs it.
 */
export async function n8nInstalled(): Promise<string> {
  const deadline = Date.now() + INSTALL_WAIT_MS;
  for (;;) {
    const status = (await read(`${DIR}.status`))?.trim();
    if (status === '0') {
      await access(N8N);
      return N8N;
    }
    if (status !== undefined) {
      const log = ((await read(`${DIR}.log`)) ?? '').split('\n').slice(-20).join('\n');
      assert.fail(`installing n8n into ${DIR} failed (exit ${status}); the end of ${DIR}.log:\n${log}`);
    }
    const pid = Number((await read(`${DIR}.pid`))?.trim());
    if (!(pid > 0 && alive(pid))) {
      assert.fail(`${N8N} is missing: run \`bash scripts/setup.sh --for-tests\` (it installs n8n)`);
    }
    if (Date.now() > deadline) assert.fail(`n8n was still being installed after ${INSTALL_WAIT_MS / 60_000} minutes`);
    await new Promise((r) => setTimeout(r, 2000));
  }
}
