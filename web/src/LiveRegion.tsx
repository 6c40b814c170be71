import { useEffect, useRef, useState } from 'react';
import { isTextUIPart } from 'ai';
import type { AppMessage } from './types';

/** Longest announcement; the rest of a long answer is on screen. */
const MAX_SPOKEN = 600;
/** The end of a sentence: . ! ? … before a space, or a line break. */
const SENTENCE_END = /[.!?…](?=\s)|\n/g;

/** Markdown punctuation a screen reader would read out, dropped. */
function spoken(text: string): string {
  const clean = text
    .replace(/```[^\n]*\n?/g, ' ')
    .replace(/[*_`#>|~]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return clean.length > MAX_SPOKEN ? `${clean.slice(0, MAX_SPOKEN)}… (continued on screen)` : clean;
}

function answerText(m: AppMessage | undefined): string {
  if (!m || m.role !== 'assistant') return '';
  return m.parts
    .filter(isTextUIPart)
    .map((p) => p.text)
    .join('\n');
}

type Progress = { id: string | null; announced: number; scanned: number; streaming: boolean };

/**
 * The page's polite live region (testid `live-region`): the answer being
 * streamed, a finished sentence at a time (never per token), then what it is
 * waiting for: "Answer finished.", "Waiting for your approval.", "Stopped.".
 * Answers already on screen when the page opened are not read out.
 */
export function LiveRegion({
  messages,
  busy,
  waitingForApproval,
  stopped,
}: {
  messages: AppMessage[];
  busy: boolean;
  waitingForApproval: boolean;
  stopped: boolean;
}) {
  const [items, setItems] = useState<{ n: number; text: string }[]>([]);
  const last = messages[messages.length - 1];
  const progress = useRef<Progress | null>(null);
  const counter = useRef(0);

  useEffect(() => {
    const say: string[] = [];
    const text = answerText(last);
    const id = last?.role === 'assistant' ? last.id : null;
    let p = progress.current;
    if (p === null) {
      // What is on screen at first is not news (a resumed answer is: it streams).
      p = progress.current = { id, announced: busy ? 0 : text.length, scanned: busy ? 0 : text.length, streaming: busy };
    }
    if (id !== p.id) {
      p.id = id;
      p.announced = 0;
      p.scanned = 0;
    }
    if (busy) {
      p.streaming = true;
      if (text.length > p.scanned) {
        // Only the new text is searched: a long answer costs its length once.
        SENTENCE_END.lastIndex = Math.max(p.announced, p.scanned - 1);
        let end = -1;
        for (let m = SENTENCE_END.exec(text); m; m = SENTENCE_END.exec(text)) end = m.index + 1;
        p.scanned = text.length;
        if (end > p.announced) {
          const sentence = spoken(text.slice(p.announced, end));
          p.announced = end;
          if (sentence) say.push(sentence);
        }
      }
    } else if (p.streaming) {
      p.streaming = false;
      const rest = spoken(text.slice(p.announced));
      p.announced = p.scanned = text.length;
      if (rest) say.push(rest);
      say.push(stopped ? 'Stopped.' : waitingForApproval ? 'Waiting for your approval.' : 'Answer finished.');
    }
    if (say.length) setItems((old) => [...old.slice(-3), ...say.map((s) => ({ n: ++counter.current, text: s }))]);
  }, [last, busy, waitingForApproval, stopped]);

  return (
    <div className="sr-only" data-testid="live-region" role="log" aria-live="polite" aria-relevant="additions text">
      {items.map((i) => (
        <p key={i.n}>{i.text}</p>
      ))}
    </div>
  );
}
