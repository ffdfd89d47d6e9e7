import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Dockerode from 'dockerode';
import { Sandgate } from '@sandgate/client';
import { SubvolumeQuota } from '@sandgate/storage';
import { QUOTA_DATA_PARENT, until } from './harness.ts';
import { freePort } from './redis-and-ports.ts';
import { referenceWorkflow } from './reference-workflow.ts';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..');
const KEY = 'compose-test-key-0123456789abcdef';
const SESSION_DISK_BYTES = 32 << 20;
const docker = new Dockerode();

/** Runs a script of the repository; its own log goes to this test's output only when it fails. */
async function script(path: string, timeoutMs: number): Promise<string> {
  try {
    return (await run('bash', [join(ROOT, path)], { cwd: ROOT, timeout: timeoutMs, maxBuffer: 16 << 20 })).stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`${path} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`, { cause: err });
  }
}

/** What the engine holds of a compose project and of the deployment its worker ran sandboxes for. */
async function leftovers(project: string, deployment: string): Promise<string[]> {
  const byProject = { label: [`com.docker.compose.project=${project}`] };
  const [containers, sandboxes, networks, volumes] = await Promise.all([
    docker.listContainers({ all: true, filters: byProject }),
    docker.listContainers({ all: true, filters: { label: [`org.sandgate.deployment=${deployment}`] } }),
    docker.listNetworks({ filters: byProject }),
    docker.listVolumes({ filters: byProject }),
  ]);
  return [
    ...containers.map((c) => `container ${c.Names.join()}`),
    ...sandboxes.map((c) => `sandbox ${c.Names.join()}`),
    ...networks.map((n) => `network ${n.Name}`),
    ...(volumes.Volumes ?? []).map((v) => `volume ${v.Name}`),
  ];
}

// The first run on a machine builds Docker Compose and the images (minutes): more than the runner's default.
const FIRST_RUN_MS = 45 * 60_000;

test(
  'docker-compose.yml: the images build here, the stack comes up, runs the reference workflow, and goes',
  { timeout: FIRST_RUN_MS },
  async (t) => {
    // Both are cached on the machine: a second run only checks (images by content hash, compose by version).
    const compose = (await script('scripts/install-compose.sh', 30 * 60_000)).trim();
    await script('images/compose/build.sh', 30 * 60_000);

    // The quick start's data disk (btrfs with quotas, scripts/setup.sh), mounted at the same path in the containers.
    const quota = await SubvolumeQuota.forDataDir(QUOTA_DATA_PARENT, SESSION_DISK_BYTES);
    assert.ok(!('unavailable' in quota), `no disk quotas under ${QUOTA_DATA_PARENT}: run bash scripts/setup.sh`);
    const dataDir = await mkdtemp(join(QUOTA_DATA_PARENT, 'sandgate-compose-'));
    const scratch = await mkdtemp(join(tmpdir(), 'sandgate-compose-'));
    const id = randomBytes(4).toString('hex');
    const project = `sandgate-test-${id}`;
    const deployment = `compose-${id}`;
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const envFile = join(scratch, 'sandgate.env');
    await writeFile(
      envFile,
      [
        `SANDGATE_REDIS_PREFIX=${deployment}`, // also the sandboxes' deployment label: the worker sweeps only its own
        `SANDGATE_SESSION_DISK_BYTES=${SESSION_DISK_BYTES}`,
        'SANDGATE_POOL_SIZE=1',
        'SANDGATE_SWEEP_INTERVAL_S=1', // a deleted session's sandbox goes within a second
        'SANDGATE_LOG_FORMAT=json',
        // The runtime image the tests run with (images/runtime/build.sh, run by images/compose/build.sh, made it).
        `SANDGATE_IMAGE=${process.env.SANDGATE_IMAGE ?? 'sandgate/runtime:1'}`,
      ].join('\n') + '\n',
    );
    const env = {
      ...process.env,
      SANDGATE_API_KEYS: `${KEY}:tenantA`,
      SANDGATE_DATA_DIR: dataDir,
      SANDGATE_ENV_FILE: envFile,
      SANDGATE_PUBLISH: `127.0.0.1:${port}`,
      SANDGATE_PUBLIC_URL: url,
    };
    const composeCmd = (...args: string[]) =>
      run(compose, ['--project-name', project, '--file', join(ROOT, 'docker-compose.yml'), ...args], {
        cwd: scratch,
        env,
        timeout: 5 * 60_000,
        maxBuffer: 16 << 20,
      });
    const down = () => composeCmd('down', '--volumes', '--remove-orphans', '--timeout', '20');
    t.after(async () => {
      // After a failure half-way: whatever is left goes, then the files.
      await down().catch(() => {});
      for (const c of await docker.listContainers({
        all: true,
        filters: { label: [`org.sandgate.deployment=${deployment}`] },
      }))
        await docker
          .getContainer(c.Id)
          .remove({ force: true })
          .catch(() => {});
      await rm(dataDir, { recursive: true, force: true });
      await rm(scratch, { recursive: true, force: true });
    });

    try {
      await composeCmd('up', '--detach', '--wait', '--wait-timeout', '180');
    } catch (err) {
      const logs = await composeCmd('logs', '--no-color', '--tail', '40').catch(() => ({ stdout: '' }));
      throw new Error(`compose up failed: ${(err as { stderr?: string }).stderr ?? ''}\n${logs.stdout}`, {
        cause: err,
      });
    }

    // What a client sees: HTTP to the published port, files through the same-path data directory.
    const session = await referenceWorkflow(url, KEY, scratch);
    const sandgate = new Sandgate({ baseUrl: url, apiKey: KEY });

    // The data volume enforces per-session disk quotas: the kernel stops a run at its session's limit.
    const full = await sandgate.run({
      session_id: session,
      language: 'python',
      code: `open('big.bin', 'wb').write(b'\\0' * ${2 * SESSION_DISK_BYTES})`,
    });
    assert.deepEqual([full.result!.state, full.result!.reason], ['failed', 'disk_quota'], full.result!.stderr);
    assert.match(full.result!.stderr, /Disk quota exceeded/);

    // The worker is the one in the stack, running sandboxes on the host's engine for this deployment only.
    const sandboxes = await docker.listContainers({
      all: true,
      filters: { label: [`org.sandgate.deployment=${deployment}`] },
    });
    assert.ok(sandboxes.length > 0, 'the pool and the session sandbox are on the host engine');

    // A session's sandbox outlives workers by design: it goes with its session.
    const deleted = await fetch(`${url}/v1/sessions/${session}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${KEY}` },
    });
    assert.equal(deleted.status, 204, await deleted.text());
    await until("the deleted session's sandbox to go", async () => {
      const left = await docker.listContainers({ all: true, filters: { name: [`sandgate-s-${session}`] } });
      return left.length === 0;
    });
    await down();
    assert.deepEqual(await leftovers(project, deployment), [], 'compose down leaves no container, network or volume');
  },
);
