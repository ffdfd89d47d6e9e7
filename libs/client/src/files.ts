/** What `upload()` takes: a local file (`{ file: path }`), a Node or web stream, a Blob, bytes or text. */
export type UploadSource =
  { file: string } | Blob | Uint8Array | string | ReadableStream<Uint8Array> | NodeJS.ReadableStream;

/** A fetch body for `source`; a local file and Node streams become web streams, read as they are sent. */
export async function bodyOf(source: UploadSource): Promise<BodyInit> {
  if (typeof source === 'string' || source instanceof Uint8Array || source instanceof Blob) return source as BodyInit;
  if (source instanceof ReadableStream) return source;
  const { Readable } = await import('node:stream');
  if ('file' in source) {
    const { createReadStream } = await import('node:fs');
    return Readable.toWeb(createReadStream(source.file)) as ReadableStream<Uint8Array>;
  }
  return Readable.toWeb(Readable.from(source as AsyncIterable<Uint8Array>)) as ReadableStream<Uint8Array>;
}

/** Writes a response body to `dest` as it arrives; answers the bytes written. */
export async function saveTo(body: ReadableStream<Uint8Array>, dest: string): Promise<number> {
  const [{ createWriteStream }, { Readable }, { pipeline }] = await Promise.all([
    import('node:fs'),
    import('node:stream'),
    import('node:stream/promises'),
  ]);
  let bytes = 0;
  const source = Readable.fromWeb(body as never);
  source.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
  });
  await pipeline(source, createWriteStream(dest));
  return bytes;
}
