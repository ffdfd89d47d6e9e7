// Test support shared by the backends' tests and the backend contract (not itself a test file).
import type { Artifact, Phase } from '@sandgate/contracts';
import type { EventSink } from '../backend.ts';

/** Records every event a backend reports, in order. */
export class RecordingSink implements EventSink {
  readonly phases: Phase[] = [];
  readonly stdoutChunks: string[] = [];
  readonly stderrChunks: string[] = [];
  readonly artifacts: Artifact[] = [];
  readonly #onStdout: (text: string) => void;
  constructor(onStdout: (text: string) => void = () => {}) {
    this.#onStdout = onStdout;
  }
  phase(phase: Phase): void {
    this.phases.push(phase);
  }
  stdout(text: string): void {
    this.stdoutChunks.push(text);
    this.#onStdout(text);
  }
  stderr(text: string): void {
    this.stderrChunks.push(text);
  }
  artifact(artifact: Artifact): void {
    this.artifacts.push(artifact);
  }
}
