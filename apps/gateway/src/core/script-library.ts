import { LANGUAGES, SandgateError, type CreateScript, type Language, type Script } from '@sandgate/contracts';
import { scriptHash, type ScriptRecord } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';

/** Comment markers of each language's leading comment, which becomes a script's description when none is given. */
const LINE_COMMENT: Record<Language, RegExp> = {
  python: /^\s*#\s?(.*)$/,
  bash: /^\s*#\s?(.*)$/,
  javascript: /^\s*\/\/\s?(.*)$/,
  typescript: /^\s*\/\/\s?(.*)$/,
};

/** The leading comment of `code` (after a shebang), its lines joined: what a script says it does. */
export function leadingComment(language: Language, code: string): string {
  const lines = code.split('\n');
  if (lines[0]?.startsWith('#!')) lines.shift();
  const block = /^\s*(?:\/\*+([\s\S]*?)\*\/|"""([\s\S]*?)""")/.exec(lines.join('\n'));
  if (block && (language !== 'python' ? block[1] !== undefined : block[2] !== undefined)) {
    const text = (block[1] ?? block[2])!.split('\n').map((l) => l.replace(/^\s*\*?\s?/, '').trim());
    return text.filter(Boolean).join(' ').slice(0, 1000);
  }
  const said: string[] = [];
  for (const line of lines) {
    const m = LINE_COMMENT[language].exec(line);
    if (!m) break;
    said.push(m[1]!.trim());
  }
  return said.filter(Boolean).join(' ').slice(0, 1000);
}

export const presentScript = (s: ScriptRecord): Script => ({
  name: s.name,
  language: s.language,
  code: s.code,
  description: s.description,
  sha256: s.sha256,
  size_bytes: Buffer.byteLength(s.code),
  created_at: new Date(s.created_at).toISOString(),
});

/** Saving, finding and deleting a tenant's scripts, as the REST routes, the runs and MCP reach them. */
export class ScriptLibrary {
  readonly #d: GatewayDeps;
  constructor(d: GatewayDeps) {
    this.#d = d;
  }

  /**
   * Saves `language` + `code`, or the code of the tenant's completed run `execution_id`. The same content already
   * saved answers that script (`created: false`); a name already taken by other content is script_exists.
   */
  async save(tenant: string, body: CreateScript): Promise<{ script: ScriptRecord; created: boolean }> {
    const { language, code } = await this.#source(tenant, body);
    if (!(LANGUAGES as readonly string[]).includes(language)) {
      throw new SandgateError('unsupported_language', `language "${language}" is not one of: ${LANGUAGES.join(', ')}`);
    }
    const bytes = Buffer.byteLength(code);
    if (bytes > this.#d.config.maxCodeBytes) {
      throw new SandgateError(
        'payload_too_large',
        `code is ${bytes} bytes; the limit is ${this.#d.config.maxCodeBytes} bytes`,
      );
    }
    const record: ScriptRecord = {
      name: body.name,
      language,
      code,
      description: body.description ?? leadingComment(language, code),
      sha256: scriptHash(language, code),
      created_at: Date.now(),
    };
    const outcome = await this.#d.scripts.save(tenant, record, this.#d.config.maxScripts);
    switch (outcome.kind) {
      case 'created':
        return { script: outcome.script, created: true };
      case 'duplicate':
        return { script: outcome.script, created: false };
      case 'name_taken':
        throw new SandgateError(
          'script_exists',
          `a script named "${body.name}" exists with other code; delete it first or use another name`,
        );
      case 'full':
        // Only a delete makes room; Retry-After (every 429 has one) asks for a minute, the window of the other quotas.
        throw new SandgateError(
          'quota_exceeded',
          `the tenant has ${this.#d.config.maxScripts} scripts, its maximum (SANDGATE_MAX_SCRIPTS); delete one first`,
          { extra: { retry_after: 60 } },
        );
    }
  }

  /** The tenant's script `name`, or script_not_found. */
  async require(tenant: string, name: string): Promise<ScriptRecord> {
    const script = await this.#d.scripts.get(tenant, name);
    if (script === undefined)
      throw new SandgateError('script_not_found', `no script named "${name}"; GET /v1/scripts lists them`);
    return script;
  }

  async #source(tenant: string, body: CreateScript): Promise<{ language: Language; code: string }> {
    const bad = (detail: string) => new SandgateError('validation_failed', detail);
    if (body.execution_id !== undefined) {
      if (body.code !== undefined || body.language !== undefined)
        throw bad('give execution_id, or language and code, not both');
      const rec = await this.#d.executions.get(body.execution_id);
      if (!rec || rec.tenant !== tenant)
        throw new SandgateError('execution_not_found', `no execution ${body.execution_id}`);
      if (rec.state !== 'completed')
        throw bad(`execution ${rec.id} ended ${rec.state}; only a run that completed can be saved`);
      const kept = await this.#d.scripts.runCode(rec.id);
      if (!kept)
        throw bad(
          `the code of execution ${rec.id} is not kept: a run keeps it for an hour only when created with ` +
            '"keep_code": true; save it with language and code',
        );
      return kept;
    }
    if (body.code === undefined || body.language === undefined) throw bad('give language and code, or execution_id');
    return { language: body.language as Language, code: body.code };
  }
}
