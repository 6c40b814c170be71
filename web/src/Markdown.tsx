import { memo, useMemo, type ReactNode } from 'react';
import { Fragment, jsx, jsxs } from 'react/jsx-runtime';
import { toJsxRuntime, type Components } from 'hast-util-to-jsx-runtime';
import type { Element, Root } from 'hast';
import { CodeBlock } from './CodeBlock';
import { fencedCode, splitBlocks } from './markdownBlocks';
import { useFormatter } from './formatter';
import { Lru } from './slice';
import { useFormatted } from './useFormatted';

// Model text as GitHub-flavoured markdown (see markdownParse.ts: tables, task
// lists, strikethrough, autolinks; raw HTML shown as text; links open only for
// http(s) and mailto; nesting capped), as React elements: never as HTML.
// Images are never loaded (their alt text links to them).
//
// Each top-level block is rendered on its own and memoised, so a streaming
// answer re-parses only its last block (see markdownBlocks.ts). Parsing
// markdown is not linear in the worst case (nested markers, brackets, setext
// lines: a 16 KB block can take seconds), so what is parsed where is bounded:
// - a block that is one fenced code block is not parsed at all (CodeBlock);
// - a block of up to `MAIN_MAX` characters is parsed on the main thread (by
//   the formatter, assets/highlight.js, loaded on first use), as long as the
//   task has budget (slice.ts), else in a later task;
// - a longer one, up to `BLOCK_MAX`, in the formatting worker (offload.ts),
//   which gives up on it after a while;
// - a longer one, or one the worker gave up on, is shown as plain text.
// Until a block is formatted it shows its previous form (while it streams) or
// its plain text, marked `data-pending`.

/** Longest block parsed on the main thread: its worst case stays in the tens of milliseconds. */
const MAIN_MAX = 1_500;
/** Longest block parsed at all (a window of LongText); longer ones are shown as plain text. */
const BLOCK_MAX = 32_000;

/** The text of a hast node (the code of a fenced block). */
function textOf(node: unknown): string {
  if (typeof node !== 'object' || node === null) return '';
  const n = node as { type?: string; value?: unknown; children?: unknown[] };
  if (n.type === 'text' && typeof n.value === 'string') return n.value;
  return Array.isArray(n.children) ? n.children.map(textOf).join('') : '';
}

function languageOf(node: unknown): string {
  const code = (node as { children?: { tagName?: string; properties?: { className?: unknown } }[] })?.children?.find(
    (c) => c.tagName === 'code',
  );
  const cls = code?.properties?.className;
  const list = Array.isArray(cls) ? cls.map(String) : typeof cls === 'string' ? cls.split(' ') : [];
  const lang = list.find((c) => c.startsWith('language-'));
  return lang ? lang.slice('language-'.length).toLowerCase() : '';
}

type Props<T> = T & { children?: ReactNode; node?: Element };

const components = {
  a({ href, children }: Props<{ href?: string }>) {
    if (!href) {
      return (
        <span className="md-link-off" title="Not a link: only http, https and mailto links open from here">
          {children}
        </span>
      );
    }
    return (
      <a href={href} target="_blank" rel="noopener noreferrer">
        {children}
      </a>
    );
  },
  img({ src, alt }: Props<{ src?: string; alt?: string }>) {
    const label: ReactNode = alt ? `Image: ${alt}` : 'Image';
    if (typeof src === 'string' && src) {
      return (
        <a className="md-image" href={src} target="_blank" rel="noopener noreferrer" title="Images are not loaded here; open it in a new tab">
          {label}
        </a>
      );
    }
    return <span className="md-image">{label}</span>;
  },
  pre({ node }: Props<object>) {
    const code = textOf(node).replace(/\n$/, '');
    return <CodeBlock code={code} lang={languageOf(node)} />;
  },
  table({ children }: Props<object>) {
    return (
      <div className="md-table" tabIndex={0} role="region" aria-label="Table">
        <table>{children}</table>
      </div>
    );
  },
  input({ type, checked }: Props<{ type?: string; checked?: boolean }>) {
    if (type !== 'checkbox') return null;
    return <input type="checkbox" checked={!!checked} disabled readOnly aria-label={checked ? 'Done' : 'Not done'} />;
  },
} as unknown as Partial<Components>;

/** A parsed block as elements (never as HTML). */
function toElements(tree: Root): ReactNode {
  return toJsxRuntime(tree, { Fragment, jsx, jsxs, components, ignoreInvalidStyle: true, passKeys: true, passNode: true });
}

/** Formatted blocks, by text: a reload, Show more or another chat shows them again without parsing. */
const formatted = new Lru<ReactNode | null>(400);

/** A block shown as it was written. */
function Plain({ text, pending }: { text: string; pending?: boolean }) {
  return (
    <pre className="md-plain" data-testid="md-plain" data-pending={pending || undefined}>
      {text}
    </pre>
  );
}

/** A block of markdown: parsed here once the formatter has loaded, or by the worker. */
function Formatted({ text }: { text: string }) {
  const main = text.length <= MAIN_MAX;
  const formatter = useFormatter(main);
  if (main && formatter === null) return <Plain text={text} pending />;
  return <Parsed text={text} parse={main && formatter && formatter !== 'failed' ? formatter.toHast : null} />;
}

/** A block of markdown parsed by `parse` here, or by the worker when null. */
function Parsed({ text, parse }: { text: string; parse: ((markdown: string) => Root) | null }) {
  const { node, last } = useFormatted({
    key: text,
    make: parse ? () => parse(text) : null,
    job: () => ({ kind: 'markdown', text }),
    convert: toElements,
    cache: formatted,
  });
  if (node) return <>{node}</>;
  if (node === null) return <Plain text={text} />;
  // Not ready: the previous form of this block while it streams, else its text.
  if (last)
    return (
      <div className="md-pending" data-pending="true">
        {last}
      </div>
    );
  return <Plain text={text} pending />;
}

const Block = memo(function Block({ text }: { text: string }) {
  const code = fencedCode(text);
  if (code) return <CodeBlock code={code.code} lang={code.lang} />;
  if (text.length > BLOCK_MAX) return <Plain text={text} />;
  return <Formatted text={text} />;
});

/** Markdown as React elements (see the top of this file). */
export function Markdown({ text }: { text: string }) {
  const blocks = useMemo(() => splitBlocks(text), [text]);
  return (
    <>
      {blocks.map((b, i) => (
        <Block key={i} text={b} />
      ))}
    </>
  );
}
