import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useEffect, useRef, useState } from 'preact/hooks';
import { apiPath } from '../lib/api.ts';
import { useApi } from '../lib/context.ts';
import { adoptStyleElements } from '../lib/adopt-styles.ts';
import { ErrorNote, Panel } from './common.tsx';

interface Live {
  ws: WebSocket;
  term: Terminal;
  stop(): void;
}

/** The gateway's websocket URL on this page's origin (its public URL may name another host). */
function onThisOrigin(url: string): string {
  const u = new URL(url);
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${u.pathname}${u.search}`;
}

/**
 * A terminal in the session's sandbox (xterm.js): opened with a signed URL, since a browser cannot send the API key on
 * a websocket; keys go as binary messages, a resize of the panel as a resize message.
 */
export function TerminalPanel({ sessionId }: { sessionId: string }) {
  const api = useApi();
  const box = useRef<HTMLDivElement>(null);
  const live = useRef<Live | null>(null);
  const [state, setState] = useState<'closed' | 'opening' | 'open'>('closed');
  const [ended, setEnded] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);

  const close = () => {
    live.current?.stop();
    live.current = null;
  };
  useEffect(() => close, [sessionId]);

  const open = async () => {
    setError(null);
    setEnded(null);
    setState('opening');
    try {
      const { url } = await api.request<{ url: string }>('POST', apiPath`/v1/sessions/${sessionId}/terminal/url`);
      const term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000 });
      const fit = new FitAddon();
      term.loadAddon(fit);
      term.open(box.current!);
      const unadopt = adoptStyleElements(box.current!);
      fit.fit();
      const ws = new WebSocket(`${onThisOrigin(url)}&cols=${term.cols}&rows=${term.rows}`);
      ws.binaryType = 'arraybuffer';
      const encoder = new TextEncoder();
      const typed = term.onData((keys) => ws.readyState === WebSocket.OPEN && ws.send(encoder.encode(keys)));
      const resized = term.onResize(({ cols, rows }) => {
        if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols, rows }));
      });
      const observer = new ResizeObserver(() => fit.fit());
      observer.observe(box.current!);
      ws.onopen = () => {
        setState('open');
        term.focus();
      };
      ws.onmessage = (e: MessageEvent<ArrayBuffer>) => term.write(new Uint8Array(e.data));
      ws.onclose = (e) => {
        setEnded(
          e.code === 1006 ? 'The terminal could not be opened, or its connection was lost.' : `${e.reason} (${e.code})`,
        );
        setState('closed');
        close();
      };
      live.current = {
        ws,
        term,
        stop: () => {
          observer.disconnect();
          typed.dispose();
          resized.dispose();
          ws.onclose = null;
          ws.close();
          unadopt();
          term.dispose();
        },
      };
    } catch (err) {
      setError(err);
      setState('closed');
    }
  };

  return (
    <Panel
      title="Terminal"
      label="terminal"
      actions={
        state === 'closed' ? (
          <button type="button" onClick={() => void open()}>
            Open terminal
          </button>
        ) : (
          <button
            type="button"
            disabled={state === 'opening'}
            onClick={() => {
              close();
              setState('closed');
              setEnded('Closed.');
            }}
          >
            {state === 'opening' ? 'Opening…' : 'Close terminal'}
          </button>
        )
      }
    >
      <ErrorNote error={error} />
      {ended && (
        <p class="muted" role="status">
          {ended}
        </p>
      )}
      {state === 'closed' && !ended && (
        <p class="muted">A login shell in the session&apos;s sandbox, as its user, with its limits.</p>
      )}
      <div ref={box} class={state === 'closed' ? 'terminal hidden' : 'terminal'} aria-label="terminal screen" />
    </Panel>
  );
}
