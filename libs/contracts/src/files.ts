import { Type, type Static } from '@sinclair/typebox';
import { NextCursorSchema, PageQuerySchema, ref } from './common.ts';

export const FileEntrySchema = Type.Object(
  {
    path: Type.String({
      description: "Path relative to the session's root (/mnt/data in the sandbox), or to the volume's.",
    }),
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
  {
    files: Type.Array(ref(FileEntrySchema)),
    next_cursor: NextCursorSchema,
    truncated: Type.Boolean({
      description:
        'Some files cannot be listed at all: deeper than 32 levels, or in a directory of more than 100,000 ' +
        'entries. Paging (next_cursor) is how the rest of a long listing comes.',
    }),
  },
  { $id: 'FileList', title: 'FileList' },
);

/** A page of a session's files: paths in walk order (segment by segment), `limit` at a time. */
export const FilePageQuerySchema = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 1000, description: 'Files per page.' })),
  cursor: PageQuerySchema.properties.cursor,
});
export type FilePageQuery = Static<typeof FilePageQuerySchema>;
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
    // No `default`: a filled-in false would hide the `?overwrite=true` of the query.
    overwrite: Type.Optional(
      Type.Boolean({ description: 'Replace an existing file (also `?overwrite=true`); default false.' }),
    ),
  },
  {
    $id: 'UploadJson',
    title: 'UploadJson',
    additionalProperties: false,
    examples: [{ path: 'data/marketing.csv', content_base64: 'Y2hhbm5lbCxzcGVuZAo=', overwrite: false }],
  },
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

/**
 * The multipart upload as the document describes it (the server reads the parts as they stream in, so this schema
 * only documents them): text fields first, then one or more file parts under any field name.
 */
export const MultipartUploadSchema = Type.Object(
  {
    path: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 1024,
        description:
          'Where to save the first file, relative to the session root (may contain `/`); default: the ' +
          "part's filename. Must come before the file parts.",
      }),
    ),
    overwrite: Type.Optional(
      Type.Union([Type.Boolean(), Type.Literal('true'), Type.Literal('false')], {
        description: 'Replace existing files; default false (or `?overwrite=`). Must come before the file parts.',
      }),
    ),
    file: Type.Unsafe<Blob>({
      type: 'string',
      format: 'binary',
      contentMediaType: 'application/octet-stream',
      description:
        'The file (its filename names it unless `path` is given). More file parts may follow, under ' +
        'any field name; each is saved under its own filename.',
    }),
  },
  { $id: 'MultipartUpload', title: 'MultipartUpload' },
);
