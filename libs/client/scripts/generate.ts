import { fileURLToPath } from 'node:url';
import { createClient } from '@hey-api/openapi-ts';

/** Where the committed client is generated; the drift test generates into a temporary directory instead. */
export const GENERATED_DIR = fileURLToPath(new URL('../src/generated', import.meta.url));
const SPEC = fileURLToPath(new URL('../../../openapi/openapi.json', import.meta.url));

/** Generates the typed client (types, SDK functions, fetch runtime) from openapi/openapi.json with hey-api. */
export async function generateClient(path = GENERATED_DIR): Promise<void> {
  await createClient({
    input: SPEC,
    output: { path, clean: true },
    plugins: ['@hey-api/client-fetch', '@hey-api/typescript', '@hey-api/sdk'],
    logs: { level: 'silent' },
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await generateClient();
  console.log(`wrote ${GENERATED_DIR}`);
}
