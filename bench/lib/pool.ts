/** Whether this tree has a warm pool at all: loadConfig must read SANDGATE_POOL_SIZE. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ROOT } from './stack.ts';

export async function poolConfigured(): Promise<boolean> {
  const src = await readFile(join(ROOT, 'libs/state/src/config.ts'), 'utf8').catch(() => '');
  return src.includes('SANDGATE_POOL_SIZE');
}
