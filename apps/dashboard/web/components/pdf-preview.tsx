import { useEffect, useRef, useState } from 'preact/hooks';
import workerUrl from 'pdfjs-dist/build/pdf.worker.min.mjs?url';

/**
 * The first page of a PDF drawn with pdf.js onto a canvas. A browser's own PDF viewer is no option: the
 * gateway serves session files with a sandboxing CSP, under which no plugin runs, and it stays that way.
 * pdf.js (~1 MB) is loaded only when a PDF is shown.
 */
export function PdfPreview({ url, name }: { url: string; name: string }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const [status, setStatus] = useState('loading…');
  useEffect(() => {
    let cancelled = false;
    (async () => {
      const pdfjs = await import('pdfjs-dist');
      pdfjs.GlobalWorkerOptions.workerSrc = workerUrl;
      const res = await fetch(url, { cache: 'no-store' });
      if (!res.ok) throw new Error(`download failed (${res.status})`);
      const doc = await pdfjs.getDocument({ data: new Uint8Array(await res.arrayBuffer()), isEvalSupported: false })
        .promise;
      const page = await doc.getPage(1);
      if (cancelled || !canvas.current) return;
      const viewport = page.getViewport({ scale: Math.min(1.5, 640 / page.getViewport({ scale: 1 }).width) });
      canvas.current.width = Math.floor(viewport.width);
      canvas.current.height = Math.floor(viewport.height);
      await page.render({ canvas: canvas.current, viewport }).promise;
      if (!cancelled) setStatus(doc.numPages > 1 ? `page 1 of ${doc.numPages}` : '');
      await doc.destroy();
    })().catch((err: Error) => {
      if (!cancelled) setStatus(`cannot show this PDF: ${err.message}`);
    });
    return () => {
      cancelled = true;
    };
  }, [url]);
  return (
    <figure class="pdf-preview">
      <canvas
        ref={canvas}
        role="img"
        aria-label={`first page of ${name}`}
        data-rendered={status === '' || status.startsWith('page') ? 'true' : 'false'}
      />
      {status && <figcaption>{status}</figcaption>}
    </figure>
  );
}
