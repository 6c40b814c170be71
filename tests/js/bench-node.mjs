#!/usr/bin/env node
// The Node side of agent-server's relay benchmark
// (crates/agent-server/benches/relay.rs): the AI SDK's own
// `streamText(...).toUIMessageStreamResponse()` serving the same paced token
// stream from a mock model that agent-server relays in that benchmark.
//
//   node bench-node.mjs [--port N] [--deltas K] [--interval-ms I]
//                       [--mode response|pipe]
//
// POST (any path) with a useChat body ({id, messages, trigger}): the handler
// does what an AI SDK route handler does,
//
//   const { messages } = JSON.parse(body);
//   const result = streamText({ model, messages: await convertToModelMessages(messages) });
//   return result.toUIMessageStreamResponse();
//
// and writes that Web `Response` to node:http (status, headers, then the body
// chunk by chunk, flushing each: what a Node adapter such as @hono/node-server
// does). `--mode pipe` uses the SDK's Node path instead,
// `result.pipeUIMessageStreamToResponse(res)`.
//
// The model is `MockLanguageModelV4` from `ai7/test`. Its `doStream` returns a
// ReadableStream that emits K `text-delta`s, the i-th due at start + i*I ms,
// each text `t<CLOCK_MONOTONIC ns, 20 digits> ` (22 bytes) taken when the delta
// is enqueued, then `text-end` and `finish`. `process.hrtime.bigint()` is
// libuv's uv_hrtime, CLOCK_MONOTONIC on Linux: the same clock the Rust load
// generator reads, so `arrival - embedded` is the added latency per delta.
//
// On start it prints one line, `listening <port> <hrtime ns>`, and serves until
// killed (SIGTERM/SIGINT end it).

import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { streamText, convertToModelMessages } from 'ai7';
import { MockLanguageModelV4 } from 'ai7/test';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    deltas: { type: 'string', default: '200' },
    'interval-ms': { type: 'string', default: '20' },
    mode: { type: 'string', default: 'response' },
  },
});
const port = Number(args.port);
const deltas = Number(args.deltas);
const intervalMs = Number(args['interval-ms']);
const mode = args.mode;
if (!Number.isInteger(deltas) || deltas < 1 || !(intervalMs >= 0) || !['response', 'pipe'].includes(mode)) {
  console.error('usage: bench-node.mjs [--port N] [--deltas K>=1] [--interval-ms I>=0] [--mode response|pipe]');
  process.exit(2);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const stamp = () => `t${process.hrtime.bigint().toString().padStart(20, '0')} `;
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: deltas, text: deltas, reasoning: undefined },
};

/** One paced model turn: text-start, K stamped deltas on schedule, text-end, finish. */
function pacedStream() {
  const start = performance.now();
  let next = 0; // index of the next part to emit after text-start
  return new ReadableStream({
    start(controller) {
      controller.enqueue({ type: 'stream-start', warnings: [] });
      controller.enqueue({ type: 'text-start', id: 't0' });
    },
    async pull(controller) {
      if (next < deltas) {
        const wait = start + next * intervalMs - performance.now();
        if (wait > 0) await sleep(wait);
        next += 1;
        controller.enqueue({ type: 'text-delta', id: 't0', delta: stamp() });
        return;
      }
      controller.enqueue({ type: 'text-end', id: 't0' });
      controller.enqueue({
        type: 'finish',
        finishReason: { unified: 'stop', raw: 'stop' },
        usage,
      });
      controller.close();
    },
  });
}

const model = new MockLanguageModelV4({
  provider: 'bench',
  modelId: 'paced',
  doStream: async () => ({ stream: pacedStream() }),
});

/** Writes a Web Response to a node:http response, flushing each chunk. */
async function writeResponse(response, res) {
  const headers = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  res.writeHead(response.status, headers);
  if (response.body == null) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  res.once('close', () => {
    if (!res.writableFinished) reader.cancel(new Error('client disconnected')).catch(() => {});
  });
  for (;;) {
    const { done, value } = await reader.read();
    if (done || res.destroyed) break;
    if (!res.write(value)) await new Promise((resolve) => res.once('drain', resolve));
  }
  res.end();
}

const server = createServer(async (req, res) => {
  try {
    const pieces = [];
    for await (const piece of req) pieces.push(piece);
    const { messages } = JSON.parse(Buffer.concat(pieces).toString('utf8'));
    const result = streamText({ model, messages: await convertToModelMessages(messages) });
    if (mode === 'pipe') {
      result.pipeUIMessageStreamToResponse(res);
    } else {
      await writeResponse(result.toUIMessageStreamResponse(), res);
    }
  } catch (error) {
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
    res.end(String(error));
  }
});
server.keepAliveTimeout = 60_000;
server.headersTimeout = 60_000;
server.requestTimeout = 0;

server.listen({ port, host: '127.0.0.1', backlog: 4096 }, () => {
  console.log(`listening ${server.address().port} ${process.hrtime.bigint()}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
