import Dockerode from 'dockerode';

/** The most a check may take: it runs on the rare path of a sandbox that died mid-run. */
const CHECK_TIMEOUT_MS = 3000;

export { ENGINE_STOPPED } from '../outcome/result.ts';

/**
 * Whether the engine itself stopped `container` since `sinceMs` (epoch ms): the engine logged a `kill` of it that this
 * run did not send (an engine shutting down stops its containers; so does `docker stop`), or the engine no longer
 * answers. Code in the sandbox cannot make the engine log a kill, so such an ending is the platform's, not the code's.
 * Call it only for a sandbox that stopped without this run killing it.
 */
export async function stoppedByEngine(container: Dockerode.Container, sinceMs: number): Promise<boolean> {
  // Dockerode takes an existing modem (its types do not say so): the same engine, socket and options as the container.
  const docker = new Dockerode({ modem: container.modem } as Dockerode.DockerOptions);
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), CHECK_TIMEOUT_MS);
  try {
    const stream = await docker.getEvents({
      since: Math.floor(sinceMs / 1000),
      until: Math.ceil(Date.now() / 1000),
      filters: { container: [container.id], event: ['kill'] },
      abortSignal: ac.signal,
    } as Dockerode.GetEventsOptions);
    let text = '';
    for await (const chunk of stream as AsyncIterable<Buffer>) text += chunk.toString();
    return text.trim().length > 0;
  } catch {
    // No answer: the engine is down or going down, which is what stopped the sandbox.
    return true;
  } finally {
    clearTimeout(timer);
  }
}
