import { test } from 'node:test';
import assert from 'node:assert/strict';
import { describeRequestDefaults } from './openapi-request-defaults.ts';

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: unknown) => ({ content: { 'application/json': { schema } } });
const document = () => ({
  openapi: '3.1.0',
  paths: {
    '/runs': {
      parameters: [{ name: 'trace', in: 'query', schema: { type: 'boolean', default: false } }],
      post: {
        parameters: [{ name: 'limit', in: 'query', schema: { type: 'integer', default: 50 } }],
        requestBody: json(ref('CreateRun')),
        responses: { 200: json(ref('Run')) },
      },
    },
    '/runs/{id}/stop': {
      post: {
        requestBody: json({
          type: 'object',
          properties: { grace_ms: { type: 'integer', default: 5000, description: 'Time to stop.' } },
        }),
        responses: { 204: { description: 'stopped' } },
      },
    },
  },
  components: {
    schemas: {
      // Used by requests only, through CreateRun.
      Options: {
        title: 'Options',
        type: 'object',
        properties: {
          // A property may be named `default`: it is a schema, not a default value.
          default: { type: 'string' },
          retries: { type: 'integer', default: 0 },
          tags: { type: 'array', items: { anyOf: [{ type: 'string', default: 'x' }, { type: 'null' }] } },
        },
      },
      // Used by requests and responses.
      Limits: { title: 'Limits', type: 'object', properties: { memory_mb: { type: 'integer', default: 256 } } },
      // Shared, without a default of its own, but it holds Limits.
      Spec: { title: 'Spec', type: 'object', properties: { limits: ref('Limits') } },
      // Shared, with no default anywhere: stays one component.
      Label: { title: 'Label', type: 'string' },
      CreateRun: {
        title: 'CreateRun',
        type: 'object',
        required: ['code'],
        properties: {
          code: { type: 'string' },
          mode: { anyOf: [{ const: 'run' }, { const: 'test' }], default: 'run', description: 'What to do.' },
          options: ref('Options'),
          spec: ref('Spec'),
          label: ref('Label'),
          env: { type: 'object', additionalProperties: { type: 'string', default: '' }, default: {} },
        },
      },
      Run: {
        title: 'Run',
        type: 'object',
        properties: { mode: { type: 'string', default: 'run' }, spec: ref('Spec'), label: ref('Label') },
      },
    },
  },
});

/** Where `default` keywords are (a `properties` map names properties: its keys are not keywords). */
const defaults = (node: unknown, at = '#'): string[] => {
  if (Array.isArray(node)) return node.flatMap((n, i) => defaults(n, `${at}/${i}`));
  if (typeof node !== 'object' || node === null) return [];
  const here = 'default' in node && !at.endsWith('/properties') ? [at] : [];
  return [...here, ...Object.entries(node).flatMap(([k, v]) => defaults(v, `${at}/${k}`))];
};

test('request bodies state their defaults in the description; nested, inline and $ref-ed schemas alike', () => {
  const out = describeRequestDefaults(document()) as any;
  const { CreateRun, Options } = out.components.schemas;
  assert.equal(CreateRun.properties.mode.description, 'What to do. Default: `run`.');
  assert.equal(CreateRun.properties.env.description, 'Default: `{}`.');
  assert.equal(CreateRun.properties.env.additionalProperties.description, 'Default: ``.');
  assert.equal(Options.properties.retries.description, 'Default: `0`.');
  assert.deepEqual(Options.properties.default, { type: 'string' }, 'a property named default is kept');
  assert.deepEqual(Options.properties.tags.items.anyOf[0], { type: 'string', description: 'Default: `x`.' });
  const stop = out.paths['/runs/{id}/stop'].post.requestBody.content['application/json'].schema;
  assert.deepEqual(stop.properties.grace_ms, { type: 'integer', description: 'Time to stop. Default: `5000`.' });
});

test('a component responses use too keeps its defaults there; requests get a copy named …Input', () => {
  const out = describeRequestDefaults(document());
  const s = out.components.schemas as Record<string, any>;
  assert.deepEqual(s.Run, document().components.schemas.Run, 'the response schema is unchanged');
  assert.deepEqual(s.Limits, document().components.schemas.Limits);
  assert.deepEqual(s.Spec, document().components.schemas.Spec);
  assert.deepEqual(s.LimitsInput, {
    title: 'LimitsInput',
    type: 'object',
    properties: { memory_mb: { type: 'integer', description: 'Default: `256`.' } },
  });
  assert.deepEqual(s.SpecInput.properties.limits, ref('LimitsInput'), 'the copy of Spec refers to the copy of Limits');
  assert.deepEqual(s.CreateRun.properties.spec, ref('SpecInput'));
  assert.deepEqual(s.CreateRun.properties.label, ref('Label'), 'nothing to change: one component');
  assert.equal(s.LabelInput, undefined);
  assert.equal(s.OptionsInput, undefined, 'requests only: changed in place');
  // What is left of `default`: responses and parameters only.
  assert.deepEqual(defaults(out), [
    '#/paths//runs/parameters/0/schema',
    '#/paths//runs/post/parameters/0/schema',
    '#/components/schemas/Limits/properties/memory_mb',
    '#/components/schemas/Run/properties/mode',
  ]);
});

test('the input document is not changed (Fastify validates with the same schema objects)', () => {
  const doc = document();
  describeRequestDefaults(doc);
  assert.deepEqual(doc, document());
});

test('a request copy that would overwrite a component is refused', () => {
  const doc = document() as any;
  doc.components.schemas.LimitsInput = { type: 'object' };
  assert.throws(() => describeRequestDefaults(doc), /component LimitsInput exists/);
});

test('recursive schemas terminate', () => {
  const doc = document() as any;
  doc.components.schemas.Options.properties.child = ref('Options');
  const out = describeRequestDefaults(doc);
  assert.deepEqual(out.components.schemas.Options.properties.child, ref('Options'));
});
