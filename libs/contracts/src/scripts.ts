import { Type, type Static } from '@sinclair/typebox';
import { ExecutionIdSchema } from './common.ts';
import { LanguageSchema } from './executions.ts';

/** A script's name: usable in a URL and as an MCP resource name. */
export const SCRIPT_NAME_PATTERN = '^[a-z][a-z0-9_-]{0,62}$';
export const ScriptNameSchema = Type.String({
  pattern: SCRIPT_NAME_PATTERN,
  description: 'Lowercase letters, digits, `-` and `_`, starting with a letter; at most 63 characters.',
  examples: ['cpa-report'],
});

export const CreateScriptSchema = Type.Object(
  {
    name: ScriptNameSchema,
    execution_id: Type.Optional(
      Type.Unsafe<string>({
        ...ExecutionIdSchema,
        description:
          'Save the code of this completed run (one created with `keep_code: true`, within an hour of its end), ' +
          'instead of `language` + `code`.',
      }),
    ),
    language: Type.Optional(LanguageSchema),
    code: Type.Optional(Type.String({ minLength: 1, description: 'At most SANDGATE_MAX_CODE_BYTES bytes (UTF-8).' })),
    description: Type.Optional(
      Type.String({ maxLength: 1000, description: "Default: the script's leading comment (its first lines)." }),
    ),
  },
  {
    $id: 'CreateScript',
    title: 'CreateScript',
    additionalProperties: false,
    examples: [
      {
        name: 'hello',
        language: 'python',
        code: '# Greets whoever is named.\nimport sys\nprint("hello", *sys.argv[1:])',
      },
    ],
  },
);
export type CreateScript = Static<typeof CreateScriptSchema>;

export const ScriptSchema = Type.Object(
  {
    name: ScriptNameSchema,
    language: LanguageSchema,
    code: Type.String(),
    description: Type.String(),
    sha256: Type.String({
      pattern: '^[0-9a-f]{64}$',
      description: 'Of the language and the code: what scripts are deduplicated by.',
    }),
    size_bytes: Type.Integer({ minimum: 1 }),
    created_at: Type.String({ format: 'date-time' }),
  },
  {
    $id: 'Script',
    title: 'Script',
    examples: [
      {
        name: 'hello',
        language: 'python',
        code: '# Greets whoever is named.\nimport sys\nprint("hello", *sys.argv[1:])',
        description: 'Greets whoever is named.',
        sha256: '5f1b7e0c3a1d4b2e9f8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f',
        size_bytes: 62,
        created_at: '2026-11-25T04:00:00.000Z',
      },
    ],
  },
);
export type Script = Static<typeof ScriptSchema>;

export const ScriptListSchema = Type.Object(
  {
    scripts: Type.Array(ScriptSchema, {
      description: "The tenant's scripts by name (at most SANDGATE_MAX_SCRIPTS, so one page holds them all).",
    }),
  },
  { $id: 'ScriptList', title: 'ScriptList' },
);
export type ScriptList = Static<typeof ScriptListSchema>;

export const ScriptParamsSchema = Type.Object({ name: ScriptNameSchema });
