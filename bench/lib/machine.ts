/** What the figures were measured on. */
import { execFile } from 'node:child_process';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { promisify } from 'node:util';
import { docker } from './raw-docker.ts';

const run = promisify(execFile);

export async function machine(): Promise<Record<string, string>> {
  const info = (await docker.info().catch(() => ({}))) as {
    ServerVersion?: string;
    CgroupVersion?: string;
    CgroupDriver?: string;
    DefaultRuntime?: string;
    Driver?: string;
  };
  const redis = await run('redis-cli', ['INFO', 'server']).then(
    (r) => /redis_version:(\S+)/.exec(r.stdout)?.[1] ?? '?',
    () => '?',
  );
  return {
    cpus: `${cpus().length} × ${cpus()[0]?.model ?? '?'}`,
    memory: `${(totalmem() / 2 ** 30).toFixed(1)} GiB`,
    kernel: release(),
    docker: `${info.ServerVersion ?? '?'} (cgroup v${info.CgroupVersion ?? '?'}, ${info.CgroupDriver ?? '?'} driver, runtime ${info.DefaultRuntime ?? '?'}, storage ${info.Driver ?? '?'})`,
    redis,
    node: process.version,
    loadavg: loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
  };
}
