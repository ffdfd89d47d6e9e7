import type { TemplateImageSpec } from '@sandgate/contracts';
import { TEMPLATE_FORMAT, type TemplateBuildSettings } from './template-image.ts';

/**
 * npm, fetched by node from the registry in the build and checked against this hash: the runtime image has node but
 * not npm, and Debian's npm is hundreds of packages. 10.9 is the last npm that runs on bookworm's Node 18.
 */
export const NPM_VERSION = '10.9.9';
export const NPM_INTEGRITY =
  'sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg==';

/** Where the context's parts are: the wheels directory and the CA bundle are copied in from the worker's host. */
export const CONTEXT = { wheels: 'wheels', ca: 'ca.pem', files: 'files', npm: 'sandgate-npm.cjs' } as const;

/** A template's build context as made from its spec: the Dockerfile and the files it COPYs. */
export interface TemplateBuildContext {
  dockerfile: string;
  /** Files of the context made here, by their path in it. */
  files: { path: string; bytes: Buffer; mode: number }[];
  /** The build needs the wheels directory as `wheels/`, and the CA bundle as `ca.pem` (host paths in settings). */
  needsWheels: boolean;
  needsCa: boolean;
}

/** A word for bash, quoted so that nothing in it is expanded. */
const sh = (word: string): string => `'${word.replace(/'/g, `'\\''`)}'`;

/** Fetches npm's own tarball, checks its hash and unpacks it (run by node in the build; stdlib only). */
const NPM_FETCH = `'use strict';
// Written by sandgate: fetches npm from the registry, checks it is the npm sandgate pins, unpacks it.
const { createHash } = require('node:crypto');
const { writeFileSync } = require('node:fs');
const { execFileSync } = require('node:child_process');
const [registry, version, integrity, dest] = process.argv.slice(2);
(async () => {
  const url = registry.replace(/\\/+$/, '') + '/npm/-/npm-' + version + '.tgz';
  const res = await fetch(url);
  if (!res.ok) throw new Error('GET ' + url + ' answered ' + res.status);
  const bytes = Buffer.from(await res.arrayBuffer());
  const got = 'sha512-' + createHash('sha512').update(bytes).digest('base64');
  if (got !== integrity) throw new Error(url + ' is not the npm ' + version + ' sandgate pins (' + got + ')');
  writeFileSync(dest + '.tgz', bytes);
  execFileSync('mkdir', ['-p', dest]);
  execFileSync('tar', ['-xzf', dest + '.tgz', '-C', dest, '--strip-components=1']);
})().catch((err) => {
  console.error('cannot fetch npm: ' + String(err && err.cause ? err.cause : err));
  process.exit(1);
});
`;

/**
 * The Dockerfile of a template image, and its context. Multi-stage, for the classic builder as for BuildKit: Python and
 * npm packages are installed in stages of their own (pip, npm and the wheels never reach the image), then copied onto
 * the base with the Debian packages, the files and the setup command. RUN steps reach the package mirrors through the
 * engine's default bridge, as the runtime image's build does.
 */
export function templateDockerfile(
  spec: TemplateImageSpec,
  s: TemplateBuildSettings,
  hash: string,
): TemplateBuildContext {
  const files: TemplateBuildContext['files'] = [];
  const python = spec.python_packages.length > 0;
  const npm = spec.npm_packages.length > 0;
  const needsWheels = python && s.wheelsDir !== null;
  const needsCa = (python || npm) && s.caFile !== null;
  const CA = '/usr/local/share/sandgate-build/ca.pem';
  const lines = [
    `# A sandgate template image (recipe ${hash}, format ${TEMPLATE_FORMAT}), made from its recipe: do not edit.`,
    `# Build it from its context: docker build -t <image> .`,
  ];
  const stage = (name: string) => {
    lines.push('', `FROM ${spec.base} AS ${name}`, 'USER 0');
    if (needsCa) lines.push(`COPY ${CONTEXT.ca} ${CA}`);
  };
  if (python) {
    stage('python-packages');
    if (needsWheels) lines.push(`COPY ${CONTEXT.wheels}/ /tmp/sandgate-wheels/`);
    const source = [
      ...(s.pipIndexUrl === null ? ['--no-index'] : ['--index-url', s.pipIndexUrl]),
      ...(needsWheels ? ['--find-links', '/tmp/sandgate-wheels'] : []),
      ...(needsCa ? ['--cert', CA] : []),
    ];
    lines.push(
      '# pip runs from its wheel (python3-pip-whl, in the runtime image; installed here if the base lacks it).',
      'RUN set -eu; pip="$(ls /usr/share/python-wheels/pip-*.whl 2>/dev/null | head -n1 || true)"; \\',
      '    if [ -z "$pip" ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive \\',
      '      apt-get install -y -q --no-install-recommends python3-pip-whl; \\',
      '      pip="$(ls /usr/share/python-wheels/pip-*.whl | head -n1)"; fi; \\',
      '    python3 "$pip/pip" install --root /out --break-system-packages --no-warn-script-location \\',
      '      --disable-pip-version-check --no-cache-dir --progress-bar off --no-input \\',
      `      ${source.map(sh).join(' ')} \\`,
      `      -- ${spec.python_packages.map(sh).join(' ')}`,
    );
  }
  if (npm) {
    stage('npm-packages');
    files.push({ path: CONTEXT.npm, bytes: Buffer.from(NPM_FETCH), mode: 0o644 });
    const extra = needsCa ? `NODE_EXTRA_CA_CERTS=${CA} ` : '';
    lines.push(
      `COPY ${CONTEXT.npm} /tmp/${CONTEXT.npm}`,
      `RUN set -eu; ${extra}node /tmp/${CONTEXT.npm} ${[s.npmRegistry, NPM_VERSION, NPM_INTEGRITY].map(sh).join(' ')} \\`,
      '      /tmp/npm; \\',
      '    mkdir -p /out; \\',
      '    node /tmp/npm/bin/npm-cli.js install --prefix /out --no-audit --no-fund --no-package-lock --omit=dev \\',
      `      --cache /tmp/npm-cache --registry ${sh(s.npmRegistry)}${needsCa ? ` --cafile ${CA}` : ''} \\`,
      `      -- ${spec.npm_packages.map(sh).join(' ')}`,
    );
  }
  lines.push('', `FROM ${spec.base}`, 'USER 0');
  if (spec.debian_packages.length > 0) {
    lines.push(
      'RUN set -eu; apt-get update -q; \\',
      '    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \\',
      `      ${spec.debian_packages.map(sh).join(' ')}; \\`,
      '    apt-get clean; rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt/* /var/log/dpkg.log',
    );
  }
  if (python) lines.push('COPY --from=python-packages /out/ /');
  // In /node_modules: both require and import look there from /mnt/data (each climbs to the root).
  if (npm) lines.push('COPY --from=npm-packages /out/node_modules/ /node_modules/');
  if (spec.files.length > 0) {
    for (const f of spec.files) {
      files.push({
        path: `${CONTEXT.files}${f.path}`,
        bytes: Buffer.from(f.content_base64, 'base64'),
        mode: parseInt(f.mode, 8),
      });
    }
    lines.push(`COPY ${CONTEXT.files}/ /`);
  }
  if (spec.setup !== null) lines.push(`RUN ${JSON.stringify(['bash', '-euo', 'pipefail', '-c', spec.setup])}`);
  lines.push('USER 1000:1000', 'WORKDIR /mnt/data', '');
  return { dockerfile: lines.join('\n'), files, needsWheels, needsCa };
}
