import { Type, type Static } from '@sinclair/typebox';
import { EnvNameSchema, TimestampSchema, ref } from './common.ts';

/**
 * A template's name: usable as a Kubernetes label value and a Docker label, so it starts and ends with a letter or a
 * digit.
 */
export const TEMPLATE_NAME_PATTERN = '^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$';
export const TemplateNameSchema = Type.String({
  pattern: TEMPLATE_NAME_PATTERN,
  description:
    'Lowercase letters, digits, `-` and `_`, starting and ending with a letter or a digit; at most 63 characters.',
  examples: ['geo'],
});

/** The most packages of each kind one recipe names. */
export const MAX_TEMPLATE_PACKAGES = 200;
/** The most files one recipe adds. */
export const MAX_TEMPLATE_FILES = 50;

/**
 * A Debian package, optionally `=version`: what `apt-get install` takes, and nothing else (no option, no path).
 */
export const DEBIAN_PACKAGE_PATTERN = '^[a-z0-9][a-z0-9+.-]{0,99}(=[A-Za-z0-9.+~:-]{1,100})?$';
/**
 * A Python requirement: a project name with optional extras and version clauses (`pandas-stubs`, `shapely>=2,<3`,
 * `requests[socks]==2.32.3`). No URL, path or option: packages come from the operator's index or wheels directory.
 */
export const PYTHON_PACKAGE_PATTERN =
  '^[A-Za-z0-9]([A-Za-z0-9._-]{0,99})(\\[[A-Za-z0-9._,-]{1,100}\\])?((===?|!=|~=|<=?|>=?)[A-Za-z0-9.*+!_-]{1,50}' +
  '(,(===?|!=|~=|<=?|>=?)[A-Za-z0-9.*+!_-]{1,50}){0,4})?$';
/** An npm package with an optional version or range (`lodash`, `@turf/turf@7`, `zod@^3.23`). No URL, path or tag. */
export const NPM_PACKAGE_PATTERN =
  '^(@[a-z0-9][a-z0-9._~-]{0,99}/)?[a-z0-9][a-z0-9._~-]{0,99}(@[A-Za-z0-9.^~<>=*|+ -]{1,50})?$';

export const TemplateFileSchema = Type.Object(
  {
    path: Type.String({
      pattern: '^/[^\\0]{1,1023}$',
      description:
        'Where the file goes in the image: an absolute path, outside /mnt, /tmp, /proc, /sys, /dev and /run ' +
        '(no `..`).',
      examples: ['/etc/geo/regions.json'],
    }),
    content: Type.Optional(Type.String({ description: 'The text of the file (UTF-8); or content_base64.' })),
    content_base64: Type.Optional(Type.String({ description: 'The bytes of the file, base64-encoded.' })),
    mode: Type.Optional(
      Type.String({ pattern: '^0?[0-7]{3}$', default: '0644', description: 'Its permission bits, in octal.' }),
    ),
  },
  { additionalProperties: false },
);
export type TemplateFile = Static<typeof TemplateFileSchema>;

export const TemplateLimitsSchema = Type.Object(
  {
    memory_mb: Type.Optional(Type.Integer({ minimum: 16, description: 'Within SANDGATE_MEMORY_LIMIT.' })),
    cpus: Type.Optional(Type.Number({ exclusiveMinimum: 0, description: 'Within SANDGATE_CPU_LIMIT.' })),
    timeout_ms: Type.Optional(Type.Integer({ minimum: 100, description: 'Within SANDGATE_EXEC_TIMEOUT_S.' })),
  },
  {
    additionalProperties: false,
    description: "Its sessions' and runs' limits unless a request gives its own (within the deployment's maximum).",
  },
);
export type TemplateLimits = Static<typeof TemplateLimitsSchema>;

const packages = (pattern: string, description: string, example: string[]) =>
  Type.Optional(
    Type.Array(Type.String({ pattern }), { maxItems: MAX_TEMPLATE_PACKAGES, description, examples: [example] }),
  );

