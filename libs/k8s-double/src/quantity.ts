/**
 * Kubernetes resource quantities (`1536Mi`, `500m`, `1.5`, `2e3`, `1G`) as numbers: bytes for memory and
 * storage, cores for cpu. The grammar of apimachinery's resource.Quantity; invalid text answers NaN.
 */
const BINARY: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};
const QUANTITY = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$/;

export function parseQuantity(value: string | number): number {
  if (typeof value === 'number') return value;
  const m = QUANTITY.exec(value.trim());
  if (!m || value.trim() !== value) return NaN;
  const n = Number(m[1]);
  if (m[3] !== undefined) return n * 10 ** Number(m[3]);
  const suffix = m[2] ?? '';
  return n * (BINARY[suffix] ?? DECIMAL[suffix] ?? NaN);
}

export const isQuantity = (value: unknown): boolean =>
  (typeof value === 'number' && Number.isFinite(value)) ||
  (typeof value === 'string' && Number.isFinite(parseQuantity(value)));
