#!/usr/bin/env node
// Runs a real client-side parser against agent-server's chat endpoint and
// prints what it made of the stream as ONE JSON line on stdout.
//
//   node check-stream.mjs --parser ai6|ai7|assistant-stream --protocol ui|data
//        --url URL [--body-file FILE] [--header 'Name: value']...
//        [--abort-after-ms N] [--timeout-ms N]
//
// Parsers (see README.md):
//   ai6, ai7          `ai` 6.x / 7.x: parseJsonEventStream + uiMessageChunkSchema
//                     + readUIMessageStream, i.e. what useChat's default
//                     transport does. UI message stream only.
//   assistant-stream  UIMessageStreamDecoder (ui) or DataStreamDecoder (data),
//                     piped into AssistantMessageAccumulator.
//
// Output: {"ok","status","error","warnings","chunks","message","tools","text","aborted"}
// Exit code: 0 when ok, 1 when not ok, 2 on a usage error.

import { readFile } from 'node:fs/promises';

import { captureOutput, describe, headersOf, parseCommandLine } from './lib/driver.mjs';

const DEFAULT_BODY = JSON.stringify({
  id: 'chat-1',
  messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
  trigger: 'submit-message',
});
const DEFAULT_TIMEOUT_MS = 60_000;

const PROTOCOL_HEADERS = {
  ui: 'x-vercel-ai-ui-message-stream',
  data: 'x-vercel-ai-data-stream',
};

// Chunk types assistant-stream's UIMessageStreamDecoder acts on (its
// chunk-normalizer plus the decoder's own switch). Any other well-formed
// chunk is dropped without a word, so this script reports it itself.
// Re-check dist/core/serialization/ui-message-stream/*.js when bumping.
const ASSISTANT_STREAM_UI_TYPES = new Set([
  'start', 'start-step', 'finish-step', 'finish', 'abort', 'error',
  'text-start', 'text-delta', 'text-end',
  'reasoning-start', 'reasoning-delta', 'reasoning-end',
  'source', 'source-url', 'file',
  'tool-input-start', 'tool-input-delta', 'tool-input-available', 'tool-input-error',
  'tool-output-available', 'tool-output-error',
  'tool-call-start', 'tool-call-delta', 'tool-call-end', 'tool-result',
]);

const result = {
  ok: false,
  status: null,
  error: null,
  warnings: [],
  chunks: [],
  message: null,
  tools: {},
  text: '',
  aborted: false,
};

// Everything a library prints is captured, so stdout carries only our line.
// The first error becomes `error`; later ones are kept as warnings.
const fail = captureOutput(result);

function emit(exitCode) {
  result.ok = result.error === null;
  process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(exitCode ?? (result.ok ? 0 : 1)));
}

const controller = new AbortController();
let stopReason = null; // 'abort' (--abort-after-ms) or 'timeout'

// Errors that are only the echo of our own abort.
function isOwnAbort(error) {
  return (
    stopReason !== null &&
    (error === controller.signal.reason || error?.name === 'AbortError' || error?.cause === controller.signal.reason)
  );
}

function onParserError(error) {
  if (!isOwnAbort(error)) fail(error);
}

process.on('unhandledRejection', (error) => {
  if (!isOwnAbort(error)) fail(error);
});

const options = {
  parser: { type: 'string' },
  protocol: { type: 'string' },
  url: { type: 'string' },
  'body-file': { type: 'string' },
  header: { type: 'string', multiple: true, default: [] },
  'abort-after-ms': { type: 'string' },
  'timeout-ms': { type: 'string' },
};
const args = parseCommandLine(
  options,
  {
    wholeNumbers: ['abort-after-ms', 'timeout-ms'],
    check: (args) => {
      if (!['ai6', 'ai7', 'assistant-stream'].includes(args.parser)) {
        throw new Error('--parser must be ai6, ai7 or assistant-stream');
      }
      if (!['ui', 'data'].includes(args.protocol)) throw new Error('--protocol must be ui or data');
      if (!args.url) throw new Error('--url is required');
    },
  },
  (error) => {
    fail(`usage: ${describe(error)}`);
    emit(2);
  },
);

