import { loadavg } from 'node:os';
import { runWait } from './lib/api.ts';
import { request } from './lib/http.ts';
import { main } from './lib/main.ts';
import { cpuMsOf } from './lib/proc.ts';
import { startStack } from './lib/stack.ts';
import { summarize, round } from './lib/stats.ts';

const BODY = { language: 'python', code: 'print(1)' };
function calib(): number {
  const c0 = process.cpuUsage();
  let x = 0;
  for (let i = 0; i < 200; i++) x += JSON.stringify({ a: i, b: [1, 2, 3], c: 'hello world' + i }).length;
  const c = process.cpuUsage(c0);
  if (x < 0) console.log(x);
  return (c.user + c.system) / 1000;
}
main(async () => {
  const sg = await startStack(['noop'], { SANDGATE_MAX_SESSIONS: '1000000' });
  const bare = await startStack(['bare'], {});
  const sgPid = sg.procs[0]!.pid;
  const barePid = bare.procs[0]!.pid;
  const bareRun = async () => {
    const t0 = performance.now();
    const r = await request('POST', `${bare.url}/run`, { json: BODY });
    if (r.status !== 200) throw new Error(r.text);
    return performance.now() - t0;
  };
  for (let i = 0; i < 1000; i++) {
    await runWait(sg, BODY, { wait: 5 });
    await bareRun();
    calib();
  }
  const K = Number(process.env.K ?? 50);
  for (let b = 0; b < Number(process.env.BLOCKS ?? 12); b++) {
    const s0 = await cpuMsOf(sgPid);
    const sl: number[] = [];
    let cal = 0;
    for (let i = 0; i < K; i++) {
      sl.push((await runWait(sg, BODY, { wait: 5 })).ms);
      cal += calib();
    }
    const s1 = await cpuMsOf(sgPid);
    const b0 = await cpuMsOf(barePid);
    const bl: number[] = [];
    for (let i = 0; i < K; i++) {
      bl.push(await bareRun());
      cal += calib();
    }
    const b1 = await cpuMsOf(barePid);
    const sc = (s1 - s0) / K,
      bc = (b1 - b0) / K;
    console.log(
      JSON.stringify({
        block: b,
        load: round(loadavg()[0]!),
        sg_cpu: round(sc),
        bare_cpu: round(bc),
        cpu_ratio: round(sc / bc),
        sg_p50: summarize(sl).p50_ms,
        bare_p50: summarize(bl).p50_ms,
        lat_ratio: round(summarize(sl).p50_ms / summarize(bl).p50_ms),
        calib_ms: round(cal),
        sg_per_calib: round(sc / (cal / K / 2)),
        bare_per_calib: round(bc / (cal / K / 2)),
      }),
    );
  }
  await sg.close();
  await bare.close();
});
