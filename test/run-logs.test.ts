import { test } from 'node:test';
import assert from 'node:assert/strict';
import { until } from './harness.ts';
import { api, startDeployment } from './faults/processes.ts';

const lines = (out: string) =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

test('every log line of a run carries its execution_id, session_id and tenant, in the gateway and the worker', async (t) => {
  const started = await startDeployment(t, { SANDGATE_POOL_SIZE: '1' });
  const { gateway } = started;
  const worker = started.worker!;

  const run = await api(gateway.url, 'POST', '/v1/executions?wait=60', {
    language: 'python',
    code: 'open("a.txt", "w").write("a")\nprint(1)',
  });
  assert.equal(run.body.state, 'completed');
  const { id, session_id: sessionId } = run.body;
  assert.equal((await api(gateway.url, 'GET', `/v1/executions/${id}`)).status, 200);
  const url = new URL(run.body.result.artifacts[0].download_url);
  const sig = url.searchParams.get('sig')!;
  assert.equal((await fetch(`${gateway.url}${url.pathname}${url.search}`)).status, 200);
  // The processes write their lines asynchronously: wait for the last ones of each.
  const downloadLogged = () => {
    const ls = lines(gateway.output());
    const incoming = ls.find(
      (l) => l.msg === 'incoming request' && String((l.req as { url: string }).url).startsWith('/files/'),
    );
    return incoming !== undefined && ls.some((l) => l.msg === 'request completed' && l.reqId === incoming.reqId);
  };
  await until('the download to be logged', async () => downloadLogged(), 10_000);
  await until(
    "the worker's last line of the run",
    async () => lines(worker.output()).some((l) => l.msg === 'execution finished' && l.execution_id === id),
    10_000,
  );

  const about = (l: Record<string, unknown>) => JSON.stringify(l).includes(id);
  const workerLines = lines(worker.output()).filter(about);
  assert.ok(workerLines.length >= 2, 'the worker logged the run');
  for (const l of workerLines)
    assert.deepEqual([l.execution_id, l.session_id, l.tenant], [id, sessionId, 'default'], JSON.stringify(l));
  const completed = lines(gateway.output()).filter((l) => l.msg === 'request completed' && l.execution_id === id);
  assert.equal(completed.length, 2, 'the POST and the GET of the run');
  for (const l of completed) assert.deepEqual([l.session_id, l.tenant], [sessionId, 'default']);
  assert.ok(!gateway.output().includes(sig), "a signed URL's sig is never logged");
  assert.match(gateway.output(), /sig=\[redacted\]/);
});
