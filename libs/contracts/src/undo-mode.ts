import { Type, type Static } from '@sinclair/typebox';

export const UndoModeSchema = Type.Union([Type.Literal('files'), Type.Literal('state'), Type.Literal('off')], {
  description:
    'What POST /v1/sessions/{id}/undo brings back. `files` (default): the files as they were before the last run. ' +
    "`state`: the files and, for a stateful session, the interpreter's variables (saved before every run, which " +
    'costs that run the time to save them). `off`: nothing is kept. Undo needs a data directory on btrfs; ' +
    'elsewhere it is `off`.',
});
export type UndoMode = Static<typeof UndoModeSchema>;
