import type { Language } from '@sandgate/contracts';

/** Where the session's workspace appears inside every sandbox, on every backend: every program's working directory. */
export const WORKDIR = '/mnt/data';

/** The program that runs `code`, passed as an argument so no shell ever parses it. */
export function commandFor(language: Language, code: string): string[] {
  switch (language) {
    case 'python':
      return ['python3', '-c', code];
    case 'javascript':
      return ['node', '-e', code];
    case 'typescript':
      // images/runtime/agent/sandgate-ts: esbuild strips the types, node runs the module with source maps.
      return ['sandgate-ts', code];
    case 'bash':
      return ['bash', '-c', code];
  }
}
