import type Dockerode from 'dockerode';

/**
 * A Pod's engine containers, per Kubernetes container: the newest run, and the run before it, which the kubelet's
 * container GC keeps (one dead instance per container) and pods/log?previous=true reads. Older runs are removed.
 */
export class ContainerRuns {
  readonly #newest = new Map<string, Dockerode.Container>();
  readonly #previous = new Map<string, Dockerode.Container>();

  /** A new run becomes the newest; the one it replaces becomes the previous; the one before that is removed. */
  add(name: string, container: Dockerode.Container): void {
    const replaced = this.#newest.get(name);
    this.#newest.set(name, container);
    if (!replaced) return;
    const gone = this.#previous.get(name);
    this.#previous.set(name, replaced);
    void gone?.remove({ force: true }).catch(() => {});
  }

  /** The newest or the previous run of a container, by its engine id. */
  find(name: string, dockerId: string | undefined): Dockerode.Container | undefined {
    return [this.#newest.get(name), this.#previous.get(name)].find((c) => c !== undefined && c.id === dockerId);
  }

  /** The newest run of every container: what may still be running. */
  newest(): Dockerode.Container[] {
    return [...this.#newest.values()];
  }

  /** Every run kept, with its container's name. */
  all(): [string, Dockerode.Container][] {
    return [...this.#newest, ...this.#previous];
  }
}
