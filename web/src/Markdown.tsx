import { memo, useMemo, type ReactNode } from 'react';
import ReactMarkdown, { type Components } from 'react-markdown';
import remarkGfm from 'remark-gfm';
import { CodeBlock } from './CodeBlock';
import { splitBlocks } from './markdownBlocks';

// Model text as GitHub-flavoured markdown (tables, task lists, strikethrough,
// autolinks) through react-markdown, which builds React elements and never
// renders raw HTML: HTML in the text is shown as text. Links open only for
// http(s) and mailto; images are never loaded (their alt text links to them).
// Each top-level block is rendered on its own and memoised, so a streaming
// answer re-parses only its last block (see markdownBlocks.ts).

const OPENED = /^(?:https?:\/\/|mailto:)/i;

/** The URL when it may be opened (http, https, mailto), else '' (the element renders as text). */
export function safeUrl(url: string): string {
  const u = url.trim();
  return OPENED.test(u) ? u : '';
}

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

const components: Components = {
  a({ href, children }) {
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
  img({ src, alt }) {
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
  pre({ node }) {
    const code = textOf(node).replace(/\n$/, '');
    return <CodeBlock code={code} lang={languageOf(node)} />;
  },
  table({ children }) {
    return (
      <div className="md-table" tabIndex={0} role="region" aria-label="Table">
        <table>{children}</table>
      </div>
    );
  },
  input({ type, checked }) {
    if (type !== 'checkbox') return null;
    return <input type="checkbox" checked={!!checked} disabled readOnly aria-label={checked ? 'Done' : 'Not done'} />;
  },
};

const remarkPlugins = [remarkGfm];

const Block = memo(function Block({ text }: { text: string }) {
  return (
    <ReactMarkdown remarkPlugins={remarkPlugins} components={components} urlTransform={safeUrl}>
      {text}
    </ReactMarkdown>
  );
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
