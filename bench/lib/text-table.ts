/** Rows as aligned plain-text columns, the first row a header underlined with dashes. */
export function textTable(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r, j) => {
      const line = r.map((c, i) => c.padEnd(widths[i]!)).join('  ');
      return j === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
    })
    .join('\n');
}