/** What a template is made of: the recipe an operator writes, in the templates file or to POST /v1/templates. */
export const TemplateRecipeSchema = Type.Object(
  {
    name: TemplateNameSchema,
    description: Type.Optional(Type.String({ maxLength: 1000 })),
    image: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 512,
        pattern: '^[A-Za-z0-9][A-Za-z0-9._/:@-]*$',
        description:
          'An image to run as is, instead of building one from the recipe: the Kubernetes backend needs it (an ' +
          "image in the operator's registry, built from the recipe: docs/kubernetes.md); on Docker it skips the " +
          'build. The packages, files and setup then only say what the image holds.',
      }),
    ),
    debian_packages: packages(DEBIAN_PACKAGE_PATTERN, "From Debian's mirror (apt-get install).", ['libgeos-c1v5']),
    python_packages: packages(
      PYTHON_PACKAGE_PATTERN,
      "From the operator's package index (SANDGATE_TEMPLATE_PIP_INDEX_URL) or wheels directory " +
        '(SANDGATE_TEMPLATE_WHEELS_DIR), installed with pip.',
      ['shapely>=2', 'pyproj'],
    ),
    npm_packages: packages(
      NPM_PACKAGE_PATTERN,
      'From the npm registry (SANDGATE_TEMPLATE_NPM_REGISTRY), installed in /node_modules: `require` and `import` ' +
        'find them from /mnt/data.',
      ['@turf/turf@7'],
    ),
    files: Type.Optional(
      Type.Array(TemplateFileSchema, {
        maxItems: MAX_TEMPLATE_FILES,
        description: 'Files put in the image, owned by root (SANDGATE_TEMPLATE_MAX_FILE_BYTES in all).',
      }),
    ),
    env: Type.Optional(
      Type.Record(EnvNameSchema, Type.String({ maxLength: 4096 }), {
        maxProperties: 64,
        description: "Environment variables of its sandboxes' programs; a run's own env wins over them.",
      }),
    ),
    setup: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 16_384,
        description: 'A bash command run as root last in the build, with network (e.g. to fetch a model).',
      }),
    ),
    limits: Type.Optional(TemplateLimitsSchema),
    pool_size: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 16,
        default: 0,
        description: 'Warm sandboxes of this template each worker keeps ready for one-shots.',
      }),
    ),
  },
  {
    $id: 'TemplateRecipe',
    title: 'TemplateRecipe',
    additionalProperties: false,
    examples: [
      {
        name: 'geo',
        description: 'Shapely and pyproj for the geo team',
        python_packages: ['shapely>=2', 'pyproj'],
        env: { PROJ_NETWORK: 'OFF' },
        limits: { memory_mb: 1024 },
        pool_size: 1,
      },
    ],
  },
);
export type TemplateRecipe = Static<typeof TemplateRecipeSchema>;

export const TEMPLATE_STATES = ['building', 'ready', 'failed'] as const;
export type TemplateState = (typeof TEMPLATE_STATES)[number];

export const TemplateBuildSchema = Type.Object(
  {
    id: Type.String({ description: 'The build (bld_…): templates of one recipe share it.' }),
    state: Type.Union(
      TEMPLATE_STATES.map((s) => Type.Literal(s)),
      { description: '`building` from the request until a worker has built the image (or failed to).' },
    ),
    started_at: Type.Union([TimestampSchema, Type.Null()], { description: 'When a worker took it.' }),
    finished_at: Type.Union([TimestampSchema, Type.Null()]),
    error: Type.Union([Type.String(), Type.Null()], { description: 'Why it failed.' }),
    log_tail: Type.Optional(
      Type.String({ description: 'A failed build: the end of its log (the whole log is in the events).' }),
    ),
  },
  { $id: 'TemplateBuild', title: 'TemplateBuild' },
);
export type TemplateBuild = Static<typeof TemplateBuildSchema>;

export const TemplateFileEntrySchema = Type.Object({
  path: Type.String(),
  mode: Type.String(),
  size_bytes: Type.Integer(),
});

