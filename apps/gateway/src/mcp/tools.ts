import { Readable } from 'node:stream';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import type { TObject } from '@sinclair/typebox';
import { ErrorCode, McpError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import {
  LANGUAGES,
  MCP_TOOLS,
  type CallToolInput,
  SandgateError,
  type CreateSessionInput,
  type ForkSessionInput,
  type McpSession,
  type McpToolError,
  type McpToolName,
  type PauseSessionInput,
  type ReadArtifactInput,
  type RestoreSnapshotInput,
  type RevokePreviewsInput,
  type RunCodeInput,
  type RunTestsInput,
  type ServiceInput,
  type ServiceLogsInput,
  type SessionInput,
  type Snapshot,
  type SnapshotInput,
  type StartServiceInput,
  type UploadFileInput,
} from '@sandgate/contracts';
import { walkTree } from '@sandgate/storage';
import type { ScriptRecord, SessionRecord } from '@sandgate/state';
import type { GatewayDeps } from '../deps.ts';
import { MAX_INLINE_BYTES } from '../core/execution-control.ts';
import type { SessionFiles } from '../core/session-files.ts';
import type { ServiceManager } from '../core/service-manager.ts';
import type { SessionControl } from '../core/session-control.ts';
import type { SessionLifecycle } from '../core/session-lifecycle.ts';
import type { TenantTools } from '../core/tenant-tools.ts';
import { isImage, readSmallFile } from './artifact-bytes.ts';
import { checkSessionId, mcpArtifact, sandboxPath, sessionPath } from './paths.ts';
import type { RunTool } from './run-tool.ts';
import type { ToolCall } from './tool-call.ts';
import { ToolFailure, errorObject, toolError, toolResult, type ToolOutput } from './tool-result.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Handler = (call: ToolCall, args: any) => Promise<ToolOutput>;

const BASE64 = /^(?:[A-Za-z0-9+/]*|[A-Za-z0-9_-]*)={0,2}$/;

/** The tools as tools/list shows them: their contract, as plain JSON Schemas. */
export const TOOL_LIST: Tool[] = MCP_TOOLS.map(
  ({ name, title, description, inputSchema, outputSchema, annotations }) =>
    JSON.parse(JSON.stringify({ name, title, description, inputSchema, outputSchema, annotations })) as Tool,
);

/** The MCP tools over the gateway's own services: argument checks, the contract's error objects, the handlers. */
export class McpTools {
  readonly #files: SessionFiles;
  readonly #sessions: SessionControl;
  readonly #services: ServiceManager;
  readonly #lifecycle: SessionLifecycle;
  /** The operator's tools (SANDGATE_TOOLS). */
  readonly tools: TenantTools;
  readonly #checks = new Map<string, TypeCheck<TObject>>(
    MCP_TOOLS.map((t) => [t.name, TypeCompiler.Compile(t.inputSchema)]),
  );
  readonly #handlers: Record<McpToolName, Handler>;

  /** The tenant's saved scripts (POST /v1/scripts), which the MCP server lists as resources. */
  scripts(tenant: string): Promise<ScriptRecord[]> {
    return this.#d.scripts.list(tenant);
  }

  script(tenant: string, name: string): Promise<ScriptRecord | undefined> {
    return this.#d.scripts.get(tenant, name);
  }

  readonly #d: GatewayDeps;
  constructor(d: GatewayDeps, runs: RunTool) {
    this.#d = d;
    this.#files = d.sessionFiles;
    this.#sessions = d.sessionControl;
    this.#services = d.serviceManager;
    this.#lifecycle = d.sessionLifecycle;
    this.tools = d.tenantTools;
    this.#handlers = {
      upload_file: (call, a: UploadFileInput) => this.#upload(call, a),
      run_python: async (call, a: RunCodeInput) => {
        await call.quota('runs');
        return this.#inSession(call.tenant, a.session_id, (id) => runs.run(call, id, 'python', a.code));
      },
      run_code: async (call, a: RunCodeInput) => {
        await call.quota('runs');
        return this.#inSession(call.tenant, a.session_id, (id) => runs.run(call, id, a.language, a.code));
      },
      run_tests: async (call, a: RunTestsInput) => {
        await call.quota('runs');
        return this.#inSession(call.tenant, a.session_id, (id) => runs.run(call, id, a.language, a.code, a.tests));
      },
      read_artifact: (call, a: ReadArtifactInput) => this.#read(call, a),
      list_artifacts: (call, a: SessionInput) => this.#list(call, a),
      close_session: async (call, a: SessionInput) => {
        await this.#sessions.close(call.tenant, checkSessionId(a.session_id));
        return { result: { session_id: a.session_id, status: 'closed' } };
      },
      create_session: async (call, a: CreateSessionInput) => {
        const s = await this.#sessions.open(call.tenant, {
          mode: a.mode ?? 'process',
          volumes: a.volumes,
          template: a.template,
          idlePauseSeconds: a.idle_pause_seconds,
          undo: a.undo,
        });
        return {
          result: {
            session_id: s.id,
            mode: s.mode,
            expires_at: new Date(s.expiresAt).toISOString(),
            volumes: s.volumes.map((v) => ({ name: v.name, path: v.path, read_only: v.read_only })),
            template: s.template?.name ?? null,
            undo: s.undo,
          },
        };
      },
      pause_session: async (call, a: PauseSessionInput) => {
        const id = checkSessionId(a.session_id);
        const { session, variables } = await this.#lifecycle.pause(call.tenant, id, a.discard_variables ?? false);
        return { result: { ...this.#summary(session), variables } };
      },
      resume_session: async (call, a: SessionInput) => {
        const { session, resumed } = await this.#lifecycle.resume(call.tenant, checkSessionId(a.session_id));
        return { result: { ...this.#summary(session), resumed } };
      },
      fork_session: async (call, a: ForkSessionInput) => {
        const id = checkSessionId(a.session_id);
        const copies = await this.#lifecycle.fork(call.tenant, id, a.count ?? 1, a.metadata);
        const sessions = copies.map((c) => ({ ...this.#summary(c), metadata: c.metadata }));
        return { result: { session_id: id, sessions } };
      },
      snapshot_session: async (call, a: SnapshotInput) => {
        const id = checkSessionId(a.session_id);
        return { result: { session_id: id, ...snapshotOf(await this.#lifecycle.snapshot(call.tenant, id, a.name)) } };
      },
      list_snapshots: async (call, a: SessionInput) => {
        const id = checkSessionId(a.session_id);
        const snapshots = await this.#lifecycle.snapshots(call.tenant, id);
        return { result: { session_id: id, snapshots: snapshots.map(snapshotOf) } };
      },
      restore_snapshot: async (call, a: RestoreSnapshotInput) => {
        const id = checkSessionId(a.session_id);
        const s = await this.#lifecycle.restore(call.tenant, id, a.name, a.into_new ?? false);
        return { result: { ...this.#summary(s), snapshot: a.name, from_session_id: id } };
      },
      delete_snapshot: async (call, a: SnapshotInput) => {
        const id = checkSessionId(a.session_id);
        await this.#lifecycle.deleteSnapshot(call.tenant, id, a.name);
        return { result: { session_id: id, name: a.name, status: 'deleted' } };
      },
      undo_run: async (call, a: SessionInput) => {
        const { session, undone_execution_id, variables, remaining } = await this.#lifecycle.undo(
          call.tenant,
          checkSessionId(a.session_id),
        );
        return { result: { ...this.#summary(session), undone_run_id: undone_execution_id, variables, remaining } };
      },
      list_templates: async (call) => ({
        result: {
          templates: (await this.#d.templateControl.list({ tenant: call.tenant })).map((t) => ({
            name: t.name,
            description: t.recipe.description ?? '',
            state: t.state,
            debian_packages: t.recipe.debian_packages ?? [],
            python_packages: t.recipe.python_packages ?? [],
            npm_packages: t.recipe.npm_packages ?? [],
          })),
        },
      }),
      list_volumes: async (call) => ({ result: { volumes: await this.#d.volumeControl.list(call.tenant) } }),
      start_service: async (call, a: StartServiceInput) => {
        const id = checkSessionId(a.session_id);
        const service = await this.#services.start(call.tenant, id, {
          name: a.name,
          command: a.command,
          ...(a.port === undefined ? {} : { port: a.port }),
        });
        const preview =
          service.state === 'running'
            ? { preview_url: (await this.#services.share(call.tenant, id, a.name, 3600)).url }
            : {};
        return { result: { session_id: id, service, ...preview } };
      },
      session_metrics: async (call, a: SessionInput) => ({
        result: await this.#d.sessionMetrics.read(call.tenant, checkSessionId(a.session_id)),
      }),
      list_services: async (call, a: SessionInput) => {
        const id = checkSessionId(a.session_id);
        return { result: { session_id: id, services: await this.#services.list(call.tenant, id) } };
      },
      service_logs: async (call, a: ServiceLogsInput) => {
        const id = checkSessionId(a.session_id);
        const logs = await this.#services.logs(call.tenant, id, a.name, a.offset ?? 0);
        const { output, offset, next_offset } = logs;
        return { result: { session_id: id, name: a.name, output, offset, next_offset, state: logs.service.state } };
      },
      revoke_previews: async (call, a: RevokePreviewsInput) => {
        const id = checkSessionId(a.session_id);
        await this.#services.revokePreviews(call.tenant, id, a.name);
        return { result: { session_id: id, name: a.name, status: 'revoked' } };
      },
      list_tools: async (call) => {
        const failed = (server: string, err: unknown) =>
          call.log.warn({ server, err: (err as Error).message }, 'could not list the tools of an MCP server');
        return { result: { tools: await this.tools.list(call.tenant, failed) } };
      },
      call_tool: async (call, a: CallToolInput) => {
        await call.quota('runs');
        return { result: await this.tools.call(call.tenant, a.name, a.arguments ?? {}) };
      },
      stop_service: async (call, a: ServiceInput) => {
        const id = checkSessionId(a.session_id);
        return {
          result: { session_id: id, service: await this.#services.stop(call.tenant, id, a.name, a.grace_ms ?? 5000) },
        };
      },
    };
  }

  /** Runs a tool. Whatever goes wrong is the tool's error object (isError); an unknown tool is a protocol error. */
  async call(name: string, args: Record<string, unknown>, call: ToolCall): Promise<CallToolResult> {
    const check = this.#checks.get(name);
    if (!check) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
    const sessionId = typeof args.session_id === 'string' ? args.session_id : undefined;
    const invalid = argumentProblem(check, args);
    if (invalid) return toolError({ ...invalid, ...(sessionId ? { session_id: sessionId } : {}) });
    try {
      return toolResult(await this.#handlers[name as McpToolName](call, args));
    } catch (err) {
      const path = name === 'upload_file' ? String(args.filename) : displayPath(String(args.path));
      const e = errorObject(err, { sessionId, path, maxSessions: this.#d.config.maxSessions });
      if (e.error === 'internal') call.log.error({ err, tool: name }, 'MCP tool failed');
      return toolError(e);
    }
  }

  /** A session as the lifecycle tools answer it. */
  #summary(s: SessionRecord): McpSession {
    const p = this.#sessions.present(s);
    const { mode, state, paused_at, expires_at, forked_from, template } = p;
    return { session_id: p.id, mode, state, paused_at, expires_at, forked_from, template };
  }

  /** Works in the given session, or in a new process session that is closed again if the work fails. */
  async #inSession(
    tenant: string,
    sessionId: string | undefined,
    work: (id: string) => Promise<ToolOutput>,
  ): Promise<ToolOutput> {
    if (sessionId !== undefined) return work(checkSessionId(sessionId));
    const s = await this.#sessions.open(tenant, { mode: 'process' });
    try {
      return await work(s.id);
    } catch (err) {
      await this.#sessions.close(tenant, s.id).catch(() => {});
      throw err;
    }
  }

  async #upload(call: ToolCall, a: UploadFileInput): Promise<ToolOutput> {
    await call.quota('uploads');
    const path = sessionPath(a.filename);
    const encoded = a.content_base64.replace(/\s+/g, '');
    if (!BASE64.test(encoded) || encoded.length % 4 === 1) {
      throw new SandgateError('validation_failed', 'content_base64 is not valid base64');
    }
    const bytes = Buffer.from(encoded, 'base64');
    // The whole file is in memory here (it came in a JSON body), so it gets the bound of inline files.
    const limit = Math.min(this.#d.config.maxUploadBytes, MAX_INLINE_BYTES);
    if (bytes.length > limit) {
      throw new SandgateError(
        'payload_too_large',
        `the file is ${bytes.length} bytes; the limit over MCP is ${limit} ` +
          'bytes (PUT /v1/sessions/{id}/files/{path} takes larger files)',
      );
    }
    return this.#inSession(call.tenant, a.session_id, async (id) => {
      const dir = await this.#files.sessionDir(call.tenant, id);
      if (a.private) await this.#sessions.makePrivate(call.tenant, id);
      await this.#files.store(call.tenant, id, dir, path, Readable.from([bytes]), a.overwrite ?? false);
      return { result: { session_id: id, path: sandboxPath(path) } };
    });
  }

  async #read(call: ToolCall, a: ReadArtifactInput): Promise<ToolOutput> {
    const sessionId = checkSessionId(a.session_id);
    const path = sessionPath(a.path);
    const dir = await this.#files.sessionDir(call.tenant, sessionId);
    const max = this.#d.config.maxArtifactReadBytes;
    const file = await readSmallFile(dir, path, max);
    const { filename, mime_type, download_url } = mcpArtifact(this.#d.signer, sessionId, { path, size: 0 });
    if ('tooLarge' in file) {
      throw new ToolFailure({
        error: 'artifact_too_large',
        message: `${filename} is ${size(file.tooLarge)}, exceeds ${size(max)} limit. Use download_url instead.`,
        size_bytes: file.tooLarge,
        download_url,
      });
    }
    const data = file.bytes.toString('base64');
    return {
      result: {
        session_id: sessionId,
        path: sandboxPath(path),
        filename,
        mime_type,
        size_bytes: file.bytes.length,
        content_base64: data,
      },
      images: isImage(mime_type) ? [{ type: 'image', data, mimeType: mime_type }] : [],
    };
  }

  async #list(call: ToolCall, a: SessionInput): Promise<ToolOutput> {
    const sessionId = checkSessionId(a.session_id);
    const { entries, truncated } = await walkTree(await this.#files.sessionDir(call.tenant, sessionId));
    const artifacts = entries.map((e) => mcpArtifact(this.#d.signer, sessionId, { path: e.path, size: e.size }));
    return { result: { session_id: sessionId, artifacts, ...(truncated ? { truncated } : {}) } };
  }
}

/** The first thing wrong with a call's arguments, as an error object; a language not offered has its own code. */
function argumentProblem(check: TypeCheck<TObject>, args: Record<string, unknown>): McpToolError | null {
  const first = check.Errors(args).First();
  if (!first) return null;
  if (first.path === '/language' && typeof args.language === 'string') {
    const message = `language "${args.language}" is not offered here; use one of: ${LANGUAGES.join(', ')}`;
    return { error: 'unsupported_language', message };
  }
  return { error: 'validation_failed', message: `${first.path.slice(1) || 'arguments'}: ${first.message}` };
}

/** A snapshot as MCP shows it: the REST fields, in a fixed order. */
const snapshotOf = ({ name, size_bytes, created_at, variables }: Snapshot) => ({
  name,
  size_bytes,
  created_at,
  variables,
});

/** A path as the contract's messages show it: absolute in the sandbox. */
const displayPath = (p: string) => (p.startsWith('/') ? p : sandboxPath(p));

/** 15000000 → "15MB", as the contract words sizes. */
function size(bytes: number): string {
  if (bytes >= 1e6) return `${Number((bytes / 1e6).toFixed(1))}MB`;
  if (bytes >= 1e3) return `${Number((bytes / 1e3).toFixed(1))}KB`;
  return `${bytes} bytes`;
}
