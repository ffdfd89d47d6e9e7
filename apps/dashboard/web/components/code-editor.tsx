import { useEffect, useRef } from 'preact/hooks';
import { basicSetup } from 'codemirror';
import { Compartment, EditorState, Prec } from '@codemirror/state';
import { EditorView, keymap } from '@codemirror/view';
import { StreamLanguage } from '@codemirror/language';
import { python } from '@codemirror/lang-python';
import { javascript } from '@codemirror/lang-javascript';
import { shell } from '@codemirror/legacy-modes/mode/shell';
import { oneDark } from '@codemirror/theme-one-dark';

const LANGUAGE_SUPPORT: Record<string, () => import('@codemirror/state').Extension> = {
  python: () => python(),
  javascript: () => javascript(),
  typescript: () => javascript({ typescript: true }),
  bash: () => StreamLanguage.define(shell),
};

const dark = matchMedia('(prefers-color-scheme: dark)');

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
 * A CodeMirror 6 editor. Tab indents, so Escape then Tab leaves it (CodeMirror's own accessible
 * convention); its styles go through constructed style sheets, which the page's CSP allows.
 */
export function CodeEditor({ value, language, onChange, onRun, label, autofocus }: CodeEditorProps) {
  const host = useRef<HTMLDivElement>(null);
  const view = useRef<EditorView | null>(null);
  const handlers = useRef({ onChange, onRun });
  handlers.current = { onChange, onRun };
  const lang = useRef(new Compartment());
  const theme = useRef(new Compartment());

  useEffect(() => {
    const run = () => { handlers.current.onRun?.(); return true; };
    view.current = new EditorView({
      parent: host.current!,
      state: EditorState.create({
        doc: value,
        extensions: [
          Prec.highest(keymap.of([{ key: 'Shift-Enter', run }, { key: 'Mod-Enter', run }])),
          basicSetup,
          lang.current.of(LANGUAGE_SUPPORT[language]?.() ?? []),
          theme.current.of(dark.matches ? oneDark : []),
          EditorView.contentAttributes.of({ 'aria-label': label }),
          EditorView.updateListener.of((u) => { if (u.docChanged) handlers.current.onChange(u.state.doc.toString()); }),
        ],
      }),
    });
    if (autofocus) view.current.focus();
    const onScheme = () => view.current?.dispatch({ effects: theme.current.reconfigure(dark.matches ? oneDark : []) });
    dark.addEventListener('change', onScheme);
    return () => { dark.removeEventListener('change', onScheme); view.current?.destroy(); view.current = null; };
  }, []);

  useEffect(() => {
    view.current?.dispatch({ effects: lang.current.reconfigure(LANGUAGE_SUPPORT[language]?.() ?? []) });
  }, [language]);

  // A value set from outside (a cleared cell, a loaded example) replaces the document.
  useEffect(() => {
    const v = view.current;
    if (v && v.state.doc.toString() !== value) v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } });
  }, [value]);

  return <div class="editor" ref={host} />;
}
