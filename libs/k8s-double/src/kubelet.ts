import { setTimeout as sleep } from 'node:timers/promises';
import type Dockerode from 'dockerode';
import { containerCreateOptions } from './container-config.ts';
import { blockerOf, imageUser, resolveEnv, type Blocker } from './container-prep.ts';
import type { PodRef } from './docker-labels.ts';
import { errorText, exitState, missingHandler, startError, stopped } from './pod-sandbox.ts';
import type { NodeContext } from './node-context.ts';
import { k8sTime, PodStatusModel, qosClassOf, type ContainerRecord } from './pod-status.ts';
import type { Container, PodSpec } from './pod-types.ts';
import { mountVolumes } from './pod-mounts.ts';
import { diskUsage, removePodVolume, type PodVolume } from './pod-volumes.ts';
import { CrashBackOff, goDuration, restartsAfter } from './restart-policy.ts';
import { ContainerRuns } from './container-runs.ts';
import type { K8sObject } from './store.ts';

/** How a Pod is ended from outside its own containers. */
export type KillKind = 'deadline' | 'evict' | 'shutdown';

const UNKNOWN = {
  exitCode: 137,
  reason: 'ContainerStatusUnknown',
  message: 'The container could not be located when the pod was terminated',
};

/** A container not running when the Pod is ended: its last run stands if it was waiting to run again. */
function settle(r: ContainerRecord): void {
  if ('terminated' in r.state) return;
  const last = 'waiting' in r.state && r.lastState && 'terminated' in r.lastState ? r.lastState : undefined;
  r.state = last ?? { terminated: { ...UNKNOWN } };
  if (last) delete r.lastState;
}

/**
 * One Pod's life on the node, as the kubelet runs it: schedule, sandbox (Pod IP), volumes, init containers one by
 * one, then every container, each run again under restartPolicy OnFailure/Always with the kubelet's back-off;
 * status written back to the store at each step.
 */
export class PodWorker {
  readonly model: PodStatusModel;
  readonly ref: PodRef;
  /** The engine containers of each container's newest run and of the run before it. */
  readonly runs = new ContainerRuns();
  /** Containers removed with their logs (eviction): pods/log has nothing to read for them. */
  readonly removedLogs = new Set<string>();
  /** Node lost: status is no longer reported and pods/log fails. */
  frozen = false;
  #ended = false;
  #pause?: Dockerode.Container;
  #volumes = new Map<string, PodVolume>();
  #timers: NodeJS.Timeout[] = [];
  #exits: Promise<void>[] = [];
  readonly #backOff: CrashBackOff;
  /** Aborted when the Pod ends: wakes a container waiting out its back-off. */
  readonly #stop = new AbortController();
  #destroyed?: Promise<void>;
  readonly done: Promise<void>;

  constructor(
    private readonly ctx: NodeContext,
    private pod: K8sObject,
  ) {
    const spec = pod.spec as PodSpec;
    const rec = (c: Container, init: boolean): ContainerRecord => ({
      name: c.name,
      image: c.image,
      init,
      state: { waiting: { reason: 'PodInitializing' } },
    });
    this.model = new PodStatusModel(
      (spec.initContainers ?? []).map((c) => rec(c, true)),
      spec.containers.map((c) => rec(c, false)),
      qosClassOf([...(spec.initContainers ?? []), ...spec.containers]),
      spec.restartPolicy ?? 'Always',
    );
    this.#backOff = new CrashBackOff(ctx.settings.restartBackOffMs, ctx.settings.restartBackOffMaxMs);
    this.ref = {
      doubleId: ctx.doubleId,
      uid: pod.metadata.uid!,
      namespace: pod.metadata.namespace!,
      name: pod.metadata.name!,
    };
    this.done = this.#run().catch((err: unknown) => this.#crash(err));
  }

  get spec(): PodSpec {
    return this.pod.spec as PodSpec;
  }

