// The formatter, loaded on demand (a separate file, assets/highlight.js) by the
// page and by its formatting worker (offload.ts) the first time an answer shows
// text: the markdown parser (markdownParse.ts) and the syntax highlighter,
// highlight.js grammars through lowlight. Both give hast trees (plain data,
// which the page turns into elements with class names only: nothing is ever
// set as HTML). Only the worker highlights.
import type { Root } from 'hast';
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

export { toHast } from './markdownParse';

/** `code` highlighted as `lang`, as a hast tree; null for a language without a grammar. */
export function highlight(code: string, lang: string): Root | null {
  if (!lowlight.registered(lang)) return null;
  try {
    return lowlight.highlight(lang, code);
  } catch {
    return null;
  }
}
