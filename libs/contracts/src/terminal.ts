import { Type, type Static } from '@sinclair/typebox';
import { TimestampSchema } from './common.ts';

/** POST /v1/sessions/{id}/terminal/url: a signed websocket URL for a browser (docs/terminal.md). */
export const TerminalUrlSchema = Type.Object(
  {
    url: Type.String({
      description:
        'ws:// or wss:// URL of GET /v1/sessions/{id}/terminal with `expires` and `sig`: opens one terminal without ' +
        'an API key, once, until expires_at (a minute). Add `cols` and `rows` to its query as needed.',
    }),
    expires_at: TimestampSchema,
  },
  { $id: 'TerminalUrl', title: 'TerminalUrl' },
);
export type TerminalUrl = Static<typeof TerminalUrlSchema>;

/** GET /v1/sessions/{id}/terminal without the websocket upgrade. */
export const TerminalStatusSchema = Type.Object(
  {
    open: Type.Integer({ minimum: 0, description: "Terminals open in the session's sandbox now." }),
    max: Type.Integer({ minimum: 0, description: 'How many it may have open at once (SANDGATE_MAX_TERMINALS).' }),
  },
  { $id: 'TerminalStatus', title: 'TerminalStatus' },
);
export type TerminalStatus = Static<typeof TerminalStatusSchema>;
