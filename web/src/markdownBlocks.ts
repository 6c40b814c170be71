// Splitting an answer into top-level markdown blocks, so that a streaming
// answer re-parses only its last block: parsing is linear but not cheap (about
// 4 ms per KB of typical markdown), and the text grows every few milliseconds.
//
// A split is made only at a blank line outside a fenced code block, before a
// line that starts a new block on its own: not indented (a list item's
// continuation or indented code) and not a list item continuing a list. What
// could differ from parsing the whole text at once (a reference definition or a
// footnote in another block) is rare in model output.

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const LIST_ITEM = /^ {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)/;

/** `text` as consecutive blocks (joined, they are `text` again). */
export function splitBlocks(text: string): string[] {
  const blocks: string[] = [];
  let start = 0;
  let fence: string | null = null;
  let blank = false;
  let listInBlock = false;
  let pos = 0;
  while (pos < text.length) {
    const nl = text.indexOf('\n', pos);
    const end = nl === -1 ? text.length : nl + 1;
    const line = text.slice(pos, nl === -1 ? text.length : nl);
    if (fence !== null) {
      const close = FENCE.exec(line);
      if (close && close[1]![0] === fence[0] && close[1]!.length >= fence.length && line.trim() === close[1]) fence = null;
    } else if (line.trim() === '') {
      blank = true;
    } else {
      const item = LIST_ITEM.test(line);
      const indented = /^[ \t]/.test(line);
      if (blank && pos > start && !indented && !(item && listInBlock)) {
        blocks.push(text.slice(start, pos));
        start = pos;
        listInBlock = false;
      }
      blank = false;
      if (item) listInBlock = true;
      const open = FENCE.exec(line);
      if (open) fence = open[1]!;
    }
    pos = end;
  }
  if (start < text.length || blocks.length === 0) blocks.push(text.slice(start));
  return blocks;
}

/**
 * Quotes and lists nested deeper than this are shown flattened: parsing is
 * worse than quadratic in the nesting of one line (500 `- ` markers took
 * seconds), and each level indents the text further.
 */
export const MAX_NESTING = 8;

/** A quote or list marker at the start of a line (or after another one), with the space after it. */
const MARKER = /[ \t]{0,3}(?:>|[-+*](?=[ \t]|$)|\d{1,9}[.)](?=[ \t]|$))[ \t]?/y;

/** `line` with its marker past `MAX_NESTING` escaped, so that it and the rest are text. */
function capLine(line: string): string {
  let at = 0;
  for (let depth = 1; ; depth++) {
    MARKER.lastIndex = at;
    const m = MARKER.exec(line);
    if (!m) return line;
    if (depth > MAX_NESTING) {
      const marker = m[0].trimStart();
      let pos = at + m[0].length - marker.length;
      if (/\d/.test(marker[0]!)) pos += /^\d+/.exec(marker)![0].length; // `1.` becomes `1\.`
      return `${line.slice(0, pos)}\\${line.slice(pos)}`;
    }
    at += m[0].length;
  }
}

/**
 * `block` with every line's quote and list markers past `MAX_NESTING` escaped
 * (shown as text); lines of a fenced code block are left as they are.
 */
export function capNesting(block: string): string {
  const lines = block.split('\n');
  let fence: string | null = null;
  let changed = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (fence !== null) {
      const close = FENCE.exec(line);
      if (close && close[1]![0] === fence[0] && close[1]!.length >= fence.length && line.trim() === close[1]) fence = null;
      continue;
    }
    const open = FENCE.exec(line);
    if (open) {
      fence = open[1]!;
      continue;
    }
    const capped = capLine(line);
    if (capped !== line) {
      lines[i] = capped;
      changed = true;
    }
  }
  return changed ? lines.join('\n') : block;
}

const CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;

/**
 * The code of a block that is one fenced code block and nothing else (closed,
 * or still open while it streams), with its language; null for any other
 * block. Such a block needs no markdown parser, whatever its size.
 */
export function fencedCode(block: string): { code: string; lang: string } | null {
  const text = block.trimEnd();
  const nl = text.indexOf('\n');
  const open = /^( {0,3})(`{3,}|~{3,})(.*)$/.exec(nl === -1 ? text : text.slice(0, nl));
  if (!open) return null;
  const [, indent = '', fence = '', info = ''] = open;
  if (fence[0] === '`' && info.includes('`')) return null; // not a fence (an inline code span)
  const lines = nl === -1 ? [] : text.slice(nl + 1).split('\n');
  let end = lines.length;
  for (let i = 0; i < lines.length; i++) {
    const close = CLOSE.exec(lines[i]!);
    if (close && close[1]![0] === fence[0] && close[1]!.length >= fence.length) {
      end = i;
      break;
    }
  }
  if (end < lines.length - 1) return null; // more markdown after the closing fence
  // Content lines lose up to as many leading spaces as the opening fence had.
  const strip = indent.length ? new RegExp(`^ {0,${indent.length}}`) : null;
  const code = lines
    .slice(0, end)
    .map((l) => (strip ? l.replace(strip, '') : l))
    .join('\n');
  return { code, lang: (info.trim().split(/[ \t]/)[0] ?? '').toLowerCase() };
}
