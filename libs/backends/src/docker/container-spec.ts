import type Dockerode from 'dockerode';
import type { ExecutionJob } from '@sandgate/contracts';
import { ownershipLabels } from '../housekeeping/labels.ts';
import { programFor, WORKDIR } from '../run/sandbox.ts';
import { parseUser } from './pool-dirs.ts';

/** The engine-facing settings a container spec needs beyond the job itself. */
export interface SandboxSettings {
  image: string;
  runtime: string | undefined;
  user: string;
  pidsLimit: number;
  tmpfsBytes: number;
  nofile: number;
  /** Put on every container as org.sandgate.deployment. */
  deployment: string;
}

/** The resources one sandbox may use, as a job asks for them. */
export interface SandboxLimits {
  memory_mb: number;
  cpus: number;
}

/**
 * `cmd` run as the sandbox user. The container itself starts as root so that its init (PID 1, which holds the
 * container's stdio: the worker's channel to an agent) has a uid no sandboxed program has, and cannot be traced or
 * read through /proc by one; setpriv then drops to the sandbox user with no capability left, not even in the
 * bounding set, before anything of ours or the user's runs.
 */
export function asSandboxUser(user: string, cmd: string[]): string[] {
  return setpriv(parseUser(user), cmd);
}

/**
 * `cmd` as `uid:gid` through setpriv, with no supplementary group and no capability but `keep` (`+name,…`), which
 * it holds as ambient capabilities across exec.
 */
export function setpriv({ uid, gid }: { uid: number; gid: number }, cmd: string[], keep = ''): string[] {
  const also = keep ? `,${keep}` : '';
  return [
    'setpriv',
    `--reuid=${uid}`,
    `--regid=${gid}`,
    '--clear-groups',
    `--inh-caps=-all${also}`,
    ...(keep ? [`--ambient-caps=${keep}`] : []),
    `--bounding-set=-all${also}`,
    '--',
    ...cmd,
  ];
}

/** Who a sandbox's container starts as: root, for its init and for setpriv (see asSandboxUser). */
export const CONTAINER_USER = '0:0';

/** Where the image keeps the program that caps a one-execution sandbox's output at the source. */
export const CAPPED_PATH = '/usr/lib/sandgate/agent/sandgate_capped.py';

/** `cmd` with its stdout and stderr each cut after `cap` bytes (and one more) inside the sandbox. */
export const cappedAtSource = (cap: number, cmd: string[]): string[] => [
  'python3',
  '-I',
  '-S',
  CAPPED_PATH,
  String(cap),
  '--',
  ...cmd,
];

/** The deterministic container name: a retried job finds its predecessor by it. */
export const containerName = (executionId: string): string => `sandgate-${executionId}`;

/** Create options for one execution's sandbox; docs/sandbox.md lists each restriction and the test that holds it. */
export function containerSpec(
  job: ExecutionJob,
  workspaceDir: string,
  s: SandboxSettings,
  outputCap: number,
): Dockerode.ContainerCreateOptions {
  const withStdin = job.stdin !== null;
  return {
    name: containerName(job.execution_id),
    Image: s.image,
    Cmd: asSandboxUser(s.user, cappedAtSource(outputCap, programFor(job))),
    // Only the job's variables: the worker's own environment (Redis URL, keys) must never reach the sandbox.
    Env: Object.entries(job.env).map(([k, v]) => `${k}=${v}`),
    User: CONTAINER_USER,
    WorkingDir: WORKDIR,
    Labels: ownershipLabels(job, s.deployment),
    Tty: false,
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: withStdin,
    OpenStdin: withStdin,
    // The sandbox sees EOF once we close our side, instead of a stdin that never ends.
    StdinOnce: withStdin,
    NetworkDisabled: true,
    HostConfig: hostConfig(job, workspaceDir, s),
  };
}

/** The locked-down host settings every sandbox shares, cold, pooled or per session. */
export function hostConfig(limits: SandboxLimits, workspaceDir: string, s: SandboxSettings): Dockerode.HostConfig {
  return {
    NetworkMode: 'none',
    CapDrop: ['ALL'],
    // Only for the init and setpriv, which run as root: setpriv drops all three before it starts the program.
    CapAdd: ['SETUID', 'SETGID', 'SETPCAP'],
    SecurityOpt: ['no-new-privileges'],
    ReadonlyRootfs: true,
    Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${s.tmpfsBytes}` },
    ...resources(limits),
    PidsLimit: s.pidsLimit,
    // No nproc ulimit: RLIMIT_NPROC counts every process of uid 1000 on the host, so concurrent
    // sandboxes would starve each other. PidsLimit bounds each sandbox on its own.
    Ulimits: [{ Name: 'nofile', Soft: s.nofile, Hard: s.nofile }],
    // An init as PID 1 reaps orphaned children, whose zombies would otherwise count against PidsLimit.
    Init: true,
    // A bind Mount (unlike Binds) fails when the host path is missing instead of creating an empty
    // root-owned directory: a data dir not shared with the Docker host shows up as an error.
    Mounts: [{ Type: 'bind', Source: workspaceDir, Target: WORKDIR, ReadOnly: false }],
    // We attach for the output; engine-side logs would put a 100 MB flood on disk for nothing.
    LogConfig: { Type: 'none', Config: {} },
    ...(s.runtime === undefined ? {} : { Runtime: s.runtime }),
  };
}

/** Memory and CPU of a sandbox, as create and update take them. */
export function resources(limits: SandboxLimits): { Memory: number; MemorySwap: number; NanoCpus: number } {
  return {
    Memory: limits.memory_mb * 1024 * 1024,
    // Equal to Memory: no swap, so the limit is a real limit and a bomb ends in an OOM kill.
    MemorySwap: limits.memory_mb * 1024 * 1024,
    NanoCpus: Math.round(limits.cpus * 1e9),
  };
}
