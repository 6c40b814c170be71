// What a UI shows for text a model, a tool or a server chose: the one list of
// hidden characters (C0/C1 controls but newline and tab, bidirectional
// embeddings, overrides and isolates, invisible format characters) that the CLI
// escapes too, read from the same file at build time. Each is written as
// \u{hex}, exactly as `agent chat` shows it.
import { ranges } from '../../crates/ai-core/src/text/hidden_characters.json';

const hex = (code: number) => `\\u{${code.toString(16)}}`;
const CLASS = ranges.map(([from, to]) => `${hex(parseInt(from, 16))}-${hex(parseInt(to, 16))}`).join('');
const ANY = new RegExp(`[${CLASS}]`, 'u');
const EVERY = new RegExp(`[${CLASS}]`, 'gu');

/** Whether `text` holds a hidden character. */
export function hasHidden(text: string): boolean {
  return ANY.test(text);
}

/** `text` with every hidden character written visibly as `\u{hex}` (newline and tab kept). */
export function printable(text: string): string {
  if (!ANY.test(text)) return text;
  return text.replace(EVERY, (c) => hex(c.codePointAt(0) ?? 0));
}
