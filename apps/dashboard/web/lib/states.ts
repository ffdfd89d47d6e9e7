import type { ExecutionState, TerminalState } from '@sandgate/contracts';

/*
 * The states as values. @sandgate/contracts has them too, but importing its values would bundle TypeBox
 * into the page; these records are checked against its types instead, so the two cannot drift apart.
 */
const STATES: Record<ExecutionState, true> = {
  queued: true,
  running: true,
  completed: true,
  failed: true,
  timeout: true,
  cancelled: true,
  error: true,
};
const TERMINAL: Record<TerminalState, true> = {
  completed: true,
  failed: true,
  timeout: true,
  cancelled: true,
  error: true,
};

export const EXECUTION_STATES = Object.keys(STATES) as ExecutionState[];
export const isTerminalState = (s: string): s is TerminalState => Object.hasOwn(TERMINAL, s);
