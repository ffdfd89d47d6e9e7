import Papa from 'papaparse';
import { useEffect, useState } from 'preact/hooks';

const PREVIEW_BYTES = 256 * 1024;
const PREVIEW_ROWS = 100;

/** The first rows of a CSV file as a table; only its first 256 KiB are downloaded (a Range request). */
export function CsvTable({ url, name }: { url: string; name: string }) {
  const [rows, setRows] = useState<string[][] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    fetch(url, { headers: { range: `bytes=0-${PREVIEW_BYTES - 1}` }, cache: 'no-store' })
      .then(async (res) => {
        if (!res.ok) throw new Error(`download failed (${res.status})`);
        let text = await res.text();
        // A partial download ends mid-row: drop the unfinished last line.
        if (res.status === 206) text = text.slice(0, text.lastIndexOf('\n') + 1);
        const parsed = Papa.parse<string[]>(text, { preview: PREVIEW_ROWS + 1, skipEmptyLines: true });
        if (!cancelled) setRows(parsed.data);
      })
      .catch((err: Error) => {
        if (!cancelled) setError(err.message);
      });
    return () => {
      cancelled = true;
    };
  }, [url]);
  if (error)
    return (
      <p class="error">
        cannot show {name}: {error}
      </p>
    );
  if (!rows) return <p class="muted">loading {name}…</p>;
  const [head = [], ...body] = rows;
  return (
    <div class="table-scroll" tabIndex={0} role="region" aria-label={`${name} (first ${PREVIEW_ROWS} rows)`}>
      <table class="csv">
        <thead>
          <tr>
            {head.map((h, i) => (
              <th key={i} scope="col">
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {body.slice(0, PREVIEW_ROWS).map((r, i) => (
            <tr key={i}>
              {r.map((c, j) => (
                <td key={j}>{c}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
