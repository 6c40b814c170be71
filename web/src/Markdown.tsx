import { Fragment, type ReactNode } from 'react';

// A deliberately small renderer: fenced code blocks, inline code, **bold**,
// headings and http(s) links. Everything is rendered as React elements (never as
// HTML), so model output cannot inject markup. Unclosed fences (while streaming)
// render as code up to the end.

const INLINE = /(`[^`\n]+`|\*\*[^*\n]+\*\*|https?:\/\/[^\s<>()"'`]+[^\s<>()"'`.,;:!?])/g;

function inline(text: string, key: string): ReactNode[] {
  const out: ReactNode[] = [];
  let last = 0;
  let i = 0;
  for (const m of text.matchAll(INLINE)) {
    const tok = m[0];
    const at = m.index ?? 0;
    if (at > last) out.push(text.slice(last, at));
    const k = `${key}-${i++}`;
    if (tok.startsWith('`')) out.push(<code key={k}>{tok.slice(1, -1)}</code>);
    else if (tok.startsWith('**')) out.push(<strong key={k}>{tok.slice(2, -2)}</strong>);
    else
      out.push(
        <a key={k} href={tok} target="_blank" rel="noopener noreferrer">
          {tok}
        </a>,
      );
    last = at + tok.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function prose(text: string, key: string): ReactNode[] {
  return text
    .split(/\n{2,}/)
    .filter((p) => p.trim() !== '')
    .map((para, i) => {
      const k = `${key}-p${i}`;
      const heading = /^(#{1,4})\s+(.*)$/.exec(para);
      if (heading && !para.includes('\n')) {
        return (
          <p key={k} className="md-heading">
            {inline(heading[2] ?? '', k)}
          </p>
        );
      }
      return <p key={k}>{inline(para, k)}</p>;
    });
}

export function Markdown({ text }: { text: string }) {
  const blocks: ReactNode[] = [];
  const fence = /```([^\n`]*)\n?/g;
  let pos = 0;
  let n = 0;
  for (;;) {
    fence.lastIndex = pos;
    const open = fence.exec(text);
    if (!open) break;
    blocks.push(...prose(text.slice(pos, open.index), `b${n}`));
    const bodyStart = open.index + open[0].length;
    const close = text.indexOf('```', bodyStart);
    const body = text.slice(bodyStart, close === -1 ? text.length : close);
    const lang = (open[1] ?? '').trim();
    blocks.push(
      <pre key={`c${n}`} className="md-code" data-lang={lang || undefined}>
        <code>{body.replace(/\n$/, '')}</code>
      </pre>,
    );
    n++;
    if (close === -1) {
      pos = text.length;
      break;
    }
    pos = close + 3;
  }
  blocks.push(...prose(text.slice(pos), `b${n}`));
  return <Fragment>{blocks}</Fragment>;
}
