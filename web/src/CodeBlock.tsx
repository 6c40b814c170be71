import { useEffect, useMemo, useState } from 'react';

type Highlighter = typeof import('./highlight');

/** Code blocks longer than this are shown without colours (highlighting is not free). */
const MAX_HIGHLIGHT = 60_000;

let loaded: Highlighter | null = null;
let loading: Promise<Highlighter | null> | null = null;

/** The highlighter module, imported on first use (assets/highlight.js); null if it failed to load. */
function loadHighlighter(): Promise<Highlighter | null> {
  loading ??= import('./highlight').then(
    (m) => (loaded = m),
    () => null, // no colours, the code is still shown
  );
  return loading;
}

/** The highlighter once loaded (a render without it shows plain code). */
function useHighlighter(wanted: boolean): Highlighter | null {
  const [module, setModule] = useState<Highlighter | null>(loaded);
  useEffect(() => {
    if (!wanted || module) return;
    let live = true;
    void loadHighlighter().then((m) => {
      if (live && m) setModule(m);
    });
    return () => {
      live = false;
    };
  }, [wanted, module]);
  return module;
}

/** A fenced code block: plain at once, coloured when the highlighter has loaded. */
export function CodeBlock({ code, lang }: { code: string; lang: string }) {
  const wanted = lang !== '' && code.length <= MAX_HIGHLIGHT;
  const hl = useHighlighter(wanted);
  const coloured = useMemo(() => (wanted && hl ? hl.highlight(code, lang) : null), [wanted, hl, code, lang]);
  return (
    <pre className="md-code" data-lang={lang || undefined} tabIndex={0}>
      {lang && (
        <span className="md-code-lang" aria-hidden="true">
          {lang}
        </span>
      )}
      <code className={coloured ? `hljs language-${lang}` : lang ? `language-${lang}` : undefined}>{coloured ?? code}</code>
    </pre>
  );
}
