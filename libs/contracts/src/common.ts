import { Type, type Static, type TSchema } from '@sinclair/typebox';

export const SESSION_ID_PATTERN = '^sess_[0-9a-f]{12}$';
export const EXECUTION_ID_PATTERN = '^exec_[0-9a-f]{16}$';
export const VOLUME_ID_PATTERN = '^vol_[0-9a-f]{12}$';
/**
 * The names a tenant gives what it keeps (volumes, snapshots): lowercase letters, digits, `_` and `-`, starting with a
 * letter or digit, at most 63. They become path segments on the host, so nothing else is ever accepted.
 */
export const NAME_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$';

export const SessionIdSchema = Type.String({ pattern: SESSION_ID_PATTERN, examples: ['sess_3f9a1c2b7d4e'] });
export const ExecutionIdSchema = Type.String({ pattern: EXECUTION_ID_PATTERN, examples: ['exec_3f9a1c2b7d4e5f60'] });
export const TimestampSchema = Type.String({ format: 'date-time' });
/** An environment variable's name, as runs, services and templates take them. */
export const EnvNameSchema = Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,127}$' });

/** A `$ref` to a schema registered by `$id`, typed as that schema. */
export const ref = <T extends TSchema>(s: T) => Type.Unsafe<Static<T>>(Type.Ref(s.$id!));

/** The query of every list endpoint: a page of `limit` items, from the `cursor` a previous page gave. */
export const PageQuerySchema = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50, description: 'Items per page.' })),
  cursor: Type.Optional(
    Type.String({
      maxLength: 1024,
      description: 'The next_cursor of the previous page; absent: the first page.',
    }),
  ),
});
export type PageQuery = Static<typeof PageQuerySchema>;

export const NextCursorSchema = Type.Union([Type.String(), Type.Null()], {
  description:
    'Pass as `cursor` for the next page; null on the last page. A page may hold fewer than `limit` items ' +
    'and still have a next one.',
});
