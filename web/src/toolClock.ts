// Tool call timings taken from the response stream itself, as chunks arrive
// (not when React renders them, which is throttled): a call is first seen at its
// `tool-input-start` (or `tool-input-available`, or the approval request) and ends
// at its `tool-output-*` chunk. A continuation after an approval is another
// response: the call's start from the first one is kept.

export type Clock = { start?: number; end?: number };
export const toolClock = new Map<string, Clock>();

const START = new Set(['tool-input-start', 'tool-input-available', 'tool-approval-request']);
const END = new Set(['tool-output-available', 'tool-output-error', 'tool-output-denied']);

function note(line: string) {
  if (!line.startsWith('data:') || !line.includes('"toolCallId"')) return;
  let chunk: { type?: unknown; toolCallId?: unknown };
  try {
    chunk = JSON.parse(line.slice(5)) as typeof chunk;
  } catch {
    return;
  }
  if (typeof chunk.toolCallId !== 'string' || typeof chunk.type !== 'string') return;
  const now = Date.now();
  const c = toolClock.get(chunk.toolCallId) ?? {};
  if (START.has(chunk.type) && c.start === undefined) c.start = now;
  if (END.has(chunk.type) && c.end === undefined) {
    c.end = now;
    c.start ??= now;
  }
  toolClock.set(chunk.toolCallId, c);
}

/** `fetch` for the chat transport: passes the response through untouched, noting tool chunk times. */
export const timedFetch: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  // Nothing to note without a body (a 204 from the reattach endpoint has none).
  if (!res.ok || !res.body || res.status === 204 || res.status === 205) return res;
  const decoder = new TextDecoder();
  let buf = '';
  const tap = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, ctl) {
      ctl.enqueue(chunk);
      buf += decoder.decode(chunk, { stream: true });
      let nl = buf.indexOf('\n');
      while (nl !== -1) {
        note(buf.slice(0, nl).trimEnd());
        buf = buf.slice(nl + 1);
        nl = buf.indexOf('\n');
      }
    },
  });
  return new Response(res.body.pipeThrough(tap), { status: res.status, statusText: res.statusText, headers: res.headers });
};
