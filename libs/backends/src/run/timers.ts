/** A delay setTimeout keeps: it fires at once for delays past 2^31-1 ms, and a negative one means now. */
export const timerDelay = (ms: number): number => Math.min(Math.max(0, ms), 2 ** 31 - 1);
