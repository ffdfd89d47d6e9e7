import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import {
  DEFAULT_AGENT_PORT,
  AGENT_TOKEN_ANNOTATION,
  LABELS,
  SERVICES_TOKEN_ANNOTATION,
  sessionPodName,
} from '@sandgate/backends/testing';
import { startStack, until, type Stack } from '../harness.ts';
import type { ApiCall } from './cluster.ts';
import { assertGenuine, forger } from '../stateful-forger.ts';

/**
 * Sessions on the Kubernetes backend: a long-lived Pod per session whose agent the worker reaches over TCP at the Pod
 * IP with a per-Pod token (no exec, no attach), and whose workspace the worker fills and empties over that connection.
 * The test cluster's kubelet runs each Pod; the node's firewall keeps Pods from each other and from the host.
 */

const run = async (s: Stack, body: Record<string, unknown>) => {
  const res = await s.api('POST', '/v1/executions?wait=90', { language: 'python', ...body });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as { id: string; state: string; result: Record<string, any> };
};

/** The session's Pod as the API server has it, or undefined once it is gone. */
const podOf = (s: Stack, sessionId: string): Promise<any> =>
  s
    .cluster!.core.readNamespacedPod({ name: sessionPodName(sessionId), namespace: s.cluster!.name })
    .catch((e: { code?: number }) => {
      if (e.code === 404) return undefined;
      throw e;
    });

/** Sends lines to the agent port and collects what comes back until the connection closes or `ms` pass. */
function talk(ip: string, lines: string[], ms: number): Promise<{ received: string; connected: boolean }> {
  return new Promise((resolve) => {
    let received = '';
    let connected = false;
    const socket = connect({ host: ip, port: DEFAULT_AGENT_PORT });
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ received, connected });
    };
    const timer = setTimeout(done, ms);
    socket.on('connect', () => {
      connected = true;
      socket.write(lines.join(''));
    });
    socket.on('data', (d) => (received += d.toString()));
    socket.on('close', done);
    socket.on('error', done);
  });
}

