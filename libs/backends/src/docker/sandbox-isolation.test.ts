import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { bridgeGateway, modeFixture, RUN_MODES, runPlain } from '../testing/docker.ts';

const connectScript = (host: string, port: number): string => `
import socket, sys
try:
    socket.create_connection((${JSON.stringify(host)}, ${port}), timeout=3).close()
    print("connected")
except OSError as e:
    print("blocked:", e)
    sys.exit(3)
`;

for (const mode of RUN_MODES) {
  test(`[${mode}] the sandbox cannot reach a host listener that a bridged container can`, async (t) => {
    const f = await modeFixture(t, mode);
    let connections = 0;
    const server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const { port } = server.address() as AddressInfo;
    const gateway = await bridgeGateway();

    // The control proves the listener is reachable from a container at all, so a hole would show.
    assert.equal(
      await runPlain(t, ['python3', '-c', connectScript(gateway, port)]),
      0,
      'control container could not connect',
    );
    assert.equal(connections, 1);

    const r = await f.run(f.job({ code: connectScript(gateway, port) }));
    assert.equal(r.exit_code, 3, r.stdout + r.stderr);
    assert.match(r.stdout, /^blocked:/);
    const ifaces = await f.run(f.job({ language: 'bash', code: 'ls /sys/class/net' }));
    assert.equal(ifaces.stdout.trim(), 'lo');
    assert.equal(connections, 1);
  });

  test(`[${mode}] the sandbox has no capabilities, no new privileges, uid 1000 and a read-only root`, async (t) => {
    const f = await modeFixture(t, mode);
    const r = await f.run(
      f.job({
        code: `
import json, os
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
def writable(path):
    try:
        with open(path, "w") as fh: fh.write("x")
        return "ok"
    except OSError as e:
        return e.strerror
print(json.dumps({"cap_eff": status["CapEff"].strip(), "cap_bnd": status["CapBnd"].strip(),
  "no_new_privs": status["NoNewPrivs"].strip(), "uid": os.getuid(), "gid": os.getgid(), "cwd": os.getcwd(),
  "root": writable("/probe"), "etc": writable("/etc/probe"), "tmp": writable("/tmp/probe"), "data": writable("/mnt/data/probe")}))
`,
      }),
    );
    assert.equal(r.state, 'completed', r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), {
      cap_eff: '0000000000000000',
      cap_bnd: '0000000000000000',
      no_new_privs: '1',
      uid: 1000,
      gid: 1000,
      cwd: '/mnt/data',
      root: 'Read-only file system',
      etc: 'Read-only file system',
      tmp: 'ok',
      data: 'ok',
    });
  });

  test(`[${mode}] /tmp is limited to its size`, async (t) => {
    const f = await modeFixture(t, mode, { tmpfsBytes: 8 * 1024 * 1024 });
    const r = await f.run(f.job({ language: 'bash', code: 'head -c 16777216 /dev/zero > /tmp/big' }));
    assert.equal(r.state, 'failed');
    assert.match(r.stderr, /No space left on device/);
  });

  test(`[${mode}] a memory bomb is OOM-killed and reported as failed with reason oom`, async (t) => {
    const f = await modeFixture(t, mode);
    const r = await f.run(
      f.job({
        code: 'chunks = []\nwhile True:\n    chunks.append(b"\\x01" * (1 << 20))',
        memory_mb: 64,
      }),
    );
    assert.equal(r.state, 'failed');
    assert.equal(r.reason, 'oom');
    assert.equal(r.exit_code, 137);
  });

  test(`[${mode}] a fork bomb is contained by the pids limit and the timeout; the next run works`, async (t) => {
    const f = await modeFixture(t, mode);
    const r = await f.run(
      f.job({
        code: 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass',
        timeout_ms: 3000,
      }),
    );
    assert.ok(r.state === 'timeout' || r.state === 'failed', r.state);
    // The host can still start processes, and the backend can still run code.
    assert.equal(execFileSync('echo', ['host ok']).toString(), 'host ok\n');
    const next = await f.run(f.job({ code: 'print("still fine")' }));
    assert.equal(next.stdout, 'still fine\n');
  });

  test(`[${mode}] the pids limit stops a sandbox from making more processes`, async (t) => {
    const f = await modeFixture(t, mode, { pidsLimit: 32 });
    const r = await f.run(
      f.job({
        code: `
import os, time
children = 0
try:
    for _ in range(64):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        children += 1
except OSError as e:
    print(children, e.strerror)
`,
      }),
    );
    const [count, ...why] = r.stdout.trim().split(' ');
    assert.equal(why.join(' '), 'Resource temporarily unavailable', r.stdout + r.stderr);
    assert.ok(Number(count) < 32, r.stdout);
  });

  test(`[${mode}] the job env is visible; the worker environment is not`, async (t) => {
    const f = await modeFixture(t, mode);
    process.env.SANDGATE_TEST_SECRET = 'x';
    t.after(() => delete process.env.SANDGATE_TEST_SECRET);
    const code = 'import os, json\nprint(json.dumps(dict(os.environ)))';
    const env = JSON.parse((await f.run(f.job({ code, env: { GREETING: 'hi there', EMPTY: '' } }))).stdout) as Record<
      string,
      string
    >;
    assert.equal(env.GREETING, 'hi there');
    assert.equal(env.EMPTY, '');
    for (const name of Object.keys(env)) assert.ok(!name.startsWith('SANDGATE_') && !name.startsWith('REDIS'), name);
    const next = JSON.parse((await f.run(f.job({ code }))).stdout) as Record<string, string>;
    assert.equal(next.GREETING, undefined, "one run's variables do not reach the next");
  });
}
