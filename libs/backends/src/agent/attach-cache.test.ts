import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AgentChannel } from './agent-channel.ts';
import { AttachCache } from './attach-cache.ts';

interface Kept {
  containerId: string;
  channel: AgentChannel;
}

/** Stands in for an attach: the cache only ever asks whether it is closed, and closes it. */
const channel = (): AgentChannel & { closes: number } => {
  const c = {
    closed: false,
    closes: 0,
    close() {
      c.closes++;
      c.closed = true;
    },
  };
  return c as unknown as AgentChannel & { closes: number };
};

test('a kept attach is handed back once, for its key only', () => {
  const cache = new AttachCache<Kept>();
  const a = channel();
  cache.put('sess_a', { containerId: 'id-a', channel: a });
  assert.equal(cache.take('sess_b'), undefined);
  assert.deepEqual(cache.take('sess_a'), { containerId: 'id-a', channel: a });
  assert.equal(cache.take('sess_a'), undefined, "taken: it is the caller's now");
  assert.equal(a.closes, 0);
});

test('an attach that ended meanwhile is not handed out; a closed one is not kept', () => {
  const cache = new AttachCache<Kept>();
  const a = channel();
  cache.put('sess_a', { containerId: 'id-a', channel: a });
  a.close();
  assert.equal(cache.take('sess_a'), undefined);
  cache.put('sess_b', { containerId: 'id-b', channel: a });
  assert.equal(cache.size, 0);
});

test('past the bound the least recently kept goes; retain and close close what they drop', () => {
  const cache = new AttachCache<Kept>(2);
  const [a, b, c, d] = [channel(), channel(), channel(), channel()];
  cache.put('a', { containerId: 'ia', channel: a });
  cache.put('b', { containerId: 'ib', channel: b });
  cache.put('c', { containerId: 'ic', channel: c });
  assert.deepEqual([a.closes, b.closes, c.closes, cache.size], [1, 0, 0, 2]);
  cache.put('b', { containerId: 'ib2', channel: d });
  assert.equal(b.closes, 1, 'a newer attach for the same key replaces the kept one');
  cache.retain(new Set(['b']));
  assert.deepEqual([c.closes, d.closes, cache.size], [1, 0, 1]);
  cache.close();
  assert.deepEqual([d.closes, cache.size], [1, 0]);
});

test('an attach idle for too long is closed', async () => {
  const cache = new AttachCache<Kept>(4, 10);
  const a = channel();
  cache.put('a', { containerId: 'ia', channel: a });
  await new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (a.closed) {
        clearInterval(poll);
        resolve();
      }
    }, 5);
  });
  assert.equal(cache.size, 0);
});
