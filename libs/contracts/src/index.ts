export * from './errors.ts';
export * from './common.ts';
export * from './sessions.ts';
export * from './files.ts';
export * from './executions.ts';
export * from './events.ts';
export * from './system.ts';
export * from './mcp.ts';
export * from './scripts.ts';
export * from './tools.ts';
export * from './services.ts';
export * from './session-lifecycle.ts';
export * from './undo-mode.ts';
export * from './templates.ts';
export * from './volumes.ts';
export * from './terminal.ts';
export * from './metrics.ts';
export * from './system-history.ts';
export * from './file-events.ts';

import { ProblemSchema } from './errors.ts';
import { SessionSchema, SessionListSchema, CreateSessionSchema } from './sessions.ts';
import { CreateVolumeSchema, MountVolumeSchema, VolumeListSchema, VolumeMountSchema, VolumeSchema } from './volumes.ts';
import {
  FileEntrySchema,
  FileListSchema,
  UploadResultSchema,
  UploadJsonSchema,
  InlineFileSchema,
  MultipartUploadSchema,
} from './files.ts';
import {
  ArtifactSchema,
  ExecutionResultSchema,
  ExecutionSchema,
  ExecutionListSchema,
  CreateExecutionSchema,
  LimitsSchema,
  WebhookAttemptSchema,
  WebhookStatusSchema,
  ExecutionOutputSchema,
  TestCaseSchema,
  TestReportSchema,
  ToolCallRecordSchema,
} from './executions.ts';
import {
  PhaseEventSchema,
  OutputEventSchema,
  ArtifactEventSchema,
  ResultEventSchema,
  ExecutionStreamEventSchema,
  ToolCallEventSchema,
  ToolResultEventSchema,
} from './events.ts';
import { RuntimeSchema, RuntimeListSchema, HealthSchema, SystemStatsSchema, WebhookSecretSchema } from './system.ts';
import { CreateScriptSchema, ScriptListSchema, ScriptSchema } from './scripts.ts';
import { ToolCallResultSchema, ToolListSchema, ToolSchema } from './tools.ts';
import {
  ServiceListSchema,
  ServiceLogsSchema,
  ServicePreviewSchema,
  ServiceSchema,
  SharePreviewSchema,
  StartServiceSchema,
  StopServiceSchema,
} from './services.ts';
import {
  CreateSnapshotSchema,
  ForkSessionSchema,
  PauseSessionSchema,
  ResumedEventSchema,
  SavedVariablesSchema,
  SessionForkSchema,
  SessionPauseSchema,
  SessionResumeSchema,
  SessionUndoSchema,
  SnapshotListSchema,
  SnapshotRestoreSchema,
  SnapshotSchema,
  UnsavedVariableSchema,
} from './session-lifecycle.ts';
import {
  TemplateBuildResultEventSchema,
  TemplateBuildSchema,
  TemplateBuildStreamEventSchema,
  TemplateListSchema,
  TemplateLogEventSchema,
  TemplateRecipeSchema,
  TemplateSchema,
} from './templates.ts';
import { TerminalStatusSchema, TerminalUrlSchema } from './terminal.ts';
import { SessionMetricsSchema } from './metrics.ts';
import { StatsHistorySchema } from './system-history.ts';
import { FileEventSchema, FileEventsGapSchema, FileEventStreamEventSchema } from './file-events.ts';

/** Every schema with an `$id`, in dependency order: register these with the HTTP server. */
export const SHARED_SCHEMAS = [
  ProblemSchema,
  ArtifactSchema,
  LimitsSchema,
  TestCaseSchema,
  TestReportSchema,
  ToolCallRecordSchema,
  UnsavedVariableSchema,
  ResumedEventSchema,
  ExecutionResultSchema,
  WebhookAttemptSchema,
  WebhookStatusSchema,
  ExecutionSchema,
  ExecutionListSchema,
  CreateExecutionSchema,
  VolumeMountSchema,
  MountVolumeSchema,
  SessionSchema,
  SessionListSchema,
  CreateSessionSchema,
  SavedVariablesSchema,
  PauseSessionSchema,
  SessionPauseSchema,
  SessionResumeSchema,
  ForkSessionSchema,
  SessionForkSchema,
  CreateSnapshotSchema,
  SnapshotSchema,
  SnapshotListSchema,
  SnapshotRestoreSchema,
  SessionUndoSchema,
  SessionMetricsSchema,
  FileEntrySchema,
  FileListSchema,
  UploadResultSchema,
  UploadJsonSchema,
  InlineFileSchema,
  PhaseEventSchema,
  OutputEventSchema,
  ArtifactEventSchema,
  ResultEventSchema,
  ToolCallEventSchema,
  ToolResultEventSchema,
  ExecutionStreamEventSchema,
  MultipartUploadSchema,
  RuntimeSchema,
  RuntimeListSchema,
  HealthSchema,
  SystemStatsSchema,
  StatsHistorySchema,
  WebhookSecretSchema,
  ExecutionOutputSchema,
  CreateScriptSchema,
  ScriptSchema,
  ScriptListSchema,
  ToolSchema,
  ToolListSchema,
  ToolCallResultSchema,
  StartServiceSchema,
  ServiceSchema,
  ServiceListSchema,
  ServiceLogsSchema,
  StopServiceSchema,
  SharePreviewSchema,
  ServicePreviewSchema,
  TerminalUrlSchema,
  TerminalStatusSchema,
  FileEventSchema,
  FileEventsGapSchema,
  FileEventStreamEventSchema,
  TemplateRecipeSchema,
  TemplateBuildSchema,
  TemplateSchema,
  TemplateListSchema,
  TemplateLogEventSchema,
  TemplateBuildResultEventSchema,
  TemplateBuildStreamEventSchema,
  VolumeSchema,
  VolumeListSchema,
  CreateVolumeSchema,
];
