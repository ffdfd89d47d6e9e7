import { Type, type Static } from '@sinclair/typebox';
import { ref } from './common.ts';

export const FileEntrySchema = Type.Object(
  {
    path: Type.String({ description: 'Path relative to the session root (/mnt/data in the sandbox).' }),
    filename: Type.String(),
    size_bytes: Type.Integer(),
    mime_type: Type.String(),
    modified_at: Type.String({ format: 'date-time' }),
    download_url: Type.String({ description: 'Signed, expiring URL; needs no API key.' }),
  },
  { $id: 'FileEntry', title: 'FileEntry' },
);
export type FileEntry = Static<typeof FileEntrySchema>;

export const FileListSchema = Type.Object(
  { files: Type.Array(ref(FileEntrySchema)), truncated: Type.Boolean() },
  { $id: 'FileList', title: 'FileList' },
);
export type FileList = Static<typeof FileListSchema>;

export const UploadResultSchema = Type.Object(
  { files: Type.Array(ref(FileEntrySchema)) },
  { $id: 'UploadResult', title: 'UploadResult' },
);
export type UploadResult = Static<typeof UploadResultSchema>;

/** JSON upload, for clients (MCP, n8n) that cannot send multipart. */
export const UploadJsonSchema = Type.Object(
  {
    path: Type.String({ minLength: 1, maxLength: 1024 }),
    content_base64: Type.String({ contentEncoding: 'base64' }),
    overwrite: Type.Optional(Type.Boolean({ default: false })),
  },
  { $id: 'UploadJson', title: 'UploadJson', additionalProperties: false },
);
export type UploadJson = Static<typeof UploadJsonSchema>;

/** A file sent inline with an execution request, written before the code runs. */
export const InlineFileSchema = Type.Object(
  {
    path: Type.String({ minLength: 1, maxLength: 1024 }),
    content_base64: Type.String({ contentEncoding: 'base64' }),
  },
  { $id: 'InlineFile', title: 'InlineFile', additionalProperties: false },
);
export type InlineFile = Static<typeof InlineFileSchema>;
