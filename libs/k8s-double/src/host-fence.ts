import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);
const iptables = (...args: string[]) => run('iptables', ['-w', '5', ...args]);

/** The iptables chain that fences one double's Pods off the host. */
export const fenceChain = (doubleId: string): string => `K8SD-${doubleId}`.slice(0, 28);

/**
 * What the chart's NetworkPolicy does for sandbox Pods, done on this host: the Pods' network is a Docker `internal`
 * bridge (no route beyond the host), and this fence drops what Pods send to the host itself, except replies and the
 * TCP ports a test allows (the gateway's file endpoint for stage and harvest). Scoped to the double's own bridge.
 */
export class HostFence {
  private constructor(
    private readonly chain: string,
    private readonly bridge: string,
  ) {}

  static async install(doubleId: string, bridge: string): Promise<HostFence> {
    const chain = fenceChain(doubleId);
    await iptables('-N', chain);
    await iptables('-A', chain, '-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT');
    await iptables('-A', chain, '-j', 'DROP');
    await iptables('-I', 'INPUT', '-i', bridge, '-j', chain);
    return new HostFence(chain, bridge);
  }

  /** Lets the Pods reach this TCP port on the host (any of its addresses). */
  async allow(port: number): Promise<void> {
    await iptables('-I', this.chain, '2', '-p', 'tcp', '--dport', String(port), '-j', 'ACCEPT');
  }

  async remove(): Promise<void> {
    await removeFence(this.chain, this.bridge);
  }
}

/** Removes a fence chain and its jump; a missing one is fine (already removed, or never installed). */
export async function removeFence(chain: string, bridge?: string): Promise<void> {
  const rules = await iptables('-S', 'INPUT').then(
    (r) => r.stdout.split('\n'),
    () => [] as string[],
  );
  for (const rule of rules.filter(
    (r) => r.endsWith(`-j ${chain}`) && (bridge === undefined || r.includes(`-i ${bridge} `)),
  )) {
    await iptables(...rule.replace(/^-A /, '-D ').split(' ')).catch(() => {});
  }
  await iptables('-F', chain).catch(() => {});
  await iptables('-X', chain).catch(() => {});
}