  #publish(): void {
    if (this.frozen) return;
    // A Pod deleted at once can have a successor of the same name before this one's containers have stopped: the
    // kubelet reports status for its own Pod (by uid) only.
    if (this.ctx.store.get('Pod', this.ref.namespace, this.ref.name)?.metadata.uid !== this.ref.uid) return;
    const updated = this.ctx.store.update('Pod', this.ref.namespace, this.ref.name, (o) => {
      o.status = this.model.toJSON();
      if (this.model.scheduled.ok) (o.spec as PodSpec).nodeName = this.ctx.nodeName;
    });
    if (updated) this.pod = updated;
  }

  #event(type: 'Normal' | 'Warning', reason: string, message: string, component?: string): void {
    this.ctx.events.record(this.pod, type, reason, message, component);
  }

  async #run(): Promise<void> {
    if (!(await this.#schedule())) return;
    this.model.startTime = k8sTime();
    this.model.hostIP = this.ctx.network.hostIP;
    if (!this.model.init.length) for (const r of this.model.app) r.state = { waiting: { reason: 'ContainerCreating' } };
    this.#publish();
    const deadline = this.spec.activeDeadlineSeconds;
    if (deadline !== undefined) {
      this.#timers.push(
        setTimeout(
          () => void this.kill('deadline', 'Pod was active on the node longer than the specified deadline'),
          deadline * 1000,
        ),
      );
    }
    if (!(await this.#createSandbox()) || !(await this.#mount())) return;
    this.#watchEviction();
    for (const rec of this.model.init) {
      if (!(await this.#runInit(rec))) return this.#stopTimers();
    }
    if (this.model.init.length) for (const r of this.model.app) r.state = { waiting: { reason: 'ContainerCreating' } };
    await Promise.all(this.spec.containers.map((c) => this.#runContainer(c)));
    await Promise.all(this.#exits);
    if (this.model.terminal) this.#stopTimers();
  }

  async #schedule(): Promise<boolean> {
    for (let announced = ''; !this.#ended;) {
      const problem = this.ctx.scenarios.schedulingProblem(this.pod);
      if (problem === undefined) break;
      if (problem !== announced) {
        this.model.scheduled = { ok: false, reason: 'Unschedulable', message: problem, at: k8sTime() };
        this.#publish();
        this.#event('Warning', 'FailedScheduling', problem, 'default-scheduler');
        announced = problem;
      }
      await this.ctx.scenarios.nap(this.ctx.settings.retryMs);
    }
    if (this.#ended) return false;
    this.model.scheduled = { ok: true, at: k8sTime() };
    this.#event(
      'Normal',
      'Scheduled',
      `Successfully assigned ${this.ref.namespace}/${this.ref.name} to ${this.ctx.nodeName}`,
      'default-scheduler',
    );
    return true;
  }

  /** The Pod's network namespace (a pause container on the Pods' network), or the runtime's failure. */
  async #createSandbox(): Promise<boolean> {
    const handler =
      this.spec.runtimeClassName === undefined
        ? undefined
        : this.ctx.settings.runtimeClasses[this.spec.runtimeClassName];
    const problem = await missingHandler(this.ctx, handler);
    if (problem) {
      this.#event('Warning', 'FailedCreatePodSandBox', problem);
      for (const r of [...this.model.init, ...this.model.app]) r.state = { waiting: { reason: 'ContainerCreating' } };
      this.#publish();
      return false;
    }
    this.runtime = handler;
    // The engine's runsc runs with --network=none and cannot join another container's network namespace.
    if (handler !== 'runsc') {
      const { pause, podIP } = await this.ctx.pauses.take(this.ref);
      this.#pause = pause;
      this.model.podIP = podIP;
    }
    this.model.sandboxReady = true;
    this.#publish();
    return !this.#ended;
  }

  /** The Docker runtime of the Pod's RuntimeClass; undefined for the engine's default. */
  runtime: string | undefined;

  async #mount(): Promise<boolean> {
    const report = (reason: string, message: string) => {
      this.#event('Warning', reason, message);
      this.#publish();
    };
    return mountVolumes(this.ctx, this.pod, this.ref, this.#volumes, () => this.#ended, report);
  }

  #watchEviction(): void {
    const watched = [...this.#volumes.values()].filter((v) => v.evictAbove);
    if (!watched.length) return;
    const tick = async (): Promise<void> => {
      for (const v of watched) {
        if (this.#ended || this.model.terminal) return;
        if ((await diskUsage(v.hostPath)) > v.evictAbove!.bytes) {
          return this.kill(
            'evict',
            `Usage of EmptyDir volume "${v.name}" exceeds the limit "${v.evictAbove!.quantity}". `,
          );
        }
      }
      if (!this.#ended) this.#timers.push(setTimeout(() => void tick(), this.ctx.settings.evictionIntervalMs));
    };
    this.#timers.push(setTimeout(() => void tick(), this.ctx.settings.evictionIntervalMs));
  }

  async #runInit(rec: ContainerRecord): Promise<boolean> {
    const c = (this.spec.initContainers ?? []).find((x) => x.name === rec.name)!;
    await this.#runContainer(c);
    await Promise.all(this.#exits);
    const term = 'terminated' in rec.state ? rec.state.terminated : undefined;
    return !this.#ended && term?.exitCode === 0;
  }

  /** Runs a container, and after each exit runs it again as long as the restart policy asks for it. */
  async #runContainer(c: Container): Promise<void> {
    const rec = this.model.record(c.name)!;
    for (let attempt = 0; await this.#startWhenPossible(c, attempt); attempt++) {
      const exit = 'terminated' in rec.state ? rec.state.terminated.exitCode : undefined;
      if (this.#ended || exit === undefined || !restartsAfter(this.spec.restartPolicy, rec.init, exit)) return;
      await this.#backOffBeforeRestart(rec);
    }
  }

  /**
   * Between two runs of a container: the run that ended becomes its lastState, and unless this is its first restart
   * it waits out the back-off as `waiting: CrashLoopBackOff` (a BackOff event), counted from its exit.
   */
  async #backOffBeforeRestart(rec: ContainerRecord): Promise<void> {
    const stoppedAt = Date.now();
    rec.lastState = rec.state;
    rec.state = { waiting: { reason: 'ContainerCreating' } };
    const wait = this.#backOff.remaining(rec.name, stoppedAt);
    if (wait > 0) {
      const pod = `${this.ref.name}_${this.ref.namespace}(${this.ref.uid})`;
      const backOff = goDuration(this.#backOff.current(rec.name));
      const message = `back-off ${backOff} restarting failed container=${rec.name} pod=${pod}`;
      rec.state = { waiting: { reason: 'CrashLoopBackOff', message } };
      this.model.recompute();
      this.#publish();
      this.#event('Warning', 'BackOff', `Back-off restarting failed container ${rec.name} in pod ${pod}`);
      await sleep(wait, undefined, { signal: this.#stop.signal }).catch(() => {});
    }
    this.#backOff.next(rec.name, stoppedAt);
  }

  /**
   * Retries what blocks a container (pull, config) until it starts or the Pod ends. True once the instance it
   * started has ended (or could not start); false when none started.
   */
  async #startWhenPossible(c: Container, attempt: number): Promise<boolean> {
    const rec = this.model.record(c.name)!;
    for (let blocker: Blocker | undefined; !this.#ended;) {
      blocker = await blockerOf(this.ctx, this.pod, c, blocker);
      if (this.#ended) return false;
      if (!blocker) return this.#start(c, rec, attempt);
      const prev = 'waiting' in rec.state ? rec.state.waiting : undefined;
      if (prev?.reason !== blocker.reason || prev.message !== blocker.message) {
        rec.state = { waiting: blocker };
        this.model.recompute();
        this.#publish();
        this.#event(
          blocker.reason === 'ImagePullBackOff' ? 'Normal' : 'Warning',
          blocker.reason === 'ImagePullBackOff' ? 'BackOff' : 'Failed',
          blocker.reason === 'ErrImagePull'
            ? `Failed to pull image "${c.image}": ${blocker.message}`
            : `Error: ${blocker.message}`,
        );
      }
      await this.ctx.scenarios.nap(this.ctx.settings.retryMs);
    }
    return false;
  }

  /** Creates and starts one instance of a container; true once it has ended (or could not start). */
  async #start(c: Container, rec: ContainerRecord, attempt: number): Promise<boolean> {
    const env = resolveEnv(this.ctx, this.pod, c) as Record<string, string>;
    const user = (await imageUser(this.ctx.docker, c.image)) ?? '';
    const sandbox = {
      networkMode: this.#pause ? `container:${this.#pause.id}` : 'none',
      pidsLimit: this.ctx.settings.podPidsLimit,
      ...(this.runtime === undefined ? {} : { runtime: this.runtime }),
    };
    let container: Dockerode.Container;
    try {
      container = await this.ctx.docker.createContainer(
        containerCreateOptions({
          ref: this.ref,
          spec: this.spec,
          container: c,
          volumes: this.#volumes,
          env,
          imageUser: user,
          sandbox,
          attempt,
          logMaxBytes: Math.max(this.ctx.settings.containerLogMaxBytes * 4, 64 << 20),
        }),
      );
    } catch (err) {
      rec.state = { waiting: { reason: 'CreateContainerError', message: errorText(err) } };
      this.model.recompute();
      this.#publish();
      return false;
    }
    this.runs.add(c.name, container);
    rec.restartCount = attempt;
    rec.dockerId = container.id;
    rec.imageID = `docker-pullable://${c.image}`;
    this.#event('Normal', 'Created', `Created container ${c.name}`);
    const exited = container.wait({ condition: 'next-exit' });
    exited.catch(() => {}); // consumed by stopped(); a Pod ended before the start leaves it pending harmlessly
    try {
      if (this.#ended) return false;
      await container.start();
    } catch (err) {
      rec.state = startError(err, container.id);
      this.model.recompute();
      this.#publish();
      return true;
    }
    if (this.#ended) await container.kill({ signal: 'SIGKILL' }).catch(() => {});
    const started = await container.inspect().then(
      (i) => i.State.StartedAt,
      () => new Date().toISOString(),
    );
    if (!('terminated' in rec.state)) rec.state = { running: { startedAt: k8sTime(started) } };
    this.model.recompute();
    this.#publish();
    this.#event('Normal', 'Started', `Started container ${c.name}`);
    const ended = stopped(container, exited).then(() => this.#exited(rec, container));
    this.#exits.push(ended);
    await ended;
    return true;
  }

  async #exited(rec: ContainerRecord, container: Dockerode.Container): Promise<void> {
    if ('terminated' in rec.state) return;
    const state = await exitState(container);
    // Already recorded by a kill (eviction), or gone with its container: the kill's account stands.
    if ('terminated' in rec.state || !state) return;
    rec.state = state;
    this.model.recompute();
    if (this.model.terminal) this.#stopTimers();
    this.#publish();
  }

  #stopTimers(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers = [];
  }

  /** The Pod is over on this node: no container starts again, a back-off stops waiting. */
  #end(): void {
    this.#ended = true;
    this.#stopTimers();
    this.#stop.abort();
  }

  /** Ends the Pod from the node: its deadline passed, the eviction manager evicted it, or the node shuts down. */
  async kill(kind: KillKind, message: string): Promise<void> {
    if (this.#ended || this.model.terminal) return;
    this.#end();
    const all = [...this.model.init, ...this.model.app];
    if (kind === 'evict') {
      // Eviction takes the containers with their logs; the kubelet no longer knows how they ended.
      for (const r of all) if (!('terminated' in r.state)) r.state = { terminated: { ...UNKNOWN } };
      await Promise.all(
        this.runs.all().map(async ([name, c]) => {
          this.removedLogs.add(name);
          await c.remove({ force: true }).catch(() => {});
        }),
      );
    } else {
      await Promise.all(this.runs.newest().map((c) => c.kill({ signal: 'SIGKILL' }).catch(() => {})));
      await Promise.all(this.#exits);
      all.forEach(settle);
    }
    const reason = { deadline: 'DeadlineExceeded', evict: 'Evicted', shutdown: 'Terminated' }[kind];
    this.model.fail(reason, message);
    this.#publish();
    this.#event(kind === 'deadline' ? 'Normal' : 'Warning', reason, message);
  }

  /** The node is gone: nothing reports the Pod's status any more and its logs cannot be read; its containers die. */
  async lose(): Promise<void> {
    this.frozen = true;
    this.#end();
    await Promise.all(this.runs.newest().map((c) => c.kill({ signal: 'SIGKILL' }).catch(() => {})));
  }

  /** A graceful delete: SIGTERM, then SIGKILL after the grace period; resolves once every container has stopped. */
  async terminate(graceSeconds: number): Promise<void> {
    this.#end();
    this.#event('Normal', 'Killing', 'Stopping container');
    await Promise.all(this.runs.newest().map((c) => c.stop({ t: graceSeconds }).catch(() => {})));
    await Promise.all(this.#exits);
    this.#publish();
  }

  /** Removes every Docker object of the Pod; the API object is gone already. Idempotent. */
  destroy(): Promise<void> {
    this.#end();
    this.#destroyed ??= (async () => {
      const killAll = () => Promise.all(this.runs.newest().map((c) => c.kill({ signal: 'SIGKILL' }).catch(() => {})));
      // The kubelet loop notices the end within one retry; a container it started meanwhile dies in the second pass.
      await killAll();
      await Promise.race([this.done, new Promise((r) => setTimeout(r, 2 * this.ctx.settings.retryMs))]);
      await killAll();
      await this.done;
      const ids = [...this.runs.all().map(([, c]) => c), ...(this.#pause ? [this.#pause] : [])];
      await Promise.all(ids.map((c) => c.remove({ force: true }).catch(() => {})));
      await Promise.all([...this.#volumes.values()].map((v) => removePodVolume(this.ctx.docker, v)));
    })();
    return this.#destroyed;
  }

  #crash(err: unknown): void {
    if (this.#ended) return;
    this.#event('Warning', 'FailedSync', `k8s-double: ${errorText(err)}`);
  }
}
