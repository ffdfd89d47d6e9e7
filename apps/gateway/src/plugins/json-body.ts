import type { FastifyInstance } from 'fastify';

/**
 * JSON bodies as Fastify parses them, except that an empty body is no body at all (`undefined`): clients that set
 * `Content-Type: application/json` once for every request (Postman collections made from the spec, fetch wrappers)
 * send it on DELETE and on bodiless POSTs too. A route that needs a body still says so through its schema.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function acceptEmptyJson(app: FastifyInstance<any, any, any, any, any>): void {
  const parse = app.getDefaultJsonParser('error', 'ignore');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (body === '') done(null, undefined);
    else parse(req, body as string, done);
  });
}