export const TemplateSchema = Type.Object(
  {
    name: TemplateNameSchema,
    description: Type.String(),
    state: Type.Union(
      TEMPLATE_STATES.map((s) => Type.Literal(s)),
      {
        description:
          '`ready`: sessions and runs may use it. `building`: its image is being built. `failed`: the build failed ' +
          '(build.error, and the log); a template that was ready keeps its image while a new recipe builds.',
      },
    ),
    source: Type.Union([Type.Literal('file'), Type.Literal('api')], {
      description:
        '`file`: declared in SANDGATE_TEMPLATES (the file owns it: the API cannot change or delete it); `api`: ' +
        'made with POST /v1/templates.',
    }),
    image: Type.Union([Type.String(), Type.Null()], {
      description: 'The image its sandboxes run; null until a build has made it.',
    }),
    recipe_sha256: Type.String({
      pattern: '^[0-9a-f]{64}$',
      description: 'Of what goes into the image: an unchanged recipe is not built again.',
    }),
    debian_packages: Type.Array(Type.String()),
    python_packages: Type.Array(Type.String()),
    npm_packages: Type.Array(Type.String()),
    files: Type.Array(TemplateFileEntrySchema, { description: 'The files it adds (their content is not repeated).' }),
    env: Type.Record(Type.String(), Type.String()),
    setup: Type.Union([Type.String(), Type.Null()]),
    limits: TemplateLimitsSchema,
    pool_size: Type.Integer(),
    build: Type.Union([ref(TemplateBuildSchema), Type.Null()], {
      description: 'The latest build; null for a template that names its image.',
    }),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
    links: Type.Object({ self: Type.String(), build_events: Type.String() }),
  },
  { $id: 'Template', title: 'Template' },
);
export type Template = Static<typeof TemplateSchema>;

export const TemplateListSchema = Type.Object(
  {
    templates: Type.Array(ref(TemplateSchema), {
      description:
        'By name: for a tenant, those it may use (SANDGATE_TENANT_TEMPLATES); for an operator, all. There are at ' +
        'most SANDGATE_MAX_TEMPLATES, so one page holds them all.',
    }),
  },
  { $id: 'TemplateList', title: 'TemplateList' },
);
export type TemplateList = Static<typeof TemplateListSchema>;

export const TemplateParamsSchema = Type.Object({ name: TemplateNameSchema });

/** A line (or lines) of a template build's log, in order. */
export const TemplateLogEventSchema = Type.Object(
  { text: Type.String() },
  { $id: 'TemplateLogEvent', title: 'TemplateLogEvent' },
);

/** The last event of a build's stream. */
export const TemplateBuildResultEventSchema = Type.Object(
  {
    state: Type.Union([Type.Literal('ready'), Type.Literal('failed')]),
    image: Type.Union([Type.String(), Type.Null()]),
    error: Type.Union([Type.String(), Type.Null()]),
    duration_ms: Type.Integer(),
    cached: Type.Boolean({ description: 'The image was there already: nothing was built.' }),
  },
  { $id: 'TemplateBuildResultEvent', title: 'TemplateBuildResultEvent' },
);
export type TemplateBuildResultEvent = Static<typeof TemplateBuildResultEventSchema>;

/** GET /v1/templates/{name}/build/events as an SSE parser hands each event over. */
export const TemplateBuildStreamEventSchema = Type.Union(
  [
    Type.Object({ event: Type.Literal('log'), id: Type.String(), data: ref(TemplateLogEventSchema) }),
    Type.Object({ event: Type.Literal('result'), id: Type.String(), data: ref(TemplateBuildResultEventSchema) }),
  ],
  {
    $id: 'TemplateBuildStreamEvent',
    title: 'TemplateBuildStreamEvent',
    description: 'The build log as `log` events, then one `result`.',
  },
);

/**
 * What a template build job builds: the parts of a recipe that go into the image, and the image it goes on. The
 * worker makes a Dockerfile of it (libs/backends template-dockerfile.ts).
 */
export interface TemplateImageSpec {
  /** The image the template builds on: the deployment's runtime image. */
  base: string;
  debian_packages: string[];
  python_packages: string[];
  npm_packages: string[];
  files: { path: string; mode: string; content_base64: string }[];
  setup: string | null;
}
