import type { Problem } from './generated/types.gen.js';

/** An error answer of the API: its HTTP status and its problem details (RFC 9457) with the stable `code`. */
export class SandgateApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly problem: Problem | null;

  constructor(status: number, problem: Problem | null, fallback = `HTTP ${status}`) {
    super(problem ? `${problem.code}: ${problem.detail}` : fallback);
    this.name = 'SandgateApiError';
    this.status = status;
    this.code = problem?.code ?? 'http_error';
    this.problem = problem;
  }

  /** Seconds the server asked to wait before retrying (429, 503), if it said. */
  get retryAfter(): number | undefined {
    return this.problem?.retry_after;
  }
}

/** The error of a failed response: its problem+json body when it has one. */
export async function errorOf(response: Response): Promise<SandgateApiError> {
  const text = await response.text().catch(() => '');
  try {
    return new SandgateApiError(response.status, JSON.parse(text) as Problem);
  } catch {
    return new SandgateApiError(response.status, null, `HTTP ${response.status}: ${text.slice(0, 200)}`);
  }
}