if (args) await main(args);

async function main(args) {
  if (args.protocol === 'data' && args.parser !== 'assistant-stream') {
    // The AI SDK 6/7 clients only read the UI message stream.
    fail('unsupported');
    emit();
    return;
  }

  // Load the parser (its package name) before the request, so that
  // --abort-after-ms times the stream and not the import.
  const parser = await import(args.parser);
  const body = args['body-file'] === undefined ? DEFAULT_BODY : await readFile(args['body-file'], 'utf8');
  const headers = new Headers({ 'content-type': 'application/json' });
  for (const [name, value] of Object.entries(headersOf(args.header))) headers.set(name, value);

  const timers = [];
  if (args['abort-after-ms'] !== undefined) {
    timers.push(
      setTimeout(() => {
        stopReason = 'abort';
        result.aborted = true;
        controller.abort();
      }, Number(args['abort-after-ms'])),
    );
  }
  const timeoutMs = args['timeout-ms'] === undefined ? DEFAULT_TIMEOUT_MS : Number(args['timeout-ms']);
  timers.push(
    setTimeout(() => {
      if (stopReason !== null) return;
      stopReason = 'timeout';
      fail(`timed out after ${timeoutMs} ms`);
      controller.abort(new Error(`timed out after ${timeoutMs} ms`));
    }, timeoutMs),
  );

  try {
    const response = await fetch(args.url, { method: 'POST', headers, body, signal: controller.signal });
    result.status = response.status;
    if (!response.ok) {
      fail(`HTTP ${response.status}: ${await response.text()}`);
    } else if (response.body === null) {
      fail('response has no body');
    } else {
      checkHeaders(response, args.protocol);
      if (args.parser === 'assistant-stream') await runAssistantStream(parser, response.body, args.protocol);
      else await runAiSdk(parser, response.body, continuedMessage(body));
    }
  } catch (error) {
    onParserError(error);
  } finally {
    for (const timer of timers) clearTimeout(timer);
  }
  // Also after an abort or a failure: report whatever was accumulated.
  if (args.parser === 'assistant-stream') summarizeAssistantMessage();
  else summarizeUiMessage();
  emit();
}

function checkHeaders(response, protocol) {
  const name = PROTOCOL_HEADERS[protocol];
  const value = response.headers.get(name);
  if (value !== 'v1') fail(`expected response header ${name}: v1, got ${value === null ? 'none' : JSON.stringify(value)}`);
  const contentType = response.headers.get('content-type') ?? '';
  const expected = protocol === 'ui' ? 'text/event-stream' : 'text/plain';
  if (!contentType.startsWith(expected)) {
    result.warnings.push(`check-stream: content-type is ${JSON.stringify(contentType)}, expected ${expected}`);
  }
}

// useChat continues the last message of the request when it is an assistant
// message (e.g. after a tool approval); readUIMessageStream does the same when
// handed that message.
function continuedMessage(body) {
  try {
    const last = JSON.parse(body)?.messages?.at?.(-1);
    return last?.role === 'assistant' ? last : undefined;
  } catch {
    return undefined;
  }
}

async function runAiSdk(ai, body, message) {
  // Same steps as DefaultChatTransport.processResponseStream: a chunk that
  // fails JSON parsing or uiMessageChunkSchema ends the stream with that error.
  const chunks = ai.parseJsonEventStream({ stream: body, schema: ai.uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(chunk, out) {
        if (!chunk.success) throw chunk.error;
        result.chunks.push(chunk.value.type);
        out.enqueue(chunk.value);
      },
    }),
  );
  for await (const snapshot of ai.readUIMessageStream({ stream: chunks, message, onError: onParserError })) {
    result.message = snapshot;
  }
}