test('kubernetes: a session lives in one Pod, reached exec-free, with its files moved by the worker', async (t) => {
  // No warm pool: its refills would be API calls of their own while the calls of a session run are counted.
  const s = await startStack({ backend: 'kubernetes', env: { SANDGATE_POOL_SIZE: '0' } });
  t.after(() => s.close());
  const ns = s.cluster!;
  const sid = (await s.api('POST', '/v1/sessions', { mode: 'stateful' })).body.id as string;

  await t.test('one Pod serves every run; a run on a live session costs one API call', async () => {
    const first = await run(s, { session_id: sid, code: 'import os\nn = 1\nos.getpid()' });
    assert.equal(first.result.state, 'completed', first.result.stderr);
    const pod = await podOf(s, sid);
    assert.ok(pod, 'the session has its Pod');
    const before = (await ns.calls()).length;
    const second = await run(s, { session_id: sid, code: 'n + 1' });
    assert.equal(second.result.value, '2');
    // The worker's sweep (a list of every Pod of the deployment, every SANDGATE_SWEEP_INTERVAL_S) and its health probe
    // (one Pod of the deployment, when no call answered for a while) are no part of it.
    const sweep = `${LABELS.managed}=true,${LABELS.deployment}=${s.config.redisPrefix}`;
    const probe = `${LABELS.deployment}=${s.config.redisPrefix}`;
    const background = (c: ApiCall) =>
      c.verb === 'list' &&
      (c.query.labelSelector === sweep || (c.query.labelSelector === probe && c.query.limit === '1'));
    const all = await ns.calls();
    const calls = all
      .slice(before)
      .filter((c) => !background(c))
      .map((c) => `${c.verb} ${c.resource}`);
    assert.deepEqual(calls, ['get pods'], 'a look at the Pod, nothing else');
    assert.equal((await podOf(s, sid)).metadata.uid, pod.metadata.uid, 'the same Pod');
    const verbs = new Set(all.map((c) => `${c.verb} ${c.resource}`));
    for (const v of verbs) assert.doesNotMatch(v, /exec|attach|portforward|proxy/, 'exec-free');
  });

  await t.test('the Pod is locked down, and its agent token is not readable by the code', async () => {
    const pod = await podOf(s, sid);
    const token = pod.metadata.annotations[AGENT_TOKEN_ANNOTATION] as string;
    const servicesToken = pod.metadata.annotations[SERVICES_TOKEN_ANNOTATION] as string;
    assert.ok(token.length >= 40 && servicesToken.length >= 40);
    const spec = pod.spec;
    assert.equal(spec.automountServiceAccountToken, false);
    assert.equal(spec.enableServiceLinks, false);
    const [agent] = spec.containers;
    assert.equal(spec.containers.length, 1);
    assert.equal(agent.securityContext.readOnlyRootFilesystem, true);
    assert.deepEqual(agent.securityContext.capabilities.drop, ['ALL']);
    assert.equal(agent.securityContext.runAsNonRoot, true);
    const envValues = agent.env.map((e: { value: string }) => e.value);
    assert.ok(!envValues.includes(token), 'only a hash of the token is in the Pod spec');
    const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
    assert.deepEqual(envValues, [sha256(token), sha256(servicesToken)], 'and of the services token');
    const r = await run(s, {
      session_id: sid,
      code: [
        'import os, glob',
        'print(sorted(k for k in os.environ if k.startswith("SANDGATE")))',
        'seen = []',
        'for p in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):',
        '    try:',
        '        seen.append(open(p, "rb").read().decode("latin-1"))',
        '    except OSError:',
        '        pass',
        'print("\\n".join(seen))',
        'try:',
        '    open("/proc/1/mem", "rb").read(1)',
        '    print("mem readable")',
        'except OSError as e:',
        '    print("mem", type(e).__name__)',
      ].join('\n'),
    });
    assert.equal(r.result.state, 'completed', r.result.stderr);
    assert.match(r.result.stdout, /^\[\]\n/, 'no SANDGATE variable reaches the code');
    assert.ok(!r.result.stdout.includes(token.slice(0, 16)), 'the token is nowhere the code can read');
    assert.ok(!r.result.stdout.includes(envValues[0]!.slice(0, 16)), 'nor its hash');
    assert.ok(!r.result.stdout.includes(servicesToken.slice(0, 16)), 'nor the services token');
    assert.ok(!r.result.stdout.includes(envValues[1]!.slice(0, 16)), 'nor its hash');
    assert.match(r.result.stdout, /mem (PermissionError|OSError)/);
  });

  await t.test('the agent port answers only the token: a wrong one gets nothing, the right one a pong', async () => {
    const ip = (await podOf(s, sid)).status.podIP as string;
    const token = (await podOf(s, sid)).metadata.annotations[AGENT_TOKEN_ANNOTATION] as string;
    const ping = `${JSON.stringify({ op: 'ping', id: 'probe' })}\n`;
    const wrong = await talk(ip, [`${JSON.stringify({ op: 'hello', token: 'x'.repeat(43) })}\n`, ping], 3000);
    assert.equal(wrong.connected, true);
    assert.equal(wrong.received, '', 'not one frame without the token');
    const none = await talk(ip, [ping], 3000);
    assert.equal(none.received, '');
    const right = await talk(ip, [`${JSON.stringify({ op: 'hello', token })}\n`, ping], 1500);
    assert.match(right.received, /"t":"pong","id":"probe"/);
    // That connection took the place of the worker's: the next run connects again, and works.
    const r = await run(s, { session_id: sid, code: 'n' });
    assert.equal(r.result.value, '1');
  });

  await t.test("a cell can neither forge its run's result nor reach the agent, its Pod's init", async () => {
    assertGenuine((await run(s, { session_id: sid, code: forger(false) })).result);
    // The agent is the Pod's PID 1, of the same uid: signals reach it but are the init's to ignore or handle (no
    // SIGSTOP or SIGKILL from inside), and it is not dumpable and traces are refused (its seccomp filter).
    const probe = await run(s, {
      session_id: sid,
      code: [
        'import ctypes, os, signal',
        'for sig in (signal.SIGSTOP, signal.SIGINT, signal.SIGTERM, signal.SIGKILL):',
        '    os.kill(1, sig)',
        'print("ptrace", ctypes.CDLL(None).ptrace(16, 1, None, None))',
        'try:',
        '    os.listdir("/proc/1/fd")',
        '    print("fds readable")',
        'except OSError as e:',
        '    print("fds", type(e).__name__)',
      ].join('\n'),
    });
    assert.equal(probe.result.stdout, 'ptrace -1\nfds PermissionError\n', probe.result.stderr);
    const after = await run(s, { session_id: sid, code: 'n' });
    assert.deepEqual([after.result.value, after.result.interpreter_restarted], ['1', false], 'the agent lives on');
  });

  await t.test("another Pod cannot reach a session Pod's agent", async () => {
    const ip = (await podOf(s, sid)).status.podIP as string;
    const r = await run(s, {
      code: [
        'import socket',
        'try:',
        `    socket.create_connection(("${ip}", ${DEFAULT_AGENT_PORT}), timeout=3)`,
        '    print("reached")',
        'except OSError as e:',
        '    print("refused", type(e).__name__)',
      ].join('\n'),
    });
    assert.match(r.result.stdout, /^refused /, r.result.stdout + r.result.stderr);
  });

  await t.test(
    'files: uploads reach the Pod, what a run writes or deletes reaches the store; links never',
    async () => {
      const data = Buffer.from(Array.from({ length: 3 << 20 }, (_, i) => (i * 7) % 256));
      const up = await fetch(`${s.url}/v1/sessions/${sid}/files/in/data.bin`, {
        method: 'PUT',
        headers: { 'content-type': 'application/octet-stream' },
        body: data,
      });
      assert.equal(up.status, 201);
      const r = await run(s, {
        session_id: sid,
        code: [
          'import hashlib, os',
          'print(hashlib.sha256(open("in/data.bin", "rb").read()).hexdigest())',
          'open("out.txt", "w").write("written in the Pod")',
          'os.symlink("/etc/passwd", "passwd-link")',
          'os.mkfifo("fifo")',
          'os.makedirs("deep/er", exist_ok=True)',
          'open("deep/er/x.txt", "w").write("x")',
        ].join('\n'),
      });
      assert.equal(r.result.state, 'completed', r.result.stderr);
      assert.equal(r.result.stdout.trim(), createHash('sha256').update(data).digest('hex'));
      assert.deepEqual(
        r.result.artifacts.map((a: any) => a.path),
        ['deep/er/x.txt', 'out.txt'],
        'regular files only: no link, no FIFO, and the input is not an artifact',
      );
      const out = await fetch(r.result.artifacts[1].download_url);
      assert.equal(await out.text(), 'written in the Pod');

      assert.equal((await s.api('DELETE', `/v1/sessions/${sid}/files/out.txt`)).status, 204);
      const after = await run(s, {
        session_id: sid,
        code: 'import os\nos.remove("deep/er/x.txt")\nsorted(os.listdir("."))',
      });
      assert.equal(after.result.state, 'completed', after.result.stderr);
      assert.match(after.result.value, /'deep', 'fifo', 'in', 'passwd-link'/);
      assert.doesNotMatch(after.result.value, /out\.txt/, 'a file deleted through the API is gone from the Pod');
      const files = (await s.api('GET', `/v1/sessions/${sid}/files`)).body.files.map((f: any) => f.path);
      assert.deepEqual(files, ['in/data.bin'], 'the file the run deleted is gone from the store');
    },
  );

  await t.test('new limits replace the Pod: the interpreter restarts, the files stay', async () => {
    const uid = (await podOf(s, sid)).metadata.uid;
    const r = await run(s, {
      session_id: sid,
      limits: { memory_mb: 384 },
      code: 'import os\nprint(os.path.exists("in/data.bin"))',
    });
    assert.equal(r.result.stdout, 'True\n', r.result.stderr);
    assert.equal(r.result.interpreter_restarted, true);
    const pod = await podOf(s, sid);
    assert.notEqual(pod.metadata.uid, uid);
    assert.equal(pod.spec.containers[0].resources.limits.memory, '384Mi');
  });

  await t.test(
    'an interpreter killed for memory fails its run with reason oom; the next run has a fresh one',
    async () => {
      const limits = { memory_mb: 384 };
      const r = await run(s, { session_id: sid, limits, code: 'x = bytearray(1 << 30)' });
      assert.equal(r.result.state, 'failed', JSON.stringify(r.result));
      assert.equal(r.result.reason, 'oom');
      const next = await run(s, {
        session_id: sid,
        limits,
        code: 'import os\nprint(os.path.exists("in/data.bin"))\n"n" in globals()',
      });
      assert.deepEqual(
        [next.result.stdout, next.result.value, next.result.interpreter_restarted],
        ['True\n', 'False', true],
      );
    },
  );

  await t.test('a deleted session takes its Pod with it', async () => {
    assert.equal((await s.api('DELETE', `/v1/sessions/${sid}`)).status, 204);
    await until('the session Pod to be swept', async () => (await podOf(s, sid)) === undefined, 60_000, 250);
  });
});

