/**
 * Request bodies in the document state their defaults in words instead of JSON Schema's `default`.
 *
 * The server fills a missing field with its default (Ajv `useDefaults`), so the field is optional to a client. Many
 * generators read `default` as "always present" (openapi-typescript's `defaultNonNullable`, on by default in v7) and
 * make the field required, which is right for a response and wrong for a request. A component schema cannot tell
 * the two apart, so the emitted document moves each `default` reachable from a request body into the description
 * ("Default: `run`."). Responses and parameters keep `default`, and what Fastify validates is not touched: this runs
 * on the finished document (@fastify/swagger's `transformObject`) and never changes its input.
 */

type Schema = Record<string, unknown>;
type Doc = {
  paths?: Record<string, Record<string, unknown>>;
  components?: { schemas?: Record<string, Schema> } & Record<string, unknown>;
} & Record<string, unknown>;
type Operation = { requestBody?: { content?: Record<string, { schema?: unknown }> } };

const REF = '#/components/schemas/';
/**
 * The name of a component's copy for request bodies, when responses use the component too (and keep its `default`s):
 * `Limits` → `LimitsInput`.
 */
export const requestCopyName = (name: string) => `${name}Input`;

// JSON Schema keywords whose value is a subschema, a list of them, or a map of them (values of `default`, `enum`,
// `examples` … are data and are not walked).
const ONE = ['additionalProperties', 'items', 'contains', 'not', 'if', 'then', 'else', 'propertyNames'];
const ONE_MORE = ['unevaluatedProperties', 'unevaluatedItems', 'additionalItems', 'contentSchema'];
const LIST = ['anyOf', 'oneOf', 'allOf', 'prefixItems', 'items'];
const MAP = ['properties', 'patternProperties', 'dependentSchemas', '$defs', 'definitions'];
const isObject = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Copies a schema with `visit` applied to it and to every subschema, bottom up. */
function mapSchema(schema: unknown, visit: (s: Schema) => Schema): unknown {
  if (!isObject(schema)) return schema;
  const out: Schema = { ...schema };
  for (const k of [...ONE, ...ONE_MORE]) if (isObject(out[k])) out[k] = mapSchema(out[k], visit);
  for (const k of LIST) if (Array.isArray(out[k])) out[k] = (out[k] as unknown[]).map((s) => mapSchema(s, visit));
  for (const k of MAP) {
    if (isObject(out[k])) {
      out[k] = Object.fromEntries(Object.entries(out[k] as Schema).map(([n, s]) => [n, mapSchema(s, visit)]));
    }
  }
  return visit(out);
}

/** Whether a schema has a `default` anywhere, and the components it references directly. */
function inspect(schema: unknown): { hasDefault: boolean; refs: Set<string> } {
  const found = { hasDefault: false, refs: new Set<string>() };
  mapSchema(schema, (s) => {
    if ('default' in s) found.hasDefault = true;
    if (typeof s.$ref === 'string' && s.$ref.startsWith(REF)) found.refs.add(s.$ref.slice(REF.length));
    return s;
  });
  return found;
}

/** Component names referenced anywhere under `node` (any `$ref` string), and by those, transitively. */
function reachable(node: unknown, schemas: Record<string, Schema>): Set<string> {
  const seen = new Set<string>();
  const walk = (n: unknown): void => {
    if (Array.isArray(n)) return n.forEach(walk);
    if (!isObject(n)) return;
    if (typeof n.$ref === 'string' && n.$ref.startsWith(REF)) {
      const name = n.$ref.slice(REF.length);
      if (!seen.has(name)) {
        seen.add(name);
        walk(schemas[name]);
      }
    }
    for (const [k, v] of Object.entries(n)) if (k !== '$ref') walk(v);
  };
  walk(node);
  return seen;
}

const shown = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value));

/** The schema without its own `default`, which its description states instead. */
function describeDefault(s: Schema): Schema {
  if (!('default' in s)) return s;
  const { default: value, ...rest } = s;
  const said = `Default: \`${shown(value)}\`.`;
  return { ...rest, description: typeof rest.description === 'string' ? `${rest.description} ${said}` : said };
}

/** The document with request-body schemas that state their defaults in their descriptions (see the file comment). */
export function describeRequestDefaults<T>(document: T): T {
  const doc = document as Doc;
  const schemas = doc.components?.schemas ?? {};
  const operations = Object.values(doc.paths ?? {}).flatMap((item) =>
    Object.values(item).filter((op): op is Operation => isObject(op) && 'responses' in op),
  );
  const bodies = operations.map((op) => op.requestBody);
  // What requests reach, and what everything else reaches: responses, parameters, headers, webhooks, components.
  const inRequests = reachable(bodies, schemas);
  const { components, paths, ...rest } = doc;
  const { schemas: _, ...otherComponents } = components ?? {};
  const noBodies = Object.values(paths ?? {}).map((item) =>
    Object.values(item).map((op) => (isObject(op) ? { ...op, requestBody: undefined } : op)),
  );
  const elsewhere = reachable([noBodies, otherComponents, rest], schemas);

  // A component changes for requests when it, or a component it references, has a default.
  const memo = new Map<string, boolean>();
  const changes = (name: string): boolean => {
    if (memo.has(name)) return memo.get(name)!;
    memo.set(name, false); // a cycle adds nothing
    const { hasDefault, refs } = inspect(schemas[name]);
    const result = hasDefault || [...refs].some(changes);
    memo.set(name, result);
    return result;
  };
  const requestName = (name: string) => (changes(name) && elsewhere.has(name) ? requestCopyName(name) : name);
  const forRequests = (schema: unknown) =>
    mapSchema(schema, (s) => {
      const ref = typeof s.$ref === 'string' && s.$ref.startsWith(REF) ? s.$ref.slice(REF.length) : undefined;
      return describeDefault(ref === undefined ? s : { ...s, $ref: REF + requestName(ref) });
    });

  const outSchemas: Record<string, Schema> = {};
  for (const [name, schema] of Object.entries(schemas)) {
    const affected = inRequests.has(name) && changes(name);
    outSchemas[name] = affected && !elsewhere.has(name) ? (forRequests(schema) as Schema) : schema;
    if (!affected || !elsewhere.has(name)) continue;
    const copy = requestCopyName(name);
    if (copy in schemas) throw new Error(`OpenAPI: component ${copy} exists; the request copy of ${name} needs it`);
    const { $id: _id, ...body } = forRequests(schema) as Schema;
    outSchemas[copy] = body.title === name ? { ...body, title: copy } : body;
  }

  const outPaths = Object.fromEntries(
    Object.entries(paths ?? {}).map(([path, item]) => [
      path,
      Object.fromEntries(
        Object.entries(item).map(([method, op]) => {
          const body = isObject(op) ? (op as Operation).requestBody : undefined;
          if (!body?.content) return [method, op];
          const content = Object.fromEntries(
            Object.entries(body.content).map(([type, media]) => [
              type,
              'schema' in media ? { ...media, schema: forRequests(media.schema) } : media,
            ]),
          );
          return [method, { ...(op as object), requestBody: { ...body, content } }];
        }),
      ),
    ]),
  );
  return {
    ...doc,
    ...(paths ? { paths: outPaths } : {}),
    ...(components ? { components: { ...components, schemas: outSchemas } } : {}),
  } as T;
}
