/**
 * memory-upload: gateway and worker as separate processes; a 50 MB raw PUT /v1/sessions/:id/files/big.bin,
 * its body streamed from a generator (chunked). The RSS of each process must not grow more than 50 MB.
 * Repeated BENCH_MEMORY_RUNS times (overwrite=true); the timing fields are the uploads.
 */
import { Readable } from 'node:stream';
import { createSession } from './lib/api.ts';
import { expectStatus, request } from './lib/http.ts';
import { MEMORY_RUNS } from './lib/knobs.ts';
import { main } from './lib/main.ts';
import { MEMORY_TARGET, emitMemory, measureMemory } from './lib/memory.ts';
import { startStack, type Stack } from './lib/stack.ts';
import { emitError, percentile } from './lib/stats.ts';

const BENCH = 'memory-upload';
/** SANDGATE_MAX_UPLOAD_BYTES defaults to 50MB = 50,000,000 bytes: exactly the largest upload allowed. */
const BYTES = 50_000_000;
const CHUNK = 64 * 1024;

function* body(total: number): Generator<Buffer> {
  const chunk = Buffer.alloc(CHUNK, 0x61);
  for (let sent = 0; sent < total; sent += CHUNK) yield sent + CHUNK <= total ? chunk : chunk.subarray(0, total - sent);
}

main(async () => {
  let stack: Stack | null = null;
  try {
    stack = await startStack(['gateway', 'worker'], {});
    const session = await createSession(stack);
    const put = async (bytes: number) => {
      const res = await request('PUT', `${stack!.url}/v1/sessions/${session.id}/files/big.bin?overwrite=true`, {
        body: Readable.from(body(bytes)),
        headers: { ...stack!.headers, 'content-type': 'application/octet-stream' },
      });
      expectStatus(res, [200, 201], 'PUT /v1/sessions/:id/files/big.bin');
      const size = res.json?.files?.[0]?.size_bytes ?? res.json?.size_bytes;
      if (size !== undefined && size !== bytes) throw new Error(`stored ${size} bytes, sent ${bytes}`);
    };
    await put(1 << 20);
    const r = await measureMemory(stack, MEMORY_RUNS, () => put(BYTES));
    const stops = await stack.close();
    stack = null;
    const median = percentile(
      [...r.durations].sort((a, b) => a - b),
      50,
    );
    emitMemory(
      BENCH,
      MEMORY_TARGET,
      r,
      { upload_bytes: BYTES, upload_mb_per_s: Math.round(BYTES / 1e6 / (median / 1000)) },
      stops,
    );
  } catch (e) {
    emitError(BENCH, MEMORY_TARGET, e);
  } finally {
    await stack?.close();
  }
});
