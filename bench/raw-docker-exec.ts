/**
 * raw-docker-exec: `python3 -c print(1)` exec'd into an already running container of the same image and
 * flags (create exec, start hijacked, stream end, inspect ExitCode) — the floor for any warm sandbox that
 * starts a new process per run.
 */
import { randomBytes } from 'node:crypto';
import { N, WARMUP } from './lib/knobs.ts';
import { main } from './lib/main.ts';
import { makeWorkspace, rawExec, startIdleContainer } from './lib/raw-docker.ts';
import { emit, emitError, summarize } from './lib/stats.ts';

const TARGET = 'reference (no target): floor of a process-per-run warm sandbox';

main(async () => {
  const runId = randomBytes(4).toString('hex');
  const ws = await makeWorkspace(runId);
  try {
    const c = await startIdleContainer(runId, ws.dir);
    for (let i = 0; i < WARMUP; i++) await rawExec(c);
    const samples: number[] = [];
    for (let i = 0; i < N * 2; i++) samples.push(await rawExec(c));
    emit({ bench: 'raw-docker-exec', ...summarize(samples), target: TARGET, pass: true });
  } catch (e) {
    emitError('raw-docker-exec', TARGET, e);
  } finally {
    await ws.remove();
  }
});
