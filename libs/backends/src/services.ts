import { createHash, randomBytes } from 'node:crypto';
import { chmod, chown, lstat, mkdir, open, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { constants } from 'node:fs';
import { join } from 'node:path';
import { connectWithin } from './agent/connect.ts';

/**
 * The host side of a session's services (images/runtime/agent/sandgate_services.py), in the data directory the
 * gateway shares with the workers. On Docker: the directory a session sandbox mounts at SERVICES_MOUNT, where its
 * agent listens on `agent.sock`, and the token that socket wants; a worker makes both before it creates the sandbox,
 * and the gateway, on the same host, talks to the socket. On Kubernetes: the token and the address (Pod IP and
 * services port) of the session Pod's agent, which the worker that connects to the Pod writes; the gateway connects
 * to that address. Nothing here loads an engine client.
 */
export const SERVICES_MOUNT = '/run/sandgate/services';
export const SERVICES_TOKEN_ENV = 'SANDGATE_SERVICES_TOKEN_SHA256';
const SOCKET = 'agent.sock';
/** open(2)'s O_PATH (the same on every Linux architecture Node runs on): a handle on the socket file itself. */
const O_PATH = 0o10000000;
const REQUEST_TIMEOUT_MS = 10_000;
/** A session Pod that is gone may leave its address unanswered: its services are then not running. */
const CONNECT_TIMEOUT_MS = 3_000;
const MAX_ANSWER_BYTES = 8 << 20;
/** File times are coarser than the clock: state this close before a read of the live sessions counts as after it. */
const MTIME_SLACK_MS = 1000;

const rootOf = (dataDir: string): string => join(dataDir, 'services');
/** The host directory a session sandbox mounts at SERVICES_MOUNT. */
export const servicesDirOf = (dataDir: string, sessionId: string): string => join(rootOf(dataDir), sessionId);
const tokenFileOf = (dataDir: string, sessionId: string): string => join(rootOf(dataDir), `${sessionId}.token`);
const addressFileOf = (dataDir: string, sessionId: string): string => join(rootOf(dataDir), `${sessionId}.address`);

/**
 * Makes a session's services directory afresh, for a sandbox about to be created, and a new token for its socket.
 * `agentUid` is the uid the sandbox's agent runs as: only it may enter the directory. Answers the token's SHA-256,
 * which the agent gets in its environment (SERVICES_TOKEN_ENV); the token itself stays on the host.
 */
export async function prepareServices(dataDir: string, sessionId: string, agentUid: number): Promise<string> {
  const dir = servicesDirOf(dataDir, sessionId);
  await mkdir(rootOf(dataDir), { recursive: true, mode: 0o700 });
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { mode: 0o700 });
  if (process.getuid?.() === 0) {
    await chown(dir, agentUid, agentUid);
  } else {
    // Not root, so the directory cannot be given to the agent's uid: it is open to all, sticky (nobody removes the
    // agent's socket), and the token still keeps everyone else off the socket.
    await chmod(dir, 0o1777);
  }
  const token = newServicesToken();
  await rm(addressFileOf(dataDir, sessionId), { force: true });
  await writeFile(tokenFileOf(dataDir, sessionId), token, { mode: 0o600 });
  return servicesTokenSha256(token);
}

export const newServicesToken = (): string => randomBytes(24).toString('hex');
export const servicesTokenSha256 = (token: string): string => createHash('sha256').update(token).digest('hex');

/**
 * Where the gateway reaches a session's agent over TCP (a Kubernetes session Pod: its IP and services port), and its
 * token: written by the worker that connected to the Pod, each file replaced whole, the address first.
 */
