import { Type, type Static } from '@sinclair/typebox';
import { TimestampSchema } from './common.ts';

/** One sample of the deployment's figures (GET /v1/system/stats/history). */
export const StatsPointSchema = Type.Object(
  {
    at: TimestampSchema,
    queued: Type.Integer({ minimum: 0, description: 'Runs waiting in the queue.' }),
    running: Type.Integer({ minimum: 0, description: 'Runs running.' }),
    runs_per_minute: Type.Union([Type.Number({ minimum: 0 }), Type.Null()], {
      description: 'Runs that ended since the previous sample, per minute; null on the first sample.',
    }),
    pool_hits: Type.Integer({ minimum: 0, description: 'Pool hits since the deployment started counting.' }),
    pool_misses: Type.Integer({ minimum: 0, description: 'Pool misses since the deployment started counting.' }),
    live_sessions: Type.Integer({ minimum: 0, description: 'Sessions not expired.' }),
    ended_runs: Type.Integer({ minimum: 0, description: 'Runs ended since the deployment started counting.' }),
  },
  { title: 'StatsPoint' },
);
export type StatsPoint = Static<typeof StatsPointSchema>;

export const StatsHistorySchema = Type.Object(
  {
    interval_seconds: Type.Integer({ minimum: 1, description: 'Time between samples (SANDGATE_STATS_HISTORY_S).' }),
    points: Type.Array(StatsPointSchema, { description: 'Oldest first, over the last hour at most.' }),
  },
  { $id: 'StatsHistory', title: 'StatsHistory' },
);
export type StatsHistory = Static<typeof StatsHistorySchema>;
