import { Type, type Static, type TSchema } from '@sinclair/typebox';

export const SESSION_ID_PATTERN = '^sess_[0-9a-f]{12}$';
export const EXECUTION_ID_PATTERN = '^exec_[0-9a-f]{16}$';

export const SessionIdSchema = Type.String({ pattern: SESSION_ID_PATTERN, examples: ['sess_3f9a1c2b7d4e'] });
export const ExecutionIdSchema = Type.String({ pattern: EXECUTION_ID_PATTERN, examples: ['exec_3f9a1c2b7d4e5f60'] });
export const TimestampSchema = Type.String({ format: 'date-time' });

/** A `$ref` to a schema registered by `$id`, typed as that schema. */
export const ref = <T extends TSchema>(s: T) => Type.Unsafe<Static<T>>(Type.Ref(s.$id!));
