import { Type, type Static } from '@sinclair/typebox';
import { ref } from './common.ts';

/** What happened to a file of a session: the `event` of a file event (docs/file-events.md). */
export const FILE_CHANGES = ['created', 'modified', 'deleted'] as const;
export type FileChange = (typeof FILE_CHANGES)[number];

/** A file of the session that was created, modified or deleted (GET /v1/sessions/{id}/files/events). */
export const FileEventSchema = Type.Object(
  {
    path: Type.String({
      description: "Relative to the session's directory. A deleted directory is one event for its own path.",
    }),
    size_bytes: Type.Integer({ minimum: 0, description: 'Its size after the change; 0 once deleted.' }),
    modified_at: Type.String({
      format: 'date-time',
      description: 'Its modification time after the change; for a deletion, when it was seen deleted.',
    }),
  },
  { $id: 'FileEvent', title: 'FileEvent' },
);
export type FileEvent = Static<typeof FileEventSchema>;

/** Events were not delivered (`overflow`) or are no longer kept (`missed`): the client lists the files instead. */
export const FileEventsGapSchema = Type.Object(
  {
    code: Type.Union([Type.Literal('file_events_overflow'), Type.Literal('file_events_missed')]),
    detail: Type.String(),
    list_url: Type.String({ description: 'Where to list the files instead: GET /v1/sessions/{id}/files.' }),
  },
  { $id: 'FileEventsGap', title: 'FileEventsGap' },
);
export type FileEventsGap = Static<typeof FileEventsGapSchema>;

export const FileEventStreamEventSchema = Type.Union(
  [
    ...FILE_CHANGES.map((c) => Type.Object({ event: Type.Literal(c), id: Type.String(), data: ref(FileEventSchema) })),
    Type.Object({ event: Type.Literal('overflow'), id: Type.String(), data: ref(FileEventsGapSchema) }),
    Type.Object({ event: Type.Literal('missed'), data: ref(FileEventsGapSchema) }),
  ],
  {
    $id: 'FileEventStreamEvent',
    title: 'FileEventStreamEvent',
    description:
      "`created`, `modified` and `deleted` events of the session's files; `overflow` when more changed than is " +
      'reported, `missed` first when Last-Event-ID is older than the events kept.',
  },
);
export type FileEventStreamEvent = Static<typeof FileEventStreamEventSchema>;