test('kubernetes: a process session in its Pod — memory kills, disk quota, and a python started ahead', async (t) => {
  const s = await startStack({ backend: 'kubernetes', env: { SANDGATE_SESSION_DISK_BYTES: '16MiB' } });
  t.after(() => s.close());
  const sid = (await s.api('POST', '/v1/sessions', {})).body.id as string;

  await t.test('runs are processes: nothing carries over but files; daemons do not outlive their run', async () => {
    const a = await run(s, {
      session_id: sid,
      language: 'bash',
      code: 'echo one > one.txt; (sleep 300 &) ; echo started',
    });
    assert.equal(a.result.stdout, 'started\n', a.result.stderr);
    const b = await run(s, {
      session_id: sid,
      language: 'bash',
      code: 'cat one.txt; for p in /proc/[0-9]*; do cat $p/comm 2>/dev/null; done | grep -c "^sleep$" || true',
    });
    assert.equal(b.result.stdout, 'one\n0\n');
  });

  await t.test('an OOM kill fails the run with reason oom, and the session lives on', async () => {
    const r = await run(s, {
      session_id: sid,
      limits: { memory_mb: 128 },
      code: 'x = bytearray(512 << 20)\nprint(len(x))',
    });
    assert.equal(r.result.state, 'failed', JSON.stringify(r.result));
    assert.equal(r.result.reason, 'oom');
    const next = await run(s, { session_id: sid, limits: { memory_mb: 128 }, code: 'print(open("one.txt").read())' });
    assert.equal(next.result.stdout, 'one\n\n');
  });

  await t.test(
    'files over the session disk quota get the Pod evicted: failed, disk_quota; then a fresh Pod',
    async () => {
      const r = await run(s, {
        session_id: sid,
        code: 'import time\nopen("big.bin", "wb").write(b"x" * (64 << 20))\ntime.sleep(30)',
      });
      assert.equal(r.result.state, 'failed', JSON.stringify(r.result));
      assert.equal(r.result.reason, 'disk_quota');
      const next = await run(s, { session_id: sid, language: 'bash', code: 'ls' });
      assert.equal(next.result.state, 'completed', next.result.stderr);
      assert.equal(next.result.stdout, 'one.txt\n', 'the store kept what it had; the evicted run wrote nothing back');
    },
  );
});
