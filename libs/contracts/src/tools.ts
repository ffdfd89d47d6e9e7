import { Type, type Static } from '@sinclair/typebox';

/** A tool the tenant's code may call (sandgate.tools), as the operator offers it (SANDGATE_TOOLS). */
export const ToolSchema = Type.Object(
  {
    name: Type.String({ description: 'As code calls it: `tools.weather.get(...)` is `weather.get`.' }),
    description: Type.Union([Type.String(), Type.Null()]),
    input_schema: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()], {
      description: 'The JSON Schema its arguments object is checked against; null: any object.',
    }),
  },
  { $id: 'Tool', title: 'Tool' },
);
export type Tool = Static<typeof ToolSchema>;

export const ToolListSchema = Type.Object(
  { tools: Type.Array(Type.Unsafe<Tool>(Type.Ref('Tool')), { description: 'By name.' }) },
  { $id: 'ToolList', title: 'ToolList' },
);

export const ToolCallResultSchema = Type.Object(
  {
    name: Type.String(),
    ok: Type.Boolean({ description: 'The tool answered (2xx); false: `error` says why not.' }),
    result: Type.Optional(Type.Unknown({ description: "The tool's answer: its JSON, or its text." })),
    error: Type.Optional(Type.String()),
    duration_ms: Type.Integer(),
  },
  { $id: 'ToolCallResult', title: 'ToolCallResult' },
);
export type ToolCallResult = Static<typeof ToolCallResultSchema>;

export const ToolParamsSchema = Type.Object({
  name: Type.String({ pattern: '^[a-z][a-z0-9_]{0,31}(\\.[a-z][a-z0-9_]{0,31}){0,3}$' }),
});
