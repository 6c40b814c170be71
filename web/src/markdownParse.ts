// Markdown to a hast tree (HTML as data), with nothing of React: the same code
// runs on the main thread for small blocks and in the formatting worker
// (offload.ts) for the rest. remark-gfm adds tables, task lists,
// strikethrough and autolinks. Raw HTML in the text becomes text. A link or an
// image keeps its URL only for http(s) and mailto. Quotes and lists nested
// deeper than `MAX_NESTING` are flattened, and anything deeper than
// `MAX_DEPTH` in the tree is reduced to its text, so what the page lays out
// stays shallow however the text is nested.
import { unified } from 'unified';
import remarkParse from 'remark-parse';
import remarkGfm from 'remark-gfm';
import remarkRehype from 'remark-rehype';
import type { Root } from 'hast';
import { capNesting, MAX_NESTING } from './markdownBlocks';

/** Nodes deeper than this (emphasis inside emphasis inside a list...) are shown as their text. */
const MAX_DEPTH = 32;

const OPENED = /^(?:https?:\/\/|mailto:)/i;

/** The URL when it may be opened (http, https, mailto), else '' (the element renders as text). */
export function safeUrl(url: string): string {
  const u = url.trim();
  return OPENED.test(u) ? u : '';
}

/** A node of either tree, as far as these walks look at it. */
type Node = {
  type: string;
  value?: unknown;
  children?: Node[];
  properties?: Record<string, unknown>;
  position?: unknown;
};

/** The text of `node` and everything in it (iterative: the node may be deep). */
function textOf(node: Node): string {
  const out: string[] = [];
  const stack: Node[] = [node];
  while (stack.length) {
    const n = stack.pop()!;
    if (typeof n.value === 'string') out.push(n.value);
    if (n.children) for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i]!);
  }
  return out.join('');
}

/**
 * Flattens `parent`'s children in place: a quote or list `nesting` levels deep
 * or more gives way to its content, a node at `depth` to its text.
 */
function flatten(parent: Node, nesting: number, depth: number): void {
  const out: Node[] = [];
  for (const child of parent.children ?? []) {
    if (depth >= MAX_DEPTH) {
      out.push({ type: 'text', value: textOf(child) });
      continue;
    }
    const nests = child.type === 'blockquote' || child.type === 'list';
    if (nests && nesting >= MAX_NESTING) {
      const items = child.children ?? [];
      const holder: Node = { type: 'root', children: child.type === 'list' ? items.flatMap((item) => item.children ?? []) : items };
      flatten(holder, nesting, depth);
      for (const n of holder.children ?? []) out.push(n);
      continue;
    }
    if (child.children) flatten(child, nests ? nesting + 1 : nesting, depth + 1);
    out.push(child);
  }
  parent.children = out;
}

function remarkFlatten() {
  return (tree: Root) => flatten(tree as unknown as Node, 0, 0);
}

const processor = unified()
  .use(remarkParse)
  .use(remarkGfm)
  .use(remarkFlatten)
  // Raw HTML is kept as `raw` nodes, turned into text below.
  .use(remarkRehype, { allowDangerousHtml: true });

/** Raw HTML as text, URLs only when they may open, no source positions (smaller to send). */
function clean(tree: Root): void {
  const stack: Node[] = [tree as unknown as Node];
  while (stack.length) {
    const n = stack.pop()!;
    delete n.position;
    if (n.type === 'raw') n.type = 'text';
    const p = n.properties;
    if (p) {
      for (const key of ['href', 'src']) if (key in p) p[key] = safeUrl(String(p[key] ?? ''));
    }
    if (n.children) for (const c of n.children) stack.push(c);
  }
}

/** `markdown` (one block of an answer) as a hast tree. */
export function toHast(markdown: string): Root {
  const tree = processor.runSync(processor.parse(capNesting(markdown))) as Root;
  clean(tree);
  return tree;
}
