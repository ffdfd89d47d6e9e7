import type Dockerode from 'dockerode';
import type { Death } from '../agent/agent-run.ts';
import { stoppedByEngine } from './engine-stops.ts';

/**
 * How a sandbox ended that stopped mid-run. The attach stream can end a moment before the engine has recorded the
 * exit, so the exit is waited for (briefly); one still running after that is in no known state and is killed.
 */
export async function deathOf(
  container: Dockerode.Container,
  kill: () => Promise<void>,
  sinceMs: number,
): Promise<Death> {
  const stopped = await Promise.race([
    container.wait({ condition: 'not-running' }).then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 5000).unref()),
  ]);
  if (!stopped) await kill().catch(() => {});
  const state = await container.inspect().then(
    (info) => info.State,
    () => undefined,
  );
  const oomKilled = state?.OOMKilled === true;
  // One we had to kill here was in no known state; one that stopped on its own may have been stopped by the engine.
  const engineStopped = stopped && !oomKilled && (await stoppedByEngine(container, sinceMs));
  return { exitCode: state?.ExitCode ?? -1, oomKilled, engineStopped };
}
