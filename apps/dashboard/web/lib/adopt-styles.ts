/**
 * The dashboard's Content-Security-Policy allows no inline style, so a `<style>` element a library adds (xterm.js
 * colours its cells and cursor with some) has no effect. Its text is applied instead as a constructed style sheet,
 * which the policy allows, and follows its changes (a theme, a resize). Answers a function that stops and removes them.
 */
export function adoptStyleElements(root: HTMLElement): () => void {
  const sheets = new Map<HTMLStyleElement, CSSStyleSheet>();
  const sync = () => {
    for (const el of root.querySelectorAll('style')) {
      let sheet = sheets.get(el);
      if (!sheet) {
        sheet = new CSSStyleSheet();
        sheets.set(el, sheet);
        document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
      }
      sheet.replaceSync(el.textContent ?? '');
    }
  };
  const observer = new MutationObserver(sync);
  observer.observe(root, { subtree: true, childList: true, characterData: true });
  sync();
  return () => {
    observer.disconnect();
    const mine = new Set(sheets.values());
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => !mine.has(s));
  };
}
