import type Dockerode from 'dockerode';
import { parseUser } from './pool-dirs.ts';
import { WORKDIR } from '../run/sandbox.ts';
import { EGRESS_MOUNT, EGRESS_SOCKET } from './egress-sockets.ts';
import { SERVICES_MOUNT, SERVICES_TOKEN_ENV } from '../services.ts';
import {
  asSandboxUser,
  CONTAINER_USER,
  hostConfig,
  setpriv,
  type SandboxLimits,
  type SandboxSettings,
} from './container-spec.ts';

/** Where the image keeps the in-sandbox agent (images/runtime/agent/). */
export const AGENT_PATH = '/usr/lib/sandgate/agent/sandgate_agent.py';

/**
 * What the agent starts ahead: a python for process-mode runs, `fresh` in pool sandboxes (at start and after each
 * reset, never where a run's leftovers could reach it) or `always` in process sessions (after every run); or, in a
 * stateful session, `interpreter`: the session's interpreter, a process the agent drives (sandgate_stateful.py).
 */
export type Prewarm = 'never' | 'fresh' | 'always' | 'interpreter';

/** A session's long-lived sandbox: any worker on the host finds it by this name. */
export const sessionContainerName = (sessionId: string): string => `sandgate-s-${sessionId}`;

/** The uid the agent of pool and process-session sandboxes runs as: one that no program it starts has. */
export const AGENT_UID = 999;
/** What that agent keeps: to start programs as the sandbox user (setpriv) and to end them (reset, cancel). */
const AGENT_CAPS = ['setuid', 'setgid', 'setpcap', 'kill'].map((c) => `+${c}`).join(',');

/**
 * The agent's command. It runs as AGENT_UID with just AGENT_CAPS, and starts every program (a stateful session's
 * interpreter too) as the sandbox user through setpriv, so no run can trace it, read its descriptors, change its
 * limits or signal it. Under gVisor (`runsc`), which does not carry ambient capabilities across exec, the agent is the
 * sandbox user itself, not dumpable and under its seccomp filter: there gVisor's own kernel stands between the sandbox
 * and the host as well.
 */
export function agentCommand(
  sandbox: Pick<AgentSandbox, 'prewarm'>,
  s: Pick<SandboxSettings, 'user' | 'runtime'>,
): string[] {
  const { user } = s;
  const prewarm = `--prewarm=${sandbox.prewarm}`;
  if (agentIsSandboxUser(s)) return asSandboxUser(user, ['python3', '-u', AGENT_PATH, prewarm]);
  const { uid, gid } = parseUser(user);
  // -S: no site hooks, which would leave files of the agent's uid in /tmp for the sandbox user's reset to trip on.
  return setpriv(
    { uid: AGENT_UID, gid: AGENT_UID },
    ['python3', '-u', '-S', AGENT_PATH, prewarm, `--run-as=${uid}:${gid}`],
    AGENT_CAPS,
  );
}

export interface AgentSandbox {
  name: string;
  labels: Record<string, string>;
  limits: SandboxLimits;
  /** Host directory bind-mounted at /mnt/data. */
  workspaceDir: string;
  prewarm: Prewarm;
  /** Host directory of the session's egress proxy socket (egress-sockets.ts); absent: no network at all. */
  egressDir?: string;
  /** A session's services (services.ts): the host directory of the agent's socket, and the SHA-256 of its token. */
  services?: { dir: string; tokenSha256: string };
  /** A session's volumes: each host directory bind-mounted at its path, read-only where asked. */
  volumes?: readonly VolumeBind[];
}

/** A volume's directory on the host, and where and how the sandbox sees it. */
export interface VolumeBind {
  source: string;
  target: string;
  readOnly: boolean;
}

/** The uid a sandbox's agent runs as (agentCommand), which alone may enter its services directory. */
export function agentUid(s: Pick<SandboxSettings, 'user' | 'runtime'>): number {
  return agentIsSandboxUser(s) ? parseUser(s.user).uid : AGENT_UID;
}

/** gVisor: the agent is the sandbox user itself (see agentCommand). */
const agentIsSandboxUser = (s: Pick<SandboxSettings, 'runtime'>): boolean => s.runtime === 'runsc';

/**
 * Create options for a sandbox that runs the agent: the same lock-down as a one-execution sandbox, with the
 * agent as its program and stdin kept open as the agent's control channel.
 */
export function agentSpec(sandbox: AgentSandbox, s: SandboxSettings): Dockerode.ContainerCreateOptions {
  const host = hostConfig(sandbox.limits, sandbox.workspaceDir, s);
  return {
    name: sandbox.name,
    Image: s.image,
    Cmd: agentCommand(sandbox, s),
    // Nothing of the worker's environment; a job's variables reach only the program they are for, per run.
    Env: [
      ...(sandbox.egressDir === undefined ? [] : [`SANDGATE_EGRESS_SOCKET=${EGRESS_SOCKET}`]),
      ...(sandbox.services === undefined ? [] : [`${SERVICES_TOKEN_ENV}=${sandbox.services.tokenSha256}`]),
    ],
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
    HostConfig: {
      ...host,
      CapAdd: [...(host.CapAdd ?? []), 'KILL'],
      Mounts: [
        ...(host.Mounts ?? []),
        ...(sandbox.egressDir === undefined
          ? []
          : [{ Type: 'bind' as const, Source: sandbox.egressDir, Target: EGRESS_MOUNT, ReadOnly: true }]),
        ...(sandbox.services === undefined
          ? []
          : [{ Type: 'bind' as const, Source: sandbox.services.dir, Target: SERVICES_MOUNT, ReadOnly: false }]),
        // Private propagation (the default): nothing mounted under a volume on the host later reaches the sandbox.
        ...(sandbox.volumes ?? []).map((v) => ({
          Type: 'bind' as const,
          Source: v.source,
          Target: v.target,
          ReadOnly: v.readOnly,
        })),
      ],
    },
  };
}
