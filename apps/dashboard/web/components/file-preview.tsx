import { useEffect, useState } from 'preact/hooks';
import { sameOrigin } from '../lib/api.ts';
import { CsvTable } from './csv-table.tsx';
import { PdfPreview } from './pdf-preview.tsx';

const TEXT_BYTES = 64 * 1024;

export type PreviewKind = 'image' | 'pdf' | 'csv' | 'text' | null;

export function previewKind(mime: string, path: string): PreviewKind {
  if (/^image\/(png|jpeg|gif|webp|svg\+xml|bmp|avif)$/.test(mime)) return 'image';
  if (mime === 'application/pdf') return 'pdf';
  if (mime === 'text/csv' || /\.csv$/i.test(path)) return 'csv';
  if (mime.startsWith('text/') || mime === 'application/json') return 'text';
  return null;
}

function TextPreview({ url, name }: { url: string; name: string }) {
  const [text, setText] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    fetch(url, { headers: { range: `bytes=0-${TEXT_BYTES - 1}` }, cache: 'no-store' })
      .then((r) => (r.ok ? r.text() : Promise.reject(new Error(String(r.status)))))
      .then(
        (t) => {
          if (!cancelled) setText(t);
        },
        (e: Error) => {
          if (!cancelled) setText(`cannot show ${name}: ${e.message}`);
        },
      );
    return () => {
      cancelled = true;
    };
  }, [url]);
  return (
    <pre class="text-preview" tabIndex={0} aria-label={`contents of ${name}`}>
      {text ?? 'loading…'}
    </pre>
  );
}

/**
 * A session file or artifact shown inline, from its signed download link (on this origin). An image
 * goes into an <img> (an SVG there runs no script), a PDF through pdf.js, a CSV as a table.
 */
export function FilePreview({ url, name, mime, path }: { url: string; name: string; mime: string; path: string }) {
  const src = sameOrigin(url);
  switch (previewKind(mime, path)) {
    case 'image':
      return <img class="image-preview" src={src} alt={name} loading="lazy" />;
    case 'pdf':
      return <PdfPreview url={src} name={name} />;
    case 'csv':
      return <CsvTable url={src} name={name} />;
    case 'text':
      return <TextPreview url={src} name={name} />;
    default:
      return <p class="muted">No preview for {mime}.</p>;
  }
}
