// The syntax highlighter, loaded on demand (a separate file, assets/highlight.js)
// the first time an answer shows a fenced code block: highlight.js grammars
// through lowlight, whose result is a tree, turned into React elements here
// (class names only: nothing is ever set as HTML).
import { createElement, type ReactNode } from 'react';
import { createLowlight } from 'lowlight';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import ini from 'highlight.js/lib/languages/ini';
import java from 'highlight.js/lib/languages/java';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

const lowlight = createLowlight({
  bash,
  c,
  cpp,
  css,
  diff,
  go,
  ini,
  java,
  javascript,
  json,
  markdown,
  python,
  rust,
  shell,
  sql,
  typescript,
  xml,
  yaml,
});
// Names models use that the grammars do not list themselves.
lowlight.registerAlias({ ini: ['toml'], shell: ['console', 'shell-session'], json: ['jsonc', 'json5'] });

type Tree = ReturnType<typeof lowlight.highlight>;
type Node = Tree['children'][number];

function toReact(nodes: Node[]): ReactNode[] {
  return nodes.map((node, i) => {
    if (node.type === 'text') return node.value;
    if (node.type !== 'element') return null;
    const cls = node.properties?.className;
    const className = Array.isArray(cls) ? cls.join(' ') : typeof cls === 'string' ? cls : undefined;
    return createElement('span', { key: i, className }, ...toReact(node.children as Node[]));
  });
}

/** Whether `lang` (a name or an alias) has a grammar here. */
export function knows(lang: string): boolean {
  return lowlight.registered(lang);
}

/** `code` highlighted as `lang`, as React nodes; null for a language without a grammar. */
export function highlight(code: string, lang: string): ReactNode[] | null {
  if (!lowlight.registered(lang)) return null;
  try {
    return toReact(lowlight.highlight(lang, code).children);
  } catch {
    return null;
  }
}
