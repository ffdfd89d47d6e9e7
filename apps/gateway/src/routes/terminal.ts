import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  ProblemSchema,
  SandgateError,
  SessionParamsSchema,
  TerminalStatusSchema,
  TerminalUrlSchema,
  ref,
} from '@sandgate/contracts';
import type { SessionRecord } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import { tenantOf } from '../plugins/auth.ts';
import { originPolicy, trustedOrigins } from '../plugins/origin-policy.ts';
import { MAX_FRAME, TERMINAL_CLOSE, relayTerminal, type TerminalClose } from '../terminal/terminal-relay.ts';
import { tookOver, upgradeOf } from '../upgrades.ts';

const TerminalQuery = Type.Object({
  cols: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 80, description: 'Columns at the start.' })),
  rows: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 24, description: 'Rows at the start.' })),
  expires: Type.Optional(Type.String({ description: 'Of a signed URL (POST …/terminal/url): when it expires.' })),
  sig: Type.Optional(Type.String({ description: 'Of a signed URL: its signature (it stands for the API key, once).' })),
});
/** How long a terminal whose sandbox went waits for a pause or resume under way to say why. */
const LOST_WAIT_MS = 30_000;
const WEBSOCKET_KEY = /^[A-Za-z0-9+/]{22}==$/;
const UPGRADE_RESPONSES = {
  101: {
    description:
      'A websocket. Binary messages carry the terminal\'s bytes both ways; a text message `{"type":"resize",' +
      '"cols":…,"rows":…}` resizes it. It closes with 1000 once the shell exited (the reason says with which code), ' +
      '4409 when the session is paused, 4404 when it is deleted, 4410 when its sandbox ended, 1001 when the gateway ' +
      'shuts down, 1008 for a text message that is not a resize (docs/terminal.md).',
  },
};

/** GET /v1/sessions/:id/terminal: a shell in the session's sandbox over a websocket (docs/terminal.md). */
export const terminalRoutes: FastifyPluginAsyncTypebox<{ deps: GatewayDeps }> = async (app, { deps }) => {
  const terminals = deps.terminalControl;
  const { config } = deps;
  // A browser sends no API key on a websocket, but its cookies and signed URLs travel: the page must be ours.
  const mayUse = originPolicy({
    publicUrl: config.publicUrl,
    open: Object.keys(config.apiKeys).length === 0,
    extra: trustedOrigins(config),
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME, perMessageDeflate: false });
  app.addHook('onClose', async () => wss.close());

  app.post(
    '/v1/sessions/:id/terminal/url',
    {
      schema: {
        operationId: 'createTerminalUrl',
        tags: ['terminal'],
        summary: 'A signed websocket URL that opens one terminal of the session without an API key, within a minute',
        description: 'For browsers, which cannot send an `Authorization` header on a websocket.',
        params: SessionParamsSchema,
        response: {
          201: ref(TerminalUrlSchema),
          401: ref(ProblemSchema),
          404: ref(ProblemSchema),
          501: ref(ProblemSchema),
        },
      },
    },
    async (req, reply) => reply.status(201).send(await terminals.signedUrl(tenantOf(req), req.params.id)),
  );

  app.get(
    '/v1/sessions/:id/terminal',
    {
      // Authorised by the API key or by a signed URL: checked here, not by the key hook.
      config: { public: true, openapi: { responses: UPGRADE_RESPONSES } },
      schema: {
        operationId: 'openTerminal',
        tags: ['terminal'],
        summary: "A terminal in the session's sandbox: a login shell on a pty, over a websocket",
        description:
          'Send the websocket upgrade with the API key, or open a signed URL (POST …/terminal/url). A session ' +
          'without a sandbox (paused, or never run) gets one first, as a resume would. Without the upgrade (and ' +
          'with the API key) it answers how many terminals the session has open.',
        params: SessionParamsSchema,
        querystring: TerminalQuery,
        response: {
          200: ref(TerminalStatusSchema),
          400: ref(ProblemSchema),
          401: ref(ProblemSchema),
          403: ref(ProblemSchema),
          404: ref(ProblemSchema),
          409: ref(ProblemSchema),
          429: ref(ProblemSchema),
          501: ref(ProblemSchema),
          502: ref(ProblemSchema),
          503: ref(ProblemSchema),
        },
      },
    },
    async (req, reply) => {
      if (!mayUse(req.headers.origin)) {
        const origin = String(req.headers.origin).slice(0, 100);
        throw new SandgateError('origin_not_allowed', `terminals cannot be opened from the origin "${origin}"`);
      }
      const upgrade = upgradeOf(req.raw);
      if (upgrade === undefined) return terminals.status(tenantOf(req), req.params.id);
      const key = req.headers['sec-websocket-key'];
      const version = req.headers['sec-websocket-version'];
      if (req.headers.upgrade?.toLowerCase() !== 'websocket' || !WEBSOCKET_KEY.test(key ?? '') || version !== '13') {
        throw new SandgateError(
          'bad_request',
          'a websocket upgrade needs Upgrade: websocket, a Sec-WebSocket-Key and version 13',
        );
      }
      const { id } = req.params;
      const session = await terminals.authorise(req.tenant, id, req.query);
      const agent = await terminals.open(session, { cols: req.query.cols ?? 80, rows: req.query.rows ?? 24 });
      reply.hijack();
      const ws = await new Promise<WebSocket | null>((resolve) => {
        upgrade.socket.once('close', () => resolve(null));
        wss.handleUpgrade(req.raw, upgrade.socket, upgrade.head, resolve);
      });
      if (ws === null) {
        agent.destroy();
        return;
      }
      tookOver(reply.raw, upgrade);
      const log = req.log.child({ session_id: id, tenant: session.tenant });
      log.info('terminal opened');
      const closed = await relayTerminal(ws, agent, watcher(session), { draining: deps.draining });
      log.info({ code: closed.code, reason: closed.reason }, 'terminal closed');
    },
  );

  /** How the relay follows the session: closed once it is paused or deleted, in use while keys come. */
  function watcher(session: SessionRecord) {
    const now = async (fallback: TerminalClose | null): Promise<TerminalClose | null> => {
      const s = await deps.sessions.get(session.tenant, session.id);
      if (s === null) return { code: TERMINAL_CLOSE.sessionDeleted, reason: 'the session was deleted' };
      if (s.pausedAt !== null) return { code: TERMINAL_CLOSE.sessionPaused, reason: 'the session was paused' };
      return fallback;
    };
    const ended = {
      code: TERMINAL_CLOSE.sandboxEnded,
      reason: "the session's sandbox ended (a restart, or a change of limits or network): open the terminal again",
    };
    return {
      check: () => now(null),
      lost: async () => {
        // A pause removes the sandbox before it records the session paused: while an operation holds the session,
        // what it does decides.
        const deadline = Date.now() + LOST_WAIT_MS;
        for (;;) {
          const why = (await now(ended))!;
          if (why !== ended || Date.now() > deadline) return why;
          const holder = await deps.redis.get(deps.keys.sessionLock(session.id));
          // Read again once the lock is seen free: an operation records the session paused as it lets the lock go
          // (one script), which may have come between the two reads.
          if (!holder?.startsWith('op_')) return (await now(ended))!;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      },
      used: async () => {
        const s = await deps.sessions.get(session.tenant, session.id);
        if (s !== null) await deps.sessions.touch(s);
      },
    };
  }
};
