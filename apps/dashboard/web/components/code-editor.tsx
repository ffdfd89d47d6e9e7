import { useEffect, useLayoutEffect, useRef } from 'preact/hooks';
import { basicSetup } from 'codemirror';
import { Compartment, EditorState, Prec } from '@codemirror/state';
import { EditorView, keymap } from '@codemirror/view';
import { StreamLanguage } from '@codemirror/language';
import { python } from '@codemirror/lang-python';
import { javascript } from '@codemirror/lang-javascript';
import { shell } from '@codemirror/legacy-modes/mode/shell';
import { editorTheme } from './editor-theme.ts';

const LANGUAGE_SUPPORT: Record<string, () => import('@codemirror/state').Extension> = {
  python: () => python(),
  javascript: () => javascript(),
  typescript: () => javascript({ typescript: true }),
  bash: () => StreamLanguage.define(shell),
};

const dark = matchMedia('(prefers-color-scheme: dark)');

/** Sizes and fonts of the editor; they live in its own style sheet, inside its shadow root. */
const layout = EditorView.theme({
  // Custom properties cross the shadow boundary, so the page's CSS can size an editor (a notebook cell is small).
  '&': { minHeight: 'var(--editor-min-height, 8rem)', maxHeight: '60vh', fontSize: '13px' },
  '.cm-scroller': { overflow: 'auto', fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace' },
});

export interface CodeEditorProps {
  value: string;
  language: string;
  onChange(code: string): void;
  /** Shift+Enter (and Ctrl/Cmd+Enter): run what is in the editor. */
  onRun?(): void;
  label: string;
  autofocus?: boolean;
}

/**
 * A CodeMirror 6 editor. Tab is left to the browser, so the keyboard can move past the editor
 * (indentation is Ctrl+] and Ctrl+[, CodeMirror's defaults). It is mounted in a shadow root: there
 * CodeMirror puts its styles in a constructed style sheet, which the page's CSP (style-src 'self')
 * allows; in the document itself it would add a <style> element, which that CSP blocks.
 */
export function CodeEditor({ value, language, onChange, onRun, label, autofocus }: CodeEditorProps) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const handlers = useRef({ onChange, onRun });
  handlers.current = { onChange, onRun };
  // What the editor last reported: a `value` equal to it is our own echo, not a change from outside.
  const reported = useRef(value);
  const lang = useRef(new Compartment());
  const theme = useRef(new Compartment());

  useEffect(() => {
    const run = () => {
      handlers.current.onRun?.();
      return true;
    };
    const root = host.current!.shadowRoot ?? host.current!.attachShadow({ mode: 'open' });
    view.current = new EditorView({
      parent: root,
      root,
      state: EditorState.create({
        doc: value,
        extensions: [
          Prec.highest(
            keymap.of([
              { key: 'Shift-Enter', run },
              { key: 'Mod-Enter', run },
            ]),
          ),
          basicSetup,
          layout,
          lang.current.of(LANGUAGE_SUPPORT[language]?.() ?? []),
          theme.current.of(editorTheme(dark.matches)),
          EditorView.contentAttributes.of({ 'aria-label': label }),
          EditorView.updateListener.of((u) => {
            if (!u.docChanged) return;
            reported.current = u.state.doc.toString();
            handlers.current.onChange(reported.current);
          }),
        ],
      }),
    });
    if (autofocus) view.current.focus();
    const onScheme = () => view.current?.dispatch({ effects: theme.current.reconfigure(editorTheme(dark.matches)) });
    dark.addEventListener('change', onScheme);
    return () => {
      dark.removeEventListener('change', onScheme);
      view.current?.destroy();
      view.current = null;
    };
  }, []);

  useEffect(() => {
    view.current?.dispatch({ effects: lang.current.reconfigure(LANGUAGE_SUPPORT[language]?.() ?? []) });
  }, [language]);

  // A value set from outside (a loaded example) replaces the document. A render that is only catching up
  // with typing must not: its value may already be stale, and writing it back would undo keystrokes (a
  // layout effect runs right after the render, before the next keystroke can come in).
  useLayoutEffect(() => {
    const v = view.current;
    if (!v || value === reported.current) return;
    reported.current = value;
    if (v.state.doc.toString() !== value) v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } });
  }, [value]);

  return <div class="editor" ref={host} />;
}
