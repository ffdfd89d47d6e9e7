import type { ExecutionJob, Language } from '@sandgate/contracts';
import { testCommand } from '../outcome/test-report.ts';

/** Where the session's workspace appears inside every sandbox, on every backend: every program's working directory. */
export const WORKDIR = '/mnt/data';

/**
 * The program that runs `code` with `args`, each passed as an argument so no shell ever parses it. The arguments land
 * where each language's scripts look: Python's sys.argv[1:], Node's process.argv.slice(2), bash's $1….
 */
export function commandFor(language: Language, code: string, args: readonly string[] = []): string[] {
  switch (language) {
    case 'python':
      return ['python3', '-c', code, ...args];
    case 'javascript':
      // node -e puts the arguments from argv[1]; a script name in front keeps them at slice(2), as for a file.
      return ['node', '-e', code, '[eval]', ...args];
    case 'typescript':
      // images/runtime/agent/sandgate-ts: esbuild strips the types, node runs the module with source maps.
      return ['sandgate-ts', code, ...args];
    case 'bash':
      return ['bash', '-c', code, 'bash', ...args];
  }
}

/** The program a job runs: its code with its arguments, or in test mode its tests against its code (sandgate-test). */
export function programFor(
  job: Pick<ExecutionJob, 'execution_id' | 'language' | 'code' | 'args' | 'mode' | 'tests'>,
): string[] {
  return job.mode === 'test' ? testCommand(job) : commandFor(job.language, job.code, job.args ?? []);
}
