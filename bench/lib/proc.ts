/** What the kernel says about a process: its memory and the CPU time it used. */
import { readdir, readFile } from 'node:fs/promises';

/** VmRSS and VmHWM (peak RSS), in MiB. */
export async function memoryOf(pid: number): Promise<{ rssMb: number; hwmMb: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rssMb: kb('VmRSS') / 1024, hwmMb: kb('VmHWM') / 1024 };
}

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ: 100 on Linux). */
const TICKS_PER_S = 100;

/** User + system CPU time a process has used so far, in ms (10 ms resolution). */
export async function cpuMsOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces; the fields after its closing parenthesis are fixed.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1000) / TICKS_PER_S;
}

/** Pids of the Docker engine's long-lived daemons (dockerd, containerd), found by their command name. */
export async function enginePids(): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const comm = (await readFile(`/proc/${entry}/comm`, 'utf8').catch(() => '')).trim();
    if (comm === 'dockerd' || comm === 'containerd') pids.push(Number(entry));
  }
  return pids;
}

/** CPU ms used so far by all of `pids` (those that are gone count 0). */
export async function cpuMsOfAll(pids: number[]): Promise<number> {
  const each = await Promise.all(pids.map((p) => cpuMsOf(p).catch(() => 0)));
  return each.reduce((a, b) => a + b, 0);
}

/** The open-files limit of a process (`ulimit -n`), from /proc/<pid>/limits. */
export async function openFilesLimit(pid: number | 'self' = 'self'): Promise<{ soft: number; hard: number } | null> {
  const text = await readFile(`/proc/${pid}/limits`, 'utf8').catch(() => '');
  const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(text);
  if (!m) return null;
  const n = (s: string) => (s === 'unlimited' ? Infinity : Number(s));
  return { soft: n(m[1]!), hard: n(m[2]!) };
}
