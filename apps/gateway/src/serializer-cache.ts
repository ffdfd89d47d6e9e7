import { SerializerSelector, type Serializer, type SerializerFactory } from '@fastify/fast-json-stringify-compiler';

/** Compiled response serializers, by external schemas, options and response schema. */
const compiled = new Map<string, Serializer>();
const objectIds = new WeakMap<object, number>();
let nextId = 0;

function idOf(schema: unknown): number {
  if (typeof schema !== 'object' || schema === null) return -1;
  let id = objectIds.get(schema);
  if (id === undefined) objectIds.set(schema, (id = nextId++));
  return id;
}

/**
 * Fastify's response serializer compiler (fast-json-stringify through @fastify/fast-json-stringify-compiler), compiling
 * each schema once. Fastify compiles a serializer per route and status code; the problem+json answers every route
 * shares, and the routes of each app built in one process (the tests build dozens), are the same schema against the
 * same shared schemas: compiling them again cost about 2 s of CPU per app, 80% of building it. A serializer is a
 * function of the schema (its JSON), the shared schemas (the same objects: `SHARED_SCHEMAS`) and the options, so the
 * key is exactly those.
 */
export function cachedSerializerFactory(): SerializerFactory {
  const factory = SerializerSelector();
  return (externalSchemas, options) => {
    const compile = factory(externalSchemas, options);
    const shared = Object.entries((externalSchemas ?? {}) as Record<string, unknown>)
      .map(([id, schema]) => `${id}#${idOf(schema)}`)
      .join(',');
    const prefix = `${shared}|${JSON.stringify(options ?? {})}|`;
    return (route) => {
      const key = prefix + JSON.stringify(route.schema);
      let serializer = compiled.get(key);
      if (!serializer) compiled.set(key, (serializer = compile(route)));
      return serializer;
    };
  };
}
