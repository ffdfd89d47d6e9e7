import { LocalArtifactStore } from '../artifacts/artifact-store.ts';
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '../logger.ts';
import { runInAgent, type AgentRunSetup } from '../agent/agent-run.ts';
import { deathOf } from './sandbox-death.ts';
import { SessionSandboxes } from './session-sandboxes.ts';
import { sessionContainerName } from './agent-spec.ts';
import { artifactUrl, docker, fixture, IMAGE, killAgentOf, RecordingSink, removeContainer } from '../testing/docker.ts';

/** A session sandbox to drive runInAgent with, as the session and pool runs do. */
async function sandbox(t: TestContext) {
  const f = await fixture(t);
  const job = f.job({ sandbox: 'session' });
  t.after(() => removeContainer(sessionContainerName(job.session_id)));
  const settings = {
    image: IMAGE,
    runtime: undefined,
    user: '1000:1000',
    pidsLimit: 64,
    tmpfsBytes: 8 << 20,
    nofile: 256,
    deployment: f.deployment,
  };
  const sessions = new SessionSandboxes(docker, settings, silentLogger, 30_000, f.workspaces.dataDir);
  const dir = await f.workspaces.create(job.session_id);
  const s = await sessions.acquire(job, dir);
  t.after(() => s.channel.close());
  const kill = async (): Promise<void> => {
    await s.container.kill();
  };
  const setup = (over: Partial<typeof job>, sink = new RecordingSink()): AgentRunSetup => ({
    job: { ...job, ...over },
    events: sink,
    signal: new AbortController().signal,
    channel: s.channel,
    dir,
    mode: 'process',
    interruptGraceMs: 2000,
    maxOutputBytes: 1000,
    artifacts: new LocalArtifactStore(artifactUrl),
    kill,
    postMortem: async () => ({ ...(await deathOf(s.container, kill, Date.now() - 60_000)), message: 'it died' }),
  });
  return { ...s, setup };
}

test('a run reports its output, phases and artifacts; the sandbox stays for the next', async (t) => {
  const s = await sandbox(t);
  const sink = new RecordingSink();
  const outcome = await runInAgent(s.setup({ code: 'open("out.txt", "w").write("x")\nprint("done")' }, sink));
  assert.equal(outcome.started, true);
  assert.equal(outcome.result.state, 'completed');
  assert.equal(outcome.result.stdout, 'done\n');
  assert.deepEqual(
    outcome.result.artifacts.map((a) => a.path),
    ['out.txt'],
  );
  assert.deepEqual(sink.artifacts, outcome.result.artifacts);
  assert.deepEqual(sink.phases, ['running', 'harvesting']);
  assert.equal((await s.container.inspect()).State.Running, true);
});

test("a sandbox that dies mid-run is failed with the post-mortem's message and exit status", async (t) => {
  const s = await sandbox(t);
  // A run cannot kill its agent (another uid): it is killed from outside mid-run, as a crash of it would end it.
  const sink = new RecordingSink((text) => {
    if (text.includes('before')) void killAgentOf(s.container);
  });
  const outcome = await runInAgent(s.setup({ language: 'bash', code: 'echo before; sleep 30' }, sink));
  assert.equal(outcome.started, true);
  assert.deepEqual([outcome.result.state, outcome.result.message], ['failed', 'it died']);
  // No engine stopped it, so the run failed rather than hit a platform fault.
  const death = await deathOf(s.container, async () => {}, Date.now() - 60_000);
  assert.deepEqual(death, { exitCode: 137, oomKilled: false, engineStopped: false });
});

test('a sandbox gone before it took the run: nothing ran, and another sandbox may be tried', async (t) => {
  const s = await sandbox(t);
  await s.container.kill();
  await s.channel.ended;
  const sink = new RecordingSink();
  const outcome = await runInAgent(s.setup({ code: 'print(1)' }, sink));
  assert.deepEqual([outcome.started, outcome.started ? undefined : outcome.retryable], [false, true]);
  assert.deepEqual(sink.phases, []);
});
