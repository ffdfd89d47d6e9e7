import type Dockerode from 'dockerode';
import type { Death } from '../agent/agent-run.ts';
import { stoppedByEngine } from './engine-stops.ts';

/**
 * The exit status of a gVisor sandbox whose own kernel stopped. gVisor's kernel (the Sentry) is a Go program, and the
 * Go runtime exits with status 2 when it panics. Its ptrace platform backs each process of the sandbox with a host
 * process in the container's cgroup; once the cgroup's pids limit refuses it one more, the Sentry panics ("error
 * initializing first thread: resource temporarily unavailable", in runsc's debug log) and the whole sandbox ends,
 * where runc would have given the program EAGAIN.
 */
const GVISOR_PANIC_STATUS = 2;

/** What a run reports when gVisor ended its sandbox at the pids limit. */
export const GVISOR_PIDS_LIMIT =
  'The sandbox reached its limit on processes and threads: under gVisor that ends the whole sandbox ' +
  '(with runc the program would have got EAGAIN); start fewer processes.';

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
  const info = await container.inspect().catch(() => undefined);
  const state = info?.State;
  const exitCode = state?.ExitCode ?? -1;
  const oomKilled = state?.OOMKilled === true;
  // One we had to kill here was in no known state; one that stopped on its own may have been stopped by the engine.
  const engineStopped = stopped && !oomKilled && (await stoppedByEngine(container, sinceMs));
  const death: Death = { exitCode, oomKilled, engineStopped };
  if (stopped && !oomKilled && !engineStopped && gvisorPanicked(info?.HostConfig.Runtime, exitCode)) {
    death.pidsLimit = GVISOR_PIDS_LIMIT;
  }
  return death;
}

/**
 * Whether an agent sandbox that stopped on its own, with no exit of the program reported, was ended by gVisor's kernel
 * panicking. The cgroup that would show the limit reached is gone with the sandbox (runsc removes it as the sandbox
 * ends), and the engine records only the status (no error, no OOM, no log line). But the agent and its init do not
 * exit with 2 (a program's own exit status comes as a frame, not as the sandbox's), so under gVisor that status is
 * the Sentry's panic, and the pids limit is the panic a run provokes. One exception is left: the agent of a stateful
 * session ends with its interpreter's status, so a cell's os._exit(2) reads as the pids limit; it misleads only its own
 * run.
 */
const gvisorPanicked = (runtime: string | undefined, exitCode: number): boolean =>
  runtime === 'runsc' && exitCode === GVISOR_PANIC_STATUS;
