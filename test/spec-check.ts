import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { OpenAPIBackend, type Document, type Operation } from 'openapi-backend';

/** One request and its response as the server saw them. */
export interface Exchange {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body, when the request had one. */
  body: unknown;
  status: number;
  contentType: string | undefined;
  /** The response body when it was text (JSON); undefined for streams and buffers. */
  payload: string | undefined;
}

const DOC = JSON.parse(readFileSync(new URL('../openapi/openapi.json', import.meta.url), 'utf8')) as Document;
/** Routes the document leaves out on purpose: the document itself, its UI, and MCP (a JSON-RPC protocol of its own). */
const UNDOCUMENTED = /^\/(openapi\.json|docs|mcp)(\/|\?|$)/;
const JSON_TYPES = new Set(['application/json', 'application/problem+json']);

/**
 * Checks live traffic against openapi/openapi.json, both ways: the response (status documented, media type
 * documented, JSON body valid against its schema) and the request (a request the document forbids must not succeed;
 * one it allows must not fail the server's own schema validation). openapi-backend matches operations and checks
 * requests; responses are checked with Ajv (JSON Schema 2020-12, as OpenAPI 3.1 uses), since openapi-backend only
 * knows `application/json` bodies and sandgate's errors are `application/problem+json`.
 */
export class SpecCheck {
  // quick: no check of the document itself (its OpenAPI 3.0 schema refuses 3.1; Redocly lints it), lazy validators.
  readonly #api = new OpenAPIBackend({
    definition: structuredClone(DOC),
    strict: true,
    quick: true,
    customizeAjv: (ajv) => addFormats.default(ajv),
  });
  readonly #ajv = addFormats.default(new Ajv2020({ strict: false, allErrors: true, formats: { binary: true } }));
  #ready: Promise<unknown> | null = null;

  constructor() {
    this.#ajv.addSchema(DOC as object, 'openapi');
  }

  /** The mismatches of one exchange, as sentences; none when it matches the document. */
  async check(x: Exchange): Promise<string[]> {
    if (UNDOCUMENTED.test(x.url) || x.method === 'OPTIONS' || x.method === 'HEAD') return [];
    this.#ready ??= this.#api.init();
    await this.#ready;
    const [path, search = ''] = x.url.split('?');
    const request = {
      method: x.method,
      path: path!,
      query: search,
      headers: x.headers as Record<string, string>,
      body: x.body,
    };
    const op = this.#api.router.matchOperation(request as Parameters<OpenAPIBackend['router']['matchOperation']>[0]);
    if (!op) return [];
    const at = `${x.method} ${path} → ${x.status}`;
    return [...this.#checkRequest(op, request, x, at), ...this.#checkResponse(op, x, at)];
  }

  #checkRequest(
    op: Operation,
    request: Parameters<OpenAPIBackend['validator']['validateRequest']>[0],
    x: Exchange,
    at: string,
  ): string[] {
    const json = /^application\/json/.test(String(x.headers['content-type'] ?? ''));
    const errors = (this.#api.validator.validateRequest(request, op).errors ?? [])
      // Multipart and raw bodies are read by the route as they stream in: only JSON bodies can be checked here.
      .filter((e: object) => json || !JSON.stringify(e).includes('requestBody'))
      // Unknown query parameters are ignored by the server and not forbidden by OpenAPI: not a mismatch.
      .filter(
        (e: { instancePath?: string; keyword?: string }) =>
          !(e.keyword === 'additionalProperties' && e.instancePath === '/query'),
      );
    if (errors.length > 0 && x.status < 400) {
      return [`${at}: the server accepted a request the document forbids: ${this.#ajv.errorsText(errors)}`];
    }
    const problem = this.#parse(x);
    if (errors.length === 0 && x.status === 400 && Array.isArray((problem as { errors?: unknown } | null)?.errors)) {
      return [`${at}: the document allows a request the server's schema refused: ${x.payload}`];
    }
    return [];
  }

  #checkResponse(op: Operation, x: Exchange, at: string): string[] {
    const responses = op.responses as Record<string, { content?: Record<string, { schema?: object }> }>;
    const status = [String(x.status), `${String(x.status)[0]}XX`, 'default'].find((k) => responses[k]);
    const documented = status === undefined ? undefined : responses[status];
    if (!documented) return [`${at}: status not documented (documented: ${Object.keys(responses).join(', ')})`];
    const media = x.contentType?.split(';')[0]!.trim().toLowerCase();
    const content = documented.content;
    // 204 and 304 carry no body on the wire, whatever Fastify hands to onSend.
    const bodiless = x.status === 204 || x.status === 304;
    if (!content)
      return media && x.payload && !bodiless ? [`${at}: a body of ${media} where the document has none`] : [];
    if (bodiless) return [`${at}: the document gives a body to a status that has none`];
    const key = media && (content[media] ? media : content['*/*'] ? '*/*' : undefined);
    if (!key) return [`${at}: ${media ?? 'no Content-Type'} is not among ${Object.keys(content).join(', ')}`];
    if (!JSON_TYPES.has(media!) || x.payload === undefined) return [];
    const validate = this.#ajv.compile({
      $ref: `openapi#/paths/${pointer(op.path)}/${op.method}/responses/${status}/content/${pointer(key)}/schema`,
    });
    if (validate(this.#parse(x))) return [];
    return [
      `${at}: body does not match the schema: ${this.#ajv.errorsText(validate.errors)} in ${x.payload.slice(0, 300)}`,
    ];
  }

  #parse(x: Exchange): unknown {
    try {
      return x.payload === undefined ? undefined : JSON.parse(x.payload);
    } catch {
      return undefined;
    }
  }
}

const pointer = (s: string) => s.replaceAll('~', '~0').replaceAll('/', '~1');
