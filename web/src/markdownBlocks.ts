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