// Fills `text` and `tools` from a final UIMessage.
function summarizeUiMessage() {
  const parts = result.message?.parts ?? [];
  result.text = parts.filter((part) => part.type === 'text').map((part) => part.text).join('');
  for (const part of parts) {
    const dynamic = part.type === 'dynamic-tool';
    if (!dynamic && !part.type.startsWith('tool-')) continue;
    if (Object.hasOwn(result.tools, part.toolCallId)) {
      // e.g. `dynamic` differing between tool-input-start and tool-input-available
      result.warnings.push(`check-stream: several tool parts share toolCallId "${part.toolCallId}"; tools keeps the last`);
    }
    result.tools[part.toolCallId] = {
      state: part.state,
      toolName: dynamic ? part.toolName : part.type.slice('tool-'.length),
      dynamic,
      input: part.input ?? null,
      output: part.output ?? null,
      errorText: part.errorText ?? null,
      approval: part.approval ?? null,
    };
  }
}

async function runAssistantStream(assistantStream, body, protocol) {
  const { AssistantMessageAccumulator, DataStreamDecoder, UIMessageStreamDecoder } = assistantStream;
  let decoderInput = body;
  let wireScan = Promise.resolve();
  const stopScan = new AbortController();
  if (protocol === 'ui') {
    let scanned;
    [decoderInput, scanned] = body.tee();
    wireScan = reportIgnoredUiChunks(scanned, stopScan.signal);
  }
  const decoded = decoderInput
    .pipeThrough(protocol === 'ui' ? new UIMessageStreamDecoder() : new DataStreamDecoder())
    .pipeThrough(
      new TransformStream({
        transform(chunk, out) {
          result.chunks.push(chunk.type === 'part-start' ? `part-start:${chunk.part.type}` : chunk.type);
          out.enqueue(chunk);
        },
      }),
    )
    .pipeThrough(new AssistantMessageAccumulator({ onError: onParserError }));
  try {
    for await (const message of decoded) result.message = message;
  } catch (error) {
    stopScan.abort(); // don't wait for the rest of a stream the decoder gave up on
    throw error;
  } finally {
    await wireScan;
  }
}

// Fills `text` and `tools` from assistant-stream's accumulated message.
function summarizeAssistantMessage() {
  if (result.message !== null) {
    // `content` is a deprecated getter alias of `parts`.
    const { content: _content, ...message } = result.message;
    result.message = message;
  }
  const parts = result.message?.parts ?? [];
  result.text = parts.filter((part) => part.type === 'text').map((part) => part.text).join('');
  for (const part of parts) {
    if (part.type !== 'tool-call') continue;
    const done = part.state === 'result';
    result.tools[part.toolCallId] = {
      // Mapped onto the AI SDK's tool part states; rawState is assistant-stream's own.
      state: done ? (part.isError ? 'output-error' : 'output-available') : part.state === 'call' ? 'input-available' : 'input-streaming',
      rawState: part.state,
      toolName: part.toolName,
      input: part.args ?? null,
      output: done && !part.isError ? (part.result ?? null) : null,
      errorText: done && part.isError ? (typeof part.result === 'string' ? part.result : JSON.stringify(part.result)) : null,
      approval: null,
    };
  }
}

// Reads the raw SSE bytes next to UIMessageStreamDecoder and warns, once per
// type, about chunks that decoder drops silently.
async function reportIgnoredUiChunks(stream, signal) {
  const reported = new Set();
  const onData = (data) => {
    let chunk;
    try {
      chunk = JSON.parse(data);
    } catch {
      return; // the decoder warns about these itself
    }
    const type = chunk?.type;
    if (typeof type !== 'string' || type.startsWith('data-') || ASSISTANT_STREAM_UI_TYPES.has(type)) return;
    if (reported.has(type)) return;
    reported.add(type);
    result.warnings.push(`check-stream: assistant-stream UIMessageStreamDecoder ignored chunk type "${type}"`);
  };
  let buffer = '';
  let dataLines = [];
  const onLine = (line) => {
    if (line === '') {
      if (dataLines.length > 0) onData(dataLines.join('\n'));
      dataLines = [];
    } else if (line.startsWith('data:')) {
      dataLines.push(line.slice(line.startsWith('data: ') ? 6 : 5));
    }
  };
  try {
    for await (const text of stream.pipeThrough(new TextDecoderStream(), { signal })) {
      buffer += text;
      const lines = buffer.split(/\r\n|\n|\r(?!$)/);
      buffer = lines.pop();
      for (const line of lines) onLine(line);
    }
  } catch {
    // the decoder side reports transport errors
  }
}
