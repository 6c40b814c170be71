import { useState, type ReactNode } from 'react';

/**
 * Characters of a text part rendered at first, and added by each "Show more".
 * Laying out a long text (worst: one unbreakable word, which `overflow-wrap:
 * anywhere` breaks at every character) takes time in proportion to what is
 * rendered, so a 1 MB answer is shown a window at a time: streaming it,
 * restoring it on reload, and showing more of it never blocks the page (one
 * window of code laid out at once is tens of milliseconds; four were 300).
 */
export const TEXT_WINDOW = 32_000;

/** `text` cut at `end` without splitting a surrogate pair. */
function head(text: string, end: number): string {
  const code = text.charCodeAt(end - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? end - 1 : end);
}

/** A text part, at most a window of it at first, with a button for the next. */
export function LongText({ text, render }: { text: string; render: (text: string) => ReactNode }) {
  const [shown, setShown] = useState(TEXT_WINDOW);
  if (text.length <= shown) return <>{render(text)}</>;
  const rest = text.length - shown;
  return (
    <>
      {render(head(text, shown))}
      <p className="long-more" data-testid="long-text-more">
        <span className="muted">{rest.toLocaleString()} more characters not shown. </span>
        <button type="button" className="btn btn-small" onClick={() => setShown((n) => n + TEXT_WINDOW)}>
          Show more
        </button>
      </p>
    </>
  );
}