export async function publishServices(
  dataDir: string,
  sessionId: string,
  token: string,
  address: { host: string; port: number },
): Promise<void> {
  await mkdir(rootOf(dataDir), { recursive: true, mode: 0o700 });
  const write = async (file: string, text: string): Promise<void> => {
    const temporary = `${file}.${randomBytes(6).toString('hex')}.tmp`;
    await writeFile(temporary, text, { mode: 0o600 });
    await rename(temporary, file);
  };
  await write(addressFileOf(dataDir, sessionId), JSON.stringify(address));
  await write(tokenFileOf(dataDir, sessionId), token);
}

/**
 * Takes back what publishServices wrote, before the session Pod is deleted: a Pod being deleted serves on through its
 * grace period, and the gateway must not open a terminal or a service connection to a sandbox that is going.
 */
export async function withdrawServices(dataDir: string, sessionId: string): Promise<void> {
  await rm(addressFileOf(dataDir, sessionId), { force: true });
  await rm(tokenFileOf(dataDir, sessionId), { force: true });
}

/**
 * Removes the services state (directory, token, address) of sessions that are not in `live`. `readAt`: when `live`
 * was read. State made since (a resume on any worker made the session a sandbox after it was read as paused) is kept:
 * the next sweep, with a newer view of the sessions, decides about it.
 */
export async function retainServices(dataDir: string, live: ReadonlySet<string>, readAt?: number): Promise<void> {
  const root = rootOf(dataDir);
  const names = await readdir(root).catch(() => [] as string[]);
  const madeSince = async (path: string): Promise<boolean> => {
    if (readAt === undefined) return false;
    const st = await lstat(path).catch(() => null);
    return st === null || st.mtimeMs >= readAt - MTIME_SLACK_MS;
  };
  await Promise.all(
    names
      .filter((n) => !live.has(n.replace(/\.(token|address)$/, '')))
      .map(async (n) => {
        const path = join(root, n);
        if (!(await madeSince(path))) await rm(path, { recursive: true, force: true });
      }),
  );
}

/** A service as the agent reports it. */
export interface AgentService {
  name: string;
  state: 'running' | 'stopped' | 'exited' | 'failed';
  pid: number;
  exit_code: number | null;
  ports: number[];
  /** Unix seconds. */
  started_at: number;
  ended_at: number | null;
  log_bytes: number;
}

export interface AgentLogs {
  /** Output from `offset`, one character per byte (latin-1). */
  data: string;
  offset: number;
  next_offset: number;
}

/** The sandbox's cgroup figures as its agent reads them (agent/sandgate_metrics.py); null: unreadable. */
export interface AgentMetrics {
  /** The sandbox's monotonic clock when it read them: CPU is the difference of two readings over this one's. */
  monotonic_ns: number;
  cpu_usage_ns: number | null;
  memory_bytes: number | null;
  memory_limit_bytes: number | null;
  pids: number | null;
}

/** The session has no sandbox the gateway can reach (none yet, or it ended): no service of it runs. */
export class NoSandbox extends Error {}

/** The session's sandbox has as many terminals open as it may. */
export class TooManyTerminals extends Error {
  constructor(readonly open: number) {
    super(`${open} terminals are open in the session's sandbox`);
  }
}

/** The session's sandbox has as many file watches open as it allows. */
export class TooManyWatches extends Error {}

/** Talks to sessions' agents through their services sockets. */
export class ServiceAgents {
  readonly #dataDir: string;

  constructor(dataDir: string) {
    this.#dataDir = dataDir;
  }

