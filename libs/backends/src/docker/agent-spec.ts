import type Dockerode from 'dockerode';
import { asSandboxUser, CONTAINER_USER, hostConfig, WORKDIR, type SandboxLimits, type SandboxSettings } from './container-spec.ts';

/** Where the image keeps the in-sandbox agent (images/runtime/agent/). */
export const AGENT_PATH = '/usr/lib/sandgate/agent/sandgate_agent.py';

/**
 * Whether the agent keeps a python interpreter started ahead for process-mode runs: `fresh` for pool sandboxes (at
 * start and after each reset, never where a run's leftovers could reach it), `always` for process sessions (after
 * every run), `never` where runs happen in the agent itself (stateful).
 */
export type Prewarm = 'never' | 'fresh' | 'always';

/** A session's long-lived sandbox: any worker on the host finds it by this name. */
export const sessionContainerName = (sessionId: string): string => `sandgate-s-${sessionId}`;

export interface AgentSandbox {
  name: string;
  labels: Record<string, string>;
  limits: SandboxLimits;
  /** Host directory bind-mounted at /mnt/data. */
  workspaceDir: string;
  prewarm: Prewarm;
}

/**
 * Create options for a sandbox that runs the agent: the same lock-down as a one-execution sandbox, with the
 * agent as its program and stdin kept open as the agent's control channel.
 */
export function agentSpec(sandbox: AgentSandbox, s: SandboxSettings): Dockerode.ContainerCreateOptions {
  return {
    name: sandbox.name,
    Image: s.image,
    Cmd: asSandboxUser(s.user, ['python3', '-u', AGENT_PATH, `--prewarm=${sandbox.prewarm}`]),
    // Nothing of the worker's environment; a job's variables reach only the program they are for, per run.
    Env: [],
    User: CONTAINER_USER,
    WorkingDir: WORKDIR,
    Labels: sandbox.labels,
    Tty: false,
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: true,
    OpenStdin: true,
    // Stdin outlives each attach: every run attaches, sends its request, and detaches.
    StdinOnce: false,
    NetworkDisabled: true,
    HostConfig: hostConfig(sandbox.limits, sandbox.workspaceDir, s),
  };
}
