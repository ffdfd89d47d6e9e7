import { Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { Webhook } from 'standardwebhooks';
import type { WebhookStatus } from '@sandgate/contracts';
import { createRedis, keys, queuePrefix } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import { presentExecution } from '../core/present.ts';
import { deliver } from './deliver.ts';
import { webhookSecret } from './secrets.ts';
import { HostAllowList } from '@sandgate/outbound';

/** How often due deliveries are moved into the queue; bounds how long after a run's end its first attempt starts. */
const PUMP_MS = 250;
const PUMP_BATCH = 100;

export interface WebhookDispatcher {
  close(): Promise<void>;
}

/**
 * Delivers callback_url webhooks. A run's end marks it due, in the same Redis step (sgFinalize: webhooks:due), so a
 * crash anywhere cannot lose it; each gateway moves due runs into a BullMQ queue of their own (job id = execution id,
 * so a run is queued once) and delivers them, retrying with exponential backoff up to SANDGATE_WEBHOOK_ATTEMPTS.
 * Jobs live in Redis: a delivery waiting for its retry survives any gateway's restart, and is done by whichever
 * gateway comes next. Every attempt is recorded on the execution. Runs never wait for any of this.
 */
export function startWebhookDispatcher(deps: GatewayDeps, log: Logger): WebhookDispatcher {
  const { config, executions, redis, signer } = deps;
  const allow = new HostAllowList(config.webhookAllow, 'SANDGATE_WEBHOOK_ALLOW');
  const due = keys(config.redisPrefix).webhooksDue();
  const name = `${config.queueName}-webhooks`;
  const producer = createRedis(config, 'sandgate-webhooks', { autoPipelining: false });
  const consumer = createRedis(config, 'sandgate-webhooks-worker', { autoPipelining: false });
  const queue = new Queue<{ execution_id: string }>(name, {
    connection: producer,
    prefix: queuePrefix(config.redisPrefix),
  });
  const wlog = log.child({ component: 'webhooks' });

  const attempt = async (id: string, attemptsMade: number) => {
    const rec = await executions.get(id);
    if (!rec?.callback_url || !rec.webhook || rec.webhook.state !== 'pending') return;
    const body = JSON.stringify(presentExecution(rec, config.publicUrl, signer));
    const at = new Date();
    const signature = new Webhook(webhookSecret(deps.signingKey, rec.tenant)).sign(id, at, body);
    const headers = {
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signature,
      'user-agent': 'sandgate-webhooks',
    };
    const outcome = await deliver(rec.callback_url, body, headers, { allow, timeoutMs: config.webhookTimeoutMs });
    const last = attemptsMade + 1 >= config.webhookAttempts;
    const status: WebhookStatus = {
      state: outcome.error === undefined ? 'delivered' : outcome.permanent || last ? 'failed' : 'pending',
      attempts: [
        ...rec.webhook.attempts,
        {
          at: at.toISOString(),
          status_code: outcome.statusCode,
          duration_ms: Date.now() - at.getTime(),
          ...(outcome.error === undefined ? {} : { error: outcome.error }),
        },
      ],
    };
    await executions.setWebhook(id, status);
    wlog.info(
      { executionId: id, state: status.state, statusCode: outcome.statusCode, error: outcome.error },
      'webhook attempt',
    );
    if (status.state === 'pending') throw new Error(outcome.error);
    if (status.state === 'failed' && !last) throw new UnrecoverableError(outcome.error);
  };

  const worker = new Worker<{ execution_id: string }>(
    name,
    async (job) => attempt(job.data.execution_id, job.attemptsMade),
    {
      connection: consumer,
      prefix: queuePrefix(config.redisPrefix),
      concurrency: 8,
    },
  );
  worker.on('error', (err: Error) => wlog.warn({ err }, 'webhook queue error'));

  let pumping: Promise<void> = Promise.resolve();
  const pump = async () => {
    const ids = await redis.zrange(due, '0', String(PUMP_BATCH - 1));
    for (const id of ids) {
      await queue.add(
        'deliver',
        { execution_id: id },
        {
          jobId: id,
          attempts: config.webhookAttempts,
          backoff: { type: 'exponential', delay: config.webhookBackoffMs },
          removeOnComplete: true,
          removeOnFail: true,
        },
      );
      await redis.zrem(due, id);
    }
  };
  const timer = setInterval(() => {
    pumping = pumping.then(pump).catch((err: unknown) => wlog.warn({ err }, 'moving due webhooks failed'));
  }, PUMP_MS);

  return {
    async close() {
      clearInterval(timer);
      await pumping;
      await worker.close();
      await queue.close();
      producer.disconnect();
      consumer.disconnect();
    },
  };
}
