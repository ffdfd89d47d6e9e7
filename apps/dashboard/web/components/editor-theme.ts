import { HighlightStyle, syntaxHighlighting } from '@codemirror/language';
import type { Extension } from '@codemirror/state';
import { EditorView } from '@codemirror/view';
import { oneDarkTheme } from '@codemirror/theme-one-dark';
import { tags as t } from '@lezer/highlight';

/*
 * Syntax colours chosen for contrast (WCAG AA, >= 4.5:1, checked with axe in the browser tests): the
 * stock light style and One Dark's both have token colours below that.
 */
const palette = (
  c: Record<
    'keyword' | 'string' | 'number' | 'comment' | 'definition' | 'type' | 'atom' | 'escape' | 'meta' | 'invalid',
    string
  >,
) =>
  HighlightStyle.define([
    {
      tag: [t.keyword, t.controlKeyword, t.moduleKeyword, t.operatorKeyword, t.definitionKeyword, t.modifier],
      color: c.keyword,
    },
    { tag: [t.string, t.special(t.string), t.regexp, t.docString], color: c.string },
    { tag: [t.number, t.integer, t.float], color: c.number },
    { tag: [t.comment, t.lineComment, t.blockComment], color: c.comment, fontStyle: 'italic' },
    {
      tag: [t.function(t.definition(t.variableName)), t.definition(t.variableName), t.function(t.variableName)],
      color: c.definition,
    },
    { tag: [t.className, t.typeName, t.namespace], color: c.type },
    { tag: [t.bool, t.null, t.atom, t.self, t.special(t.variableName)], color: c.atom },
    { tag: [t.escape, t.character], color: c.escape },
    { tag: [t.meta, t.processingInstruction], color: c.meta },
    { tag: t.invalid, color: c.invalid },
  ]);

const light = palette({
  keyword: '#7c1fa3',
  string: '#a31515',
  number: '#0b6b3a',
  comment: '#5c6370',
  definition: '#0550ae',
  type: '#0a6667',
  atom: '#0550ae',
  escape: '#8a4b00',
  meta: '#555555',
  invalid: '#b42318',
});
const dark = palette({
  keyword: '#d7a6ff',
  string: '#a8e0a0',
  number: '#f2c27b',
  comment: '#9aa5b5',
  definition: '#7cc4ff',
  type: '#6fd3d9',
  atom: '#ff9f80',
  escape: '#f2c27b',
  meta: '#c0c8d2',
  invalid: '#ff7b72',
});
const darkGutters = EditorView.theme({ '.cm-gutters': { color: '#9aa5b5' } }, { dark: true });

export const editorTheme = (isDark: boolean): Extension =>
  isDark ? [oneDarkTheme, darkGutters, syntaxHighlighting(dark)] : [syntaxHighlighting(light)];
