// The behaviour every ExecutionBackend must have, as a suite each backend's tests run (not itself a test file).
import { randomBytes } from 'node:crypto';
import { chown, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { ExecutionJob } from '@sandgate/contracts';
import type { Workspaces } from '@sandgate/storage';
import type { ExecutionBackend, LiveSet } from '../backend.ts';
import { RecordingSink } from './recording-sink.ts';

export interface ContractSubject {
  backend: ExecutionBackend;
  /** Where the backend keeps session files: the suite puts inputs there and reads what runs wrote. */
  workspaces: Workspaces;
  /** Who owns uploaded files in the store (the sandbox user), as the gateway writes them. */
  fileOwner: { uid: number; gid: number };
  /** The session the suite's runs use, where the backend needs one to exist (default: a new id, tenant `contract`). */
  session?: { id: string; tenant: string };
}

const newId = (prefix: string, bytes: number) => `${prefix}_${randomBytes(bytes).toString('hex')}`;
const nothingLive: LiveSet = { executions: new Set(), sessions: new Set(), workers: new Set() };

/**
 * Runs the backend contract against the backend `setup` makes (once, for the whole suite): what a run reports, in
 * which order, how each way of ending is told apart, what crosses into the sandbox and what comes out. Every backend
 * passes the same suite; what a backend does beyond it has tests of its own.
 */
export function describeBackendContract(name: string, setup: (t: TestContext) => Promise<ContractSubject>): void {
  test(`backend contract: ${name}`, async (t) => {
    const { backend, workspaces, fileOwner, session: given } = await setup(t);
    const { id: session, tenant } = given ?? { id: newId('sess', 6), tenant: 'contract' };
    const job = (over: Partial<ExecutionJob> = {}): ExecutionJob => ({
      execution_id: newId('exec', 8),
      tenant,
      session_id: session,
      language: 'python',
      code: 'print(1)',
      timeout_ms: 20_000,
      memory_mb: 256,
      cpus: 1,
      env: {},
      stdin: null,
      sandbox: 'oneshot',
      generation: 0,
      ...over,
    });
    const run = async (over: Partial<ExecutionJob> = {}, signal = new AbortController().signal) => {
      const sink = new RecordingSink();
      const result = await backend.execute(job(over), sink, signal);
      return { result, sink };
    };

    try {
      await t.test('stdout and stderr as events and in the result; the exit code decides the state', async () => {
        const { result, sink } = await run({
          code: 'import sys\nprint("out")\nprint("err", file=sys.stderr)\nsys.exit(3)',
        });
        assert.equal(result.state, 'failed');
        assert.equal(result.exit_code, 3);
        assert.equal(result.stdout, 'out\n');
        assert.equal(result.stderr, 'err\n');
        assert.equal(sink.stdoutChunks.join(''), 'out\n');
        assert.equal(sink.stderrChunks.join(''), 'err\n');
        assert.deepEqual(sink.phases, ['starting', 'running', 'harvesting']);
      });

      await t.test("stdin is the job's (EOF without one); the environment is the job's only", async () => {
        const code =
          'import os, sys\nprint(repr(sys.stdin.read()), os.environ.get("A"), "SANDGATE_CONTRACT" in os.environ)';
        process.env.SANDGATE_CONTRACT = 'worker-only';
        t.after(() => delete process.env.SANDGATE_CONTRACT);
        assert.equal((await run({ code, stdin: 'in\n', env: { A: 'b' } })).result.stdout, "'in\\n' b False\n");
        assert.equal((await run({ code })).result.stdout, "'' None False\n");
      });

      await t.test('every language runs', async () => {
        const cases: [ExecutionJob['language'], string][] = [
          ['javascript', 'console.log(6 * 7)'],
          ['typescript', 'const n: number = 42; console.log(n)'],
          ['bash', 'echo 42'],
        ];
        for (const [language, code] of cases)
          assert.equal((await run({ language, code })).result.stdout, '42\n', language);
      });

      await t.test(
        "files: the session's are there; what a completed run creates or changes are its artifacts",
        async () => {
          const dir = await workspaces.create(session);
          for (const [name, text] of [
            ['input.txt', 'given'],
            ['kept.txt', 'unchanged'],
          ] as const) {
            await writeFile(join(dir, name), text);
            await chown(join(dir, name), fileOwner.uid, fileOwner.gid);
          }
          const { result, sink } = await run({
            code: 'open("input.txt", "a").write("+more")\nopen("new.txt", "w").write("made")\nprint(open("kept.txt").read())',
          });
          assert.equal(result.state, 'completed', result.stderr);
          assert.equal(result.stdout, 'unchanged\n');
          assert.deepEqual(result.artifacts.map((a) => a.path).sort(), ['input.txt', 'new.txt']);
          assert.deepEqual(sink.artifacts.map((a) => a.path).sort(), ['input.txt', 'new.txt']);
          assert.equal(await readFile(join(dir, 'input.txt'), 'utf8'), 'given+more');
          const made = result.artifacts.find((a) => a.path === 'new.txt')!;
          assert.equal(made.size_bytes, 4);
          assert.match(made.sha256, /^[0-9a-f]{64}$/);
        },
      );

      await t.test('timeout: killed at its limit, reported as timeout, with what it printed', async () => {
        const { result } = await run({ timeout_ms: 1500, code: 'import time\nprint("a", flush=True)\ntime.sleep(60)' });
        assert.equal(result.state, 'timeout');
        assert.equal(result.reason, 'timeout');
        assert.equal(result.stdout, 'a\n');
      });

      await t.test('cancel: before the start nothing runs; during the run it stops', async () => {
        const early = new AbortController();
        early.abort();
        const before = await run({ code: 'open("ran.txt", "w").write("x")' }, early.signal);
        assert.equal(before.result.state, 'cancelled');
        assert.equal(before.result.duration_ms, 0);
        const during = new AbortController();
        const sink = new RecordingSink((text) => {
          if (text.includes('up')) during.abort();
        });
        const result = await backend.execute(
          job({ code: 'import time\nprint("up", flush=True)\ntime.sleep(60)' }),
          sink,
          during.signal,
        );
        assert.equal(result.state, 'cancelled');
        assert.equal(result.reason, 'cancelled');
      });

      await t.test('output past the cap is cut and flagged', async () => {
        const { result } = await run({ code: 'import sys\nsys.stdout.write("x" * 5_000_000)' });
        assert.equal(result.stdout_truncated, true);
        assert.ok(result.stdout.length < 5_000_000 && result.stdout.length > 0);
      });

      await t.test('memory: past its limit a run fails as oom', async () => {
        const { result } = await run({ memory_mb: 64, code: 'x = bytearray(512 * 1024 * 1024)\nprint("survived")' });
        assert.equal(result.state, 'failed');
        assert.equal(result.reason, 'oom');
      });

      await t.test('what it cannot run it refuses with unsupported_by_backend; what it can, it runs', async () => {
        for (const sandbox of ['session', 'stateful'] as const) {
          const attempt = run({ sandbox, code: 'print("ran")' });
          if (backend.capabilities.sandboxes.includes(sandbox))
            assert.equal((await attempt).result.stdout, 'ran\n', sandbox);
          else await assert.rejects(attempt, { code: 'unsupported_by_backend' }, sandbox);
        }
      });

      await t.test('health: its engine answers the probe, within the time given', async () => {
        assert.ok(backend.health, 'a backend with an engine to lose probes it');
        assert.deepEqual(await backend.health(5000), { usable: true });
      });

      await t.test('sweep spares what runs here, whatever live set it is given', async () => {
        const going = new AbortController();
        let swept: Promise<{ removed: string[] }> | undefined;
        const sink = new RecordingSink((text) => {
          if (!text.includes('up') || swept) return;
          swept = backend.sweep(nothingLive);
          void swept.finally(() => going.abort());
        });
        const code = 'import time\nprint("up", flush=True)\ntime.sleep(60)';
        const running = job({ code });
        const result = await backend.execute(running, sink, going.signal);
        // Session sandboxes earlier steps left may go (nothing is live); the run in progress may not.
        assert.ok(swept, 'the run printed');
        assert.ok(!(await swept).removed.includes(running.execution_id), 'the run in progress was swept');
        assert.equal(
          result.state,
          'cancelled',
          'it was still running when the sweep had ended, and stopped by the cancel',
        );
      });
    } finally {
      // Session sandboxes outlive their runs by design: the suite's go with it, before the setup's own cleanup.
      await backend.sweep(nothingLive);
    }
  });
}
