import Anser from 'anser';
import { useMemo } from 'preact/hooks';

/** xterm's 256-colour palette above the 16 named colours (those are themed in CSS, for light and dark). */
function paletteRgb(n: number): string {
  if (n >= 232) {
    const v = 8 + (n - 232) * 10;
    return `rgb(${v}, ${v}, ${v})`;
  }
  const c = n - 16;
  const level = (x: number) => (x === 0 ? 0 : 55 + x * 40);
  return `rgb(${level(Math.floor(c / 36))}, ${level(Math.floor(c / 6) % 6)}, ${level(c % 6)})`;
}

const NAMED = ['black', 'red', 'green', 'yellow', 'blue', 'magenta', 'cyan', 'white'];

/** A colour from anser (with use_classes) as a class name or an inline colour set through the CSSOM. */
function colour(name: string | null, truecolor: string | null): { cls?: string; css?: string } {
  if (!name) return {};
  if (name === 'ansi-truecolor' && truecolor) return { css: `rgb(${truecolor})` };
  const m = /^ansi-palette-(\d+)$/.exec(name);
  if (!m) return { cls: name };
  const n = Number(m[1]);
  if (n < 8) return { cls: `ansi-${NAMED[n]}` };
  if (n < 16) return { cls: `ansi-bright-${NAMED[n - 8]}` };
  return { css: paletteRgb(n) };
}

/**
 * Program output with its ANSI SGR colours rendered as spans (other escape codes are dropped). Parsed
 * with anser; colours become classes or CSSOM styles, never markup, so the page's CSP needs no
 * 'unsafe-inline' and nothing a program prints is ever parsed as HTML.
 */
export function AnsiText({ text, class: cls }: { text: string; class?: string }) {
  const parts = useMemo(() => Anser.ansiToJson(text, { use_classes: true, remove_empty: true }), [text]);
  return (
    <span class={cls}>
      {parts.map((p, i) => {
        if (!p.fg && !p.bg && p.decorations.length === 0) return p.content;
        const fg = colour(p.fg, p.fg_truecolor);
        const bg = colour(p.bg, p.bg_truecolor);
        const classes = [fg.cls && `${fg.cls}-fg`, bg.cls && `${bg.cls}-bg`, ...p.decorations.map((d) => `ansi-${d}`)];
        return (
          <span
            key={i}
            class={classes.filter(Boolean).join(' ')}
            style={{ ...(fg.css ? { color: fg.css } : {}), ...(bg.css ? { backgroundColor: bg.css } : {}) }}
          >
            {p.content}
          </span>
        );
      })}
    </span>
  );
}