  /** How many terminals are open in the session's sandbox (none without a sandbox). */
  async terminalsOpen(sessionId: string): Promise<number> {
    try {
      const answer = (await this.#request(sessionId, { op: 'status' })) as { terminals?: number };
      return answer.terminals ?? 0;
    } catch (err) {
      if (err instanceof NoSandbox) return 0;
      throw err;
    }
  }

  /** The sandbox's cgroup figures; an agent of an image without them answers nulls. NoSandbox without a sandbox. */
  async metrics(sessionId: string): Promise<AgentMetrics> {
    const answer = (await this.#request(sessionId, { op: 'metrics' })) as Partial<AgentMetrics> & { error?: string };
    const n = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);
    return {
      monotonic_ns: n(answer.monotonic_ns) ?? 0,
      cpu_usage_ns: n(answer.cpu_usage_ns),
      memory_bytes: n(answer.memory_bytes),
      memory_limit_bytes: n(answer.memory_limit_bytes),
      pids: n(answer.pids),
    };
  }

  /** How many file watches are open in the session's sandbox (none without a sandbox). */
  async watchesOpen(sessionId: string): Promise<number> {
    try {
      const answer = (await this.#request(sessionId, { op: 'status' })) as { watches?: number };
      return answer.watches ?? 0;
    } catch (err) {
      if (err instanceof NoSandbox) return 0;
      throw err;
    }
  }

  async status(sessionId: string): Promise<AgentService[]> {
    const answer = (await this.#request(sessionId, { op: 'status' })) as { services?: AgentService[] };
    return answer.services ?? [];
  }

  async logs(sessionId: string, name: string, offset: number): Promise<AgentLogs | undefined> {
    const answer = (await this.#request(sessionId, { op: 'logs', name, offset })) as AgentLogs | { error: string };
    return 'error' in answer ? undefined : answer;
  }

  /** SIGTERM, then SIGKILL after `graceMs`; answers once the service has ended (undefined: no such service). */
  async stop(sessionId: string, name: string, graceMs: number): Promise<AgentService | undefined> {
    const answer = (await this.#request(sessionId, { op: 'stop', name, grace_ms: graceMs }, graceMs)) as
      AgentService | { error: string };
    return 'error' in answer ? undefined : answer;
  }

  /** A connection to `port` on the sandbox's loopback; NoSandbox, or an Error when nothing listens there. */
  async connect(sessionId: string, port: number): Promise<Socket> {
    const socket = await this.#open(sessionId, { op: 'connect', port });
    const line = await readLine(socket, 64).catch((err: unknown) => {
      socket.destroy();
      throw err;
    });
    if (line.text !== 'ok') {
      socket.destroy();
      throw new Error(`nothing listens on port ${port} in the session's sandbox`);
    }
    if (line.rest.length > 0) socket.unshift(line.rest);
    return socket;
  }

  /**
   * A terminal in the session's sandbox (images/runtime/agent/sandgate_terminal.py): a login shell on a pty of `cols`
   * by `rows`, unless `max` are open there already (TooManyTerminals). The socket then carries terminal frames.
   */
  async terminal(sessionId: string, size: { cols: number; rows: number }, max: number): Promise<Socket> {
    const socket = await this.#open(sessionId, { op: 'terminal', ...size, max });
    try {
      socket.setTimeout(REQUEST_TIMEOUT_MS, () => socket.destroy(new Error('the sandbox agent did not answer')));
      const line = await readLine(socket, 4096);
      socket.setTimeout(0);
      const answer = JSON.parse(line.text) as { ok?: boolean; error?: string; open?: number };
      if (answer.error === 'too_many') throw new TooManyTerminals(answer.open ?? max);
      if (answer.ok !== true) throw new Error(answer.error ?? 'the sandbox agent refused the terminal');
      if (line.rest.length > 0) socket.unshift(line.rest);
      return socket;
    } catch (err) {
      socket.destroy();
      throw err;
    }
  }

  /**
   * The session directory's file events (images/runtime/agent/sandgate_watch.py): the socket then carries one JSON
   * line per interval with changes, `{events, overflow}`, until it is closed. TooManyWatches when the sandbox has as
   * many watches open as it allows (another gateway's, about to end).
   */
  async watch(sessionId: string, o: { intervalMs: number; maxEvents: number; maxWatches: number }): Promise<Socket> {
    const socket = await this.#open(sessionId, {
      op: 'watch',
      interval_ms: o.intervalMs,
      max_events: o.maxEvents,
      max_watches: o.maxWatches,
    });
    try {
      socket.setTimeout(REQUEST_TIMEOUT_MS, () => socket.destroy(new Error('the sandbox agent did not answer')));
      const line = await readLine(socket, 4096);
      socket.setTimeout(0);
      const answer = JSON.parse(line.text) as { ok?: boolean; error?: string };
      if (answer.error === 'too_many') throw new TooManyWatches();
      if (answer.ok !== true) throw new Error(answer.error ?? 'the sandbox agent refused the watch');
      if (line.rest.length > 0) socket.unshift(line.rest);
      return socket;
    } catch (err) {
      socket.destroy();
      throw err;
    }
  }

  async #request(sessionId: string, msg: object, extraMs = 0): Promise<unknown> {
    const socket = await this.#open(sessionId, msg);
    try {
      socket.setTimeout(REQUEST_TIMEOUT_MS + extraMs, () =>
        socket.destroy(new Error('the sandbox agent did not answer')),
      );
      const { text } = await readLine(socket, MAX_ANSWER_BYTES);
      return JSON.parse(text) as unknown;
    } finally {
      socket.destroy();
    }
  }

  /**
   * Connects to the session's agent and sends the header line: at the address a worker published (Kubernetes), or
   * to the socket in the session's services directory. The socket file is opened with O_NOFOLLOW and reached through
   * its descriptor: code in the sandbox cannot point the gateway at another socket of the host.
   */
  async #open(sessionId: string, msg: object): Promise<Socket> {
    const token = await readFile(tokenFileOf(this.#dataDir, sessionId), 'utf8').catch(() => undefined);
    if (token === undefined) throw new NoSandbox(`session ${sessionId} has no sandbox`);
    const address = await readFile(addressFileOf(this.#dataDir, sessionId), 'utf8').catch(() => undefined);
    if (address !== undefined) {
      const { host, port } = JSON.parse(address) as { host: string; port: number };
      const socket = await connectWithin(host, port, CONNECT_TIMEOUT_MS).catch(() => {
        throw new NoSandbox(`the sandbox of session ${sessionId} does not answer`);
      });
      // Its users handle the socket's errors from now on (the Unix socket keeps its `once` listener the same way).
      socket.on('error', () => {});
      socket.setNoDelay(true);
      socket.write(`${JSON.stringify({ ...msg, token })}\n`);
      return socket;
    }
    const file = await open(join(servicesDirOf(this.#dataDir, sessionId), SOCKET), O_PATH | constants.O_NOFOLLOW).catch(
      () => undefined,
    );
    if (file === undefined) throw new NoSandbox(`session ${sessionId} has no sandbox`);
    try {
      const socket = await new Promise<Socket>((resolve, reject) => {
        const s = connect(`/proc/self/fd/${file.fd}`);
        s.once('connect', () => resolve(s));
        s.once('error', () => reject(new NoSandbox(`the sandbox of session ${sessionId} does not answer`)));
      });
      socket.write(`${JSON.stringify({ ...msg, token })}\n`);
      return socket;
    } finally {
      await file.close();
    }
  }
}

/** Reads one line (without its newline) and what came after it. */
function readLine(socket: Socket, max: number): Promise<{ text: string; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (err?: Error, value?: { text: string; rest: Buffer }): void => {
      socket.off('data', onData);
      socket.off('end', onEnd);
      socket.off('error', onEnd);
      socket.off('close', onEnd);
      if (err) reject(err);
      else resolve(value!);
    };
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk);
      size += chunk.length;
      const all = Buffer.concat(chunks);
      const nl = all.indexOf(10);
      if (nl >= 0) {
        socket.pause();
        done(undefined, { text: all.subarray(0, nl).toString('utf8'), rest: all.subarray(nl + 1) });
      } else if (size > max) {
        done(new Error('the sandbox agent answered too much'));
      }
    };
    const onEnd = (): void => done(new Error('the sandbox agent closed the connection'));
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('error', onEnd);
    socket.once('close', onEnd);
  });
}
