import type { Duplex } from 'node:stream';
import type Dockerode from 'dockerode';
import { AgentChannel } from '../agent/agent-channel.ts';
import { AttachDemuxer } from './attach-demux.ts';

/**
 * A channel to the agent of a Docker sandbox over an attach: requests go to its stdin, frames come from its stdout
 * (anything on its stderr is kept as diagnostics). Attach before anything is sent: frames written while nobody is
 * attached are lost.
 */
export async function attachAgent(container: Dockerode.Container): Promise<AgentChannel> {
  const stream = await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true });
  return new AgentChannel(stream as unknown as Duplex, (frames, diagnostics) => {
    const demux = new AttachDemuxer(frames, diagnostics);
    return (chunk) => demux.push(chunk);
  });
}
