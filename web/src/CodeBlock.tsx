import { createElement, type ReactNode } from 'react';
import type { Root, RootContent } from 'hast';
import { Lru } from './slice';
import { useFormatted } from './useFormatted';

/** Code blocks longer than this are shown without colours (each token becomes an element). */
export const MAX_HIGHLIGHT = 20_000;

/** Highlighted code, by language and code: shown again without asking the worker. */
const coloured = new Lru<ReactNode | null>(400);

/** A highlighted tree as elements: spans with class names, and text. */
function toReact(nodes: RootContent[]): ReactNode[] {
  return nodes.map((node, i) => {
    if (node.type === 'text') return node.value;
    if (node.type !== 'element') return null;
    const cls = node.properties?.className;
    const className = Array.isArray(cls) ? cls.join(' ') : typeof cls === 'string' ? cls : undefined;
    return createElement('span', { key: i, className }, ...toReact(node.children));
  });
}

const convert = (tree: Root): ReactNode => toReact(tree.children);

/**
 * A fenced code block: plain at once, coloured once the formatting worker has
 * highlighted it (offload.ts; the main thread never runs the highlighter).
 * Code the worker cannot colour in time stays plain, and readable.
 */
export function CodeBlock({ code, lang }: { code: string; lang: string }) {
  const wanted = lang !== '' && code.length <= MAX_HIGHLIGHT;
  const key = wanted ? `${lang}\n${code}` : null;
  const { node, last, lastKey } = useFormatted({
    key,
    make: null,
    job: () => ({ kind: 'highlight', code, lang }),
    convert,
    cache: coloured,
  });
  // While the code streams (or a window shows more of it): the colours of what
  // was highlighted so far, and the rest plain. The children keep one shape
  // (colours, then rest) so React never remounts the spans when they change.
  const grown = node === undefined && key !== null && last !== null && lastKey !== null && key.startsWith(lastKey);
  const colours = node ?? (grown ? last : null);
  const rest = node || !grown ? '' : key.slice(lastKey.length);
  return (
    <pre className="md-code" data-lang={lang || undefined} tabIndex={0} data-pending={node === undefined || undefined}>
      {lang && (
        <span className="md-code-lang" aria-hidden="true">
          {lang}
        </span>
      )}
      <code className={colours ? `hljs language-${lang}` : lang ? `language-${lang}` : undefined}>
        {colours ?? code}
        {rest}
      </code>
    </pre>
  );
}
