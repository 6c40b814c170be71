#!/usr/bin/env node
// Self-test for check-stream.mjs: replays canned streams from
// fixture-server.mjs and runs the CLI with every parser against each, the way
// the Rust tests run it against agent-server.
//
// UI streams are serialized by the AI SDK itself (ai 7's createUIMessageStream
// + JsonToSseTransformStream, and streamText + toUIMessageStream with a mock
// model for the "sdk-*" cases), so the chunk shapes are the SDK's own.
// Run: node selftest.mjs   (ends with "N passed, N failed")

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { fileURLToPath } from 'node:url';
import * as ai6 from 'ai6';
import { MockLanguageModelV3 } from 'ai6/test';
import * as ai7 from 'ai7';
import { MockLanguageModelV4 } from 'ai7/test';
import { startFixtureServer } from './fixture-server.mjs';
import { runScript } from './lib/selftest.mjs';

const CHECK_STREAM = fileURLToPath(new URL('./check-stream.mjs', import.meta.url));
const PARSERS = ['ai6', 'ai7', 'assistant-stream'];
const UI_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  'x-vercel-ai-ui-message-stream': 'v1',
};
const DATA_HEADERS = { 'content-type': 'text/plain; charset=utf-8', 'x-vercel-ai-data-stream': 'v1' };
const CONCURRENCY = 4;

// ---------------------------------------------------------------- streams

/** SSE bytes for `chunks`, written through ai 7's own UI message stream. */
async function sse(chunks) {
  const stream = ai7
    .createUIMessageStream({
      execute({ writer }) {
        for (const chunk of chunks) writer.write(chunk);
      },
    })
    .pipeThrough(new ai7.JsonToSseTransformStream());
  return collect(stream);
}

async function collect(stream) {
  const pieces = [];
  for await (const piece of stream) pieces.push(typeof piece === 'string' ? piece : new TextDecoder().decode(piece));
  return pieces;
}

/** Hand-written SSE for shapes createUIMessageStream would alter (or refuse). */
function rawSse(chunks, { done = true } = {}) {
  const pieces = chunks.map((chunk) => `data: ${typeof chunk === 'string' ? chunk : JSON.stringify(chunk)}\n\n`);
  if (done) pieces.push('data: [DONE]\n\n');
  return pieces;
}

function dataStream(lines) {
  return lines.map(([code, value]) => `${code}:${JSON.stringify(value)}\n`);
}

const start = (extra = {}) => ({ type: 'start', messageId: 'msg-1', ...extra });
const text = (id, ...deltas) => [
  { type: 'text-start', id },
  ...deltas.map((delta) => ({ type: 'text-delta', id, delta })),
  { type: 'text-end', id },
];
const step = (...chunks) => [{ type: 'start-step' }, ...chunks.flat(), { type: 'finish-step' }];
const finish = (finishReason = 'stop', extra = {}) => ({ type: 'finish', finishReason, ...extra });
const toolInput = (toolCallId = 'call-1', extra = {}) => [
  { type: 'tool-input-start', toolCallId, toolName: 'get_weather', ...extra },
  { type: 'tool-input-delta', toolCallId, inputTextDelta: '{"city":' },
  { type: 'tool-input-delta', toolCallId, inputTextDelta: '"Paris"}' },
  { type: 'tool-input-available', toolCallId, toolName: 'get_weather', input: { city: 'Paris' }, ...extra },
];

/** What streamText + toUIMessageStream emit for a tool call followed by an answer. */
async function sdkStream(version) {
  const usage = { inputTokens: { total: 3, noCache: 3 }, outputTokens: { total: 10, text: 10 } };
  const steps = [
    [
      { type: 'tool-call', toolCallId: 'call-1', toolName: 'get_weather', input: '{"city":"Paris"}' },
      { type: 'finish', finishReason: { unified: 'tool-calls', raw: undefined }, usage },
    ],
    [
      { type: 'text-start', id: 't1' },
      { type: 'text-delta', id: 't1', delta: 'It is 21°C.' },
      { type: 'text-end', id: 't1' },
      { type: 'finish', finishReason: { unified: 'stop', raw: undefined }, usage },
    ],
  ];
  const ai = version === 6 ? ai6 : ai7;
  const Mock = version === 6 ? MockLanguageModelV3 : MockLanguageModelV4;
  let call = 0;
  const model = new Mock({
    doStream: async () => ({ stream: ai.simulateReadableStream({ chunks: steps[call++], chunkDelayInMs: null }) }),
  });
  const tools = {
    get_weather: ai.tool({
      description: 'Current weather',
      inputSchema: ai.jsonSchema({ type: 'object', properties: { city: { type: 'string' } } }),
      execute: async () => ({ tempC: 21 }),
    }),
  };
  const result = ai.streamText({ model, tools, prompt: 'weather?', stopWhen: ai.stepCountIs(2) });
  const stream =
    version === 6
      ? result.toUIMessageStream({ generateMessageId: () => 'msg-1' }).pipeThrough(new ai.JsonToSseTransformStream())
      : ai
          .toUIMessageStream({ stream: result.stream, responseMessageId: 'msg-1', originalMessages: [] })
          .pipeThrough(new ai.JsonToSseTransformStream());
  return collect(stream);
}

// ------------------------------------------------------------- assertions

/** Assertion helper over one check-stream result; collects failure texts. */
function expectOn(out) {
  const problems = [];
  const check = (cond, what) => {
    if (!cond) problems.push(what);
  };
  const api = {
    problems,
    ok() {
      check(out.ok === true && out.error === null, `expected ok, got error ${JSON.stringify(out.error)}`);
      return api;
    },
    clean() {
      api.ok();
      check(out.warnings.length === 0, `expected no warnings, got ${JSON.stringify(out.warnings)}`);
      return api;
    },
    fails(pattern) {
      check(out.ok === false, 'expected ok=false');
      check(pattern.test(out.error ?? ''), `expected error matching ${pattern}, got ${JSON.stringify(out.error)}`);
      return api;
    },
    warns(pattern) {
      check(out.warnings.some((w) => pattern.test(w)), `expected a warning matching ${pattern}, got ${JSON.stringify(out.warnings)}`);
      return api;
    },
    text(expected) {
      check(out.text === expected, `expected text ${JSON.stringify(expected)}, got ${JSON.stringify(out.text)}`);
      return api;
    },
    chunks(expected) {
      check(isDeepStrictEqual(out.chunks, expected), `expected chunks ${JSON.stringify(expected)}, got ${JSON.stringify(out.chunks)}`);
      return api;
    },
    tool(id, subset) {
      const tool = out.tools[id];
      check(tool !== undefined, `expected tool ${id}, got tools ${JSON.stringify(out.tools)}`);
      for (const [key, value] of Object.entries(tool === undefined ? {} : subset)) {
        check(isDeepStrictEqual(tool[key], value), `tool ${id}: expected ${key}=${JSON.stringify(value)}, got ${JSON.stringify(tool[key])}`);
      }
      return api;
    },
    noTools() {
      check(Object.keys(out.tools).length === 0, `expected no tools, got ${JSON.stringify(out.tools)}`);
      return api;
    },
    that(cond, what) {
      check(cond, what);
      return api;
    },
  };
  return api;
}

const isAi = (parser) => parser !== 'assistant-stream';
const ignoredBy = (type) => new RegExp(`UIMessageStreamDecoder ignored chunk type "${type}"`);

// ------------------------------------------------------------------ cases

async function buildCases() {
  const fixtures = {};
  const cases = [];
  /** One fixture; `expect(e, parser, out)` runs for every parser in `parsers`. */
  const add = (name, fixture, expect, { parsers = PARSERS, protocol = 'ui', args = [], body, after } = {}) => {
    fixtures[name] = fixture;
    for (const parser of parsers) cases.push({ name, parser, protocol, args, body, expect, after });
  };
  const ui = async (chunks) => ({ headers: UI_HEADERS, body: await sse(chunks) });
  const uiRaw = (chunks, options) => ({ headers: UI_HEADERS, body: rawSse(chunks, options) });

  add('ui-text', await ui([start(), ...step(text('t1', 'Hello', ', world!')), finish()]), (e, parser, out) => {
    e.clean().text('Hello, world!');
    if (isAi(parser)) {
      e.chunks(['start', 'start-step', 'text-start', 'text-delta', 'text-delta', 'text-end', 'finish-step', 'finish']);
      e.that(out.message.id === 'msg-1' && out.message.role === 'assistant', 'message id/role');
    } else {
      e.chunks(['step-start', 'step-start', 'part-start:text', 'text-delta', 'text-delta', 'part-finish', 'step-finish', 'message-finish']);
      e.that(out.message.status.type === 'complete', `status ${JSON.stringify(out.message.status)}`);
    }
  });

  // SSE comments, as keep-alive pings send them, are skipped by every parser.
  add('ui-keepalive-comments', { headers: UI_HEADERS, body: (await sse([start(), ...text('t1', 'a', 'b'), finish()])).flatMap((piece) => [piece, ': keep-alive\n\n']) }, (e) =>
    e.clean().text('ab'),
  );

  add('ui-minimal-shapes', uiRaw([{ type: 'start' }, ...text('t1', 'Hi'), { type: 'finish' }]), (e) => e.clean().text('Hi'));

  add(
    'ui-metadata',
    await ui([
      start({ messageMetadata: { model: 'm1' } }),
      { type: 'message-metadata', messageMetadata: { step: 1 } },
      ...step(text('t1', 'Hi')),
      finish('stop', { messageMetadata: { usage: { outputTokens: 2 } } }),
    ]),
    (e, parser, out) => {
      if (isAi(parser)) {
        e.clean().text('Hi');
        e.that(
          isDeepStrictEqual(out.message.metadata, { model: 'm1', step: 1, usage: { outputTokens: 2 } }),
          `metadata ${JSON.stringify(out.message.metadata)}`,
        );
      } else {
        e.ok().text('Hi').warns(ignoredBy('message-metadata'));
      }
    },
  );

  add(
    'ui-tool',
    await ui([
      start(),
      ...step(toolInput(), { type: 'tool-output-available', toolCallId: 'call-1', output: { tempC: 21 } }),
      ...step(text('t2', 'It is 21°C.')),
      finish(),
    ]),
    (e, parser) => {
      e.clean().text('It is 21°C.');
      e.tool('call-1', { state: 'output-available', toolName: 'get_weather', input: { city: 'Paris' }, output: { tempC: 21 }, errorText: null });
      if (isAi(parser)) e.tool('call-1', { dynamic: false });
    },
  );

  add(
    'ui-tool-dynamic',
    await ui([
      start(),
      ...step(toolInput('call-1', { dynamic: true }), { type: 'tool-output-available', toolCallId: 'call-1', output: 'sunny', dynamic: true }),
      finish(),
    ]),
    (e, parser) => {
      e.clean().tool('call-1', { state: 'output-available', toolName: 'get_weather', output: 'sunny' });
      if (isAi(parser)) e.tool('call-1', { dynamic: true });
    },
  );

  // `dynamic` must agree between tool-input-start and tool-input-available,
  // else the AI SDK keeps a dynamic-tool part and adds a second, static one.
  add(
    'ui-tool-dynamic-mismatch',
    uiRaw([
      start(),
      { type: 'tool-input-start', toolCallId: 'call-1', toolName: 'get_weather', dynamic: true },
      { type: 'tool-input-available', toolCallId: 'call-1', toolName: 'get_weather', input: {} },
      finish(),
    ]),
    (e, parser, out) => {
      if (isAi(parser)) {
        e.ok().warns(/several tool parts share toolCallId "call-1"/);
        e.that(isDeepStrictEqual(out.message.parts.map((part) => part.type), ['dynamic-tool', 'tool-get_weather']), `parts ${JSON.stringify(out.message.parts)}`);
      } else {
        e.clean().tool('call-1', { state: 'input-available' });
      }
    },
  );

  add(
    'ui-tool-without-input-start',
    await ui([
      start(),
      ...step(
        { type: 'tool-input-available', toolCallId: 'call-1', toolName: 'get_weather', input: { city: 'Paris' } },
        { type: 'tool-output-available', toolCallId: 'call-1', output: { tempC: 21 } },
      ),
      finish('tool-calls'),
    ]),
    (e) => e.clean().tool('call-1', { state: 'output-available', input: { city: 'Paris' }, output: { tempC: 21 } }),
  );

  add(
    'ui-tool-error',
    await ui([start(), ...step(toolInput(), { type: 'tool-output-error', toolCallId: 'call-1', errorText: 'weather service down' }), finish('tool-calls')]),
    (e) => e.clean().tool('call-1', { state: 'output-error', errorText: 'weather service down', output: null, input: { city: 'Paris' } }),
  );

  add(
    'ui-tool-input-error',
    await ui([
      start(),
      ...step({ type: 'tool-input-error', toolCallId: 'call-1', toolName: 'get_weather', input: '{"city":', errorText: 'Invalid JSON' }),
      finish('tool-calls'),
    ]),
    (e) => e.clean().tool('call-1', { state: 'output-error', errorText: 'Invalid JSON' }),
  );

  add(
    'ui-approval-request',
    await ui([
      start(),
      ...step(toolInput(), { type: 'tool-approval-request', approvalId: 'appr-1', toolCallId: 'call-1' }),
      finish('tool-calls'),
    ]),
    (e, parser) => {
      if (isAi(parser)) e.clean().tool('call-1', { state: 'approval-requested', approval: { id: 'appr-1' }, input: { city: 'Paris' } });
      else e.ok().warns(ignoredBy('tool-approval-request')).tool('call-1', { state: 'input-available', approval: null });
    },
  );

  add(
    'ui-output-denied',
    await ui([
      start(),
      ...step(
        toolInput(),
        { type: 'tool-approval-request', approvalId: 'appr-1', toolCallId: 'call-1' },
        { type: 'tool-output-denied', toolCallId: 'call-1' },
      ),
      finish('tool-calls'),
    ]),
    (e, parser) => {
      if (isAi(parser)) e.clean().tool('call-1', { state: 'output-denied', approval: { id: 'appr-1' } });
      else e.ok().warns(ignoredBy('tool-output-denied')).tool('call-1', { state: 'input-available' });
    },
  );

  // The request after addToolApprovalResponse: useChat sends the assistant
  // message back and continues it; the stream refers to its tool call.
  const approvalBody = (approved) =>
    JSON.stringify({
      id: 'chat-1',
      trigger: 'submit-message',
      messages: [
        { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'weather?' }] },
        {
          id: 'msg-1',
          role: 'assistant',
          parts: [
            { type: 'step-start' },
            { type: 'tool-get_weather', toolCallId: 'call-1', state: 'approval-responded', input: { city: 'Paris' }, approval: { id: 'appr-1', approved } },
          ],
        },
      ],
    });
  add(
    'ui-denied-continuation',
    await ui([start(), { type: 'tool-output-denied', toolCallId: 'call-1' }, ...step(text('t1', 'Not checking.')), finish()]),
    (e, parser, out) => {
      if (isAi(parser)) {
        e.clean().text('Not checking.').tool('call-1', { state: 'output-denied', approval: { id: 'appr-1', approved: false } });
        e.that(out.message.id === 'msg-1', `continued message id ${out.message.id}`);
      } else {
        e.ok().text('Not checking.').warns(ignoredBy('tool-output-denied')).noTools();
      }
    },
    { body: approvalBody(false) },
  );

  // readUIMessageStream starts a fresh message when `start` names another id.
  add(
    'ui-continuation-new-message-id',
    await ui([start({ messageId: 'msg-2' }), { type: 'tool-output-available', toolCallId: 'call-1', output: { tempC: 21 } }, finish()]),
    (e, parser) => {
      if (isAi(parser)) e.fails(/No tool invocation found for tool call ID "call-1"/);
      else e.clean().noTools();
    },
    { body: approvalBody(true) },
  );

  add(
    'ui-reasoning',
    await ui([start(), ...step([{ type: 'reasoning-start', id: 'r1' }, { type: 'reasoning-delta', id: 'r1', delta: 'Thinking.' }, { type: 'reasoning-end', id: 'r1' }], text('t1', 'Done.')), finish()]),
    (e, parser, out) => {
      e.clean().text('Done.');
      const reasoning = out.message.parts.find((part) => part.type === 'reasoning');
      e.that(reasoning?.text === 'Thinking.', `reasoning part ${JSON.stringify(reasoning)}`);
      e.that(out.message.parts.at(-1).type === 'text', 'text after reasoning');
    },
  );

  add('ui-error-chunk', await ui([start(), ...step(text('t1', 'Partial'), { type: 'error', errorText: 'model blew up' }), finish('error')]), (e, parser, out) => {
    e.fails(/^model blew up$/).text('Partial');
    if (isAi(parser)) e.that(out.chunks.at(-1) === 'finish', 'chunks after the error chunk are still processed');
    else e.that(out.message.status.type === 'incomplete' && out.message.status.reason === 'error', `status ${JSON.stringify(out.message.status)}`);
  });

  add('ui-data-part', await ui([start(), { type: 'data-progress', id: 'p1', data: { pct: 50 } }, ...step(text('t1', 'ok')), finish()]), (e, parser, out) => {
    e.clean().text('ok');
    if (isAi(parser)) e.that(out.message.parts.some((part) => part.type === 'data-progress' && part.data.pct === 50), 'data-progress part');
    else e.that(out.message.metadata.unstable_data.some((item) => item.name === 'progress'), 'unstable_data entry');
  });

  // Chunk types ai 7 added: ai 6's schema rejects them.
  const ai7Only = {
    'tool-approval-response': [
      ...toolInput(),
      { type: 'tool-approval-request', approvalId: 'appr-1', toolCallId: 'call-1', isAutomatic: true },
      { type: 'tool-approval-response', approvalId: 'appr-1', approved: false, reason: 'policy' },
      { type: 'tool-output-denied', toolCallId: 'call-1' },
    ],
    custom: [{ type: 'custom', kind: 'openai.compaction' }],
    'reasoning-file': [{ type: 'reasoning-file', url: 'data:image/png;base64,AA==', mediaType: 'image/png' }],
    'reset-step': [{ type: 'reset-step' }],
    'steering-message': [{ type: 'steering-message', id: 's1', parts: [{ type: 'text', text: 'also this' }] }],
  };
  for (const [type, chunks] of Object.entries(ai7Only)) {
    add(`ui-ai7-only-${type}`, await ui([start(), ...step(chunks), finish()]), (e, parser, out) => {
      if (parser === 'ai6') e.fails(/Type validation failed/);
      else if (parser === 'ai7') e.clean();
      else e.ok().warns(ignoredBy(type));
      if (parser === 'ai7' && type === 'tool-approval-response') {
        e.tool('call-1', { state: 'output-denied', approval: { id: 'appr-1', isAutomatic: true, approved: false, reason: 'policy' } });
      }
    });
  }
  add('ui-ai7-only-finish-interrupted', await ui([start(), ...step(text('t1', 'x')), finish('interrupted')]), (e, parser) => {
    if (parser === 'ai6') e.fails(/Type validation failed/);
    else e.clean();
  });

  add('ui-unknown-chunk-type', uiRaw([start(), { type: 'bogus', x: 1 }, ...text('t1', 'x'), finish()]), (e, parser) => {
    if (isAi(parser)) e.fails(/Type validation failed/);
    else e.ok().text('x').warns(ignoredBy('bogus'));
  });

  add('ui-invalid-json', uiRaw([start(), '{not json', ...text('t1', 'x'), finish()]), (e, parser) => {
    if (isAi(parser)) e.fails(/JSON parsing failed/);
    else e.ok().text('x').warns(/^console\.warn: Dropped invalid UIMessageStream chunk: \{not json/);
  });

  add('ui-text-delta-without-start', uiRaw([start(), { type: 'text-delta', id: 't1', delta: 'x' }, finish()]), (e, parser) => {
    if (isAi(parser)) e.fails(/Received text-delta for missing text part with ID "t1"/);
    else e.clean().text('x');
  });

  add('ui-no-done-marker', uiRaw([start(), ...text('t1', 'x'), finish()], { done: false }), (e, parser) => {
    if (isAi(parser)) e.clean().text('x');
    else e.fails(/Stream ended abruptly without receiving \[DONE\] marker/);
  });

  add('ui-missing-protocol-header', { headers: { 'content-type': 'text/event-stream' }, body: await sse([start(), ...text('t1', 'x'), finish()]) }, (e) =>
    e.fails(/expected response header x-vercel-ai-ui-message-stream: v1, got none/).text('x'),
  );

  add('ui-http-500', { status: 500, headers: { 'content-type': 'text/plain' }, body: 'boom' }, (e, parser, out) =>
    e.fails(/^HTTP 500: boom$/).that(out.status === 500, `status ${out.status}`),
  );

  add('sdk-ai7-streamtext', { headers: ai7.UI_MESSAGE_STREAM_HEADERS, body: await sdkStream(7) }, (e) =>
    e.clean().text('It is 21°C.').tool('call-1', { state: 'output-available', toolName: 'get_weather', input: { city: 'Paris' }, output: { tempC: 21 } }),
  );
  add('sdk-ai6-streamtext', { headers: ai7.UI_MESSAGE_STREAM_HEADERS, body: await sdkStream(6) }, (e) =>
    e.clean().text('It is 21°C.').tool('call-1', { state: 'output-available', toolName: 'get_weather', input: { city: 'Paris' }, output: { tempC: 21 } }),
  );

  // Cancellation: ten deltas 150 ms apart, aborted after 700 ms.
  const slow = await sse([start(), { type: 'text-start', id: 't1' }, ...Array.from({ length: 10 }, (_, i) => ({ type: 'text-delta', id: 't1', delta: `${i}` })), { type: 'text-end', id: 't1' }, finish()]);
  add(
    'ui-abort',
    { headers: UI_HEADERS, body: slow, delayMs: 150 },
    (e, parser, out) =>
      e
        .clean()
        .that(out.aborted === true, 'aborted')
        .that(out.text.length > 0 && out.text.length < 10, `partial text ${JSON.stringify(out.text)}`),
    { args: ['--abort-after-ms', '700'], after: (request, e) => e.that(request.clientClosedEarly, 'server saw the client go away') },
  );

  add('ui-request', await ui([start(), ...text('t1', 'x'), finish()]), (e) => e.clean(), {
    parsers: ['ai7'],
    args: ['--header', 'x-test: yes', '--header', 'Authorization: Bearer t0k'],
    body: '{"id":"chat-9","messages":[]}',
    after: (request, e) =>
      e
        .that(request.body === '{"id":"chat-9","messages":[]}', `request body ${request.body}`)
        .that(request.headers['x-test'] === 'yes' && request.headers.authorization === 'Bearer t0k', 'custom headers sent')
        .that(request.headers['content-type'] === 'application/json', 'content-type'),
  });
  add('ui-default-request', await ui([start(), ...text('t1', 'x'), finish()]), (e) => e.clean(), {
    parsers: ['assistant-stream'],
    after: (request, e) =>
      e.that(
        request.method === 'POST' &&
          isDeepStrictEqual(JSON.parse(request.body), {
            id: 'chat-1',
            messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
            trigger: 'submit-message',
          }),
        `default request ${request.method} ${request.body}`,
      ),
  });

  // ------------------------------------------------ AI SDK 4 data stream
  const data = { protocol: 'data', parsers: ['assistant-stream'] };
  const usage = { promptTokens: 3, completionTokens: 5 };
  add(
    'data-text-tool',
    {
      headers: DATA_HEADERS,
      body: dataStream([
        ['f', { messageId: 'msg-1' }],
        ['0', 'Checking. '],
        ['9', { toolCallId: 'call-1', toolName: 'get_weather', args: { city: 'Paris' } }],
        ['a', { toolCallId: 'call-1', result: { tempC: 21 } }],
        ['e', { finishReason: 'tool-calls', usage, isContinued: false }],
        ['f', { messageId: 'msg-1' }],
        ['0', 'It is 21°C.'],
        ['e', { finishReason: 'stop', usage, isContinued: false }],
        ['d', { finishReason: 'stop', usage }],
      ]),
    },
    (e, parser, out) => {
      e.clean().text('Checking. It is 21°C.');
      e.tool('call-1', { state: 'output-available', rawState: 'result', toolName: 'get_weather', input: { city: 'Paris' }, output: { tempC: 21 } });
      e.that(out.message.status.type === 'complete', `status ${JSON.stringify(out.message.status)}`);
      for (const type of ['step-start', 'part-start:text', 'part-start:tool-call', 'result', 'step-finish', 'message-finish']) {
        e.that(out.chunks.includes(type), `chunks include ${type}: ${JSON.stringify(out.chunks)}`);
      }
    },
    data,
  );
  add(
    'data-streamed-tool-error',
    {
      headers: DATA_HEADERS,
      body: dataStream([
        ['b', { toolCallId: 'call-1', toolName: 'get_weather' }],
        ['c', { toolCallId: 'call-1', argsTextDelta: '{"city":' }],
        ['c', { toolCallId: 'call-1', argsTextDelta: '"Paris"}' }],
        ['a', { toolCallId: 'call-1', result: 'weather service down', isError: true }],
        ['d', { finishReason: 'tool-calls', usage }],
      ]),
    },
    (e) => e.clean().tool('call-1', { state: 'output-error', rawState: 'result', input: { city: 'Paris' }, errorText: 'weather service down', output: null }),
    data,
  );
  add('data-reasoning', { headers: DATA_HEADERS, body: dataStream([['g', 'Thinking.'], ['0', 'Done.'], ['d', { finishReason: 'stop', usage }]]) }, (e, parser, out) =>
    e.clean().text('Done.').that(out.message.parts[0]?.type === 'reasoning' && out.message.parts[0].text === 'Thinking.', 'reasoning part'),
    data,
  );
  add('data-error', { headers: DATA_HEADERS, body: dataStream([['0', 'Partial'], ['3', 'model blew up'], ['d', { finishReason: 'error', usage }]]) }, (e, parser, out) =>
    e.fails(/^model blew up$/).text('Partial').that(out.message.status.reason === 'error', `status ${JSON.stringify(out.message.status)}`),
    data,
  );
  add('data-unknown-code', { headers: DATA_HEADERS, body: dataStream([['0', 'x'], ['x', {}]]) }, (e) => e.fails(/unsupported chunk type: x/), data);
  add('data-missing-protocol-header', { headers: { 'content-type': 'text/plain' }, body: dataStream([['0', 'x'], ['d', { finishReason: 'stop' }]]) }, (e) =>
    e.fails(/expected response header x-vercel-ai-data-stream: v1, got none/).text('x'),
    data,
  );
  add(
    'data-abort',
    { headers: DATA_HEADERS, body: dataStream(Array.from({ length: 10 }, (_, i) => ['0', `${i}`])), delayMs: 150 },
    (e, parser, out) => e.clean().that(out.aborted === true, 'aborted').that(out.text.length > 0 && out.text.length < 10, `partial text ${JSON.stringify(out.text)}`),
    { ...data, args: ['--abort-after-ms', '700'], after: (request, e) => e.that(request.clientClosedEarly, 'server saw the client go away') },
  );
  add('data-with-ai-sdk', { headers: DATA_HEADERS, body: dataStream([['0', 'x']]) }, (e, parser, out) => e.fails(/^unsupported$/).that(out.status === null, 'no request made'), {
    protocol: 'data',
    parsers: ['ai6', 'ai7'],
  });

  return { fixtures, cases };
}

// ----------------------------------------------------------------- runner

async function runCase(c, server, dir, index) {
  const args = ['--parser', c.parser, '--protocol', c.protocol, '--url', `${server.url}/${c.name}?protocol=${c.protocol}`, ...c.args];
  if (c.body !== undefined) {
    const file = join(dir, `body-${index}.json`);
    await writeFile(file, c.body);
    args.push('--body-file', file);
  }
  const requestsBefore = new Set(server.requests);
  const { code, stdout, stderr } = await runScript(CHECK_STREAM, args);
  const lines = stdout.split('\n').filter(Boolean);
  if (lines.length !== 1) return { problems: [`expected one stdout line, got ${lines.length}: ${stdout}${stderr}`] };
  const out = JSON.parse(lines[0]);
  const e = expectOn(out);
  e.that(code === (out.ok ? 0 : 1), `exit code ${code} for ok=${out.ok}`);
  for (const key of ['ok', 'status', 'error', 'warnings', 'chunks', 'message', 'tools', 'text', 'aborted']) {
    e.that(key in out, `output lacks ${key}`);
  }
  c.expect(e, c.parser, out);
  if (c.after) {
    await new Promise((resolve) => setTimeout(resolve, 200)); // let the server notice a disconnect
    const request = server.requests.find((r) => !requestsBefore.has(r) && r.name === c.name);
    if (request === undefined) e.that(false, 'server saw no request');
    else c.after(request, e);
  }
  return { problems: e.problems, out };
}

const { fixtures, cases } = await buildCases();
const server = await startFixtureServer(fixtures);
const dir = await mkdtemp(join(tmpdir(), 'check-stream-selftest-'));
let passed = 0;
let failed = 0;
try {
  // Cases that inspect the server's request log run alone, the rest in parallel.
  const solo = cases.filter((c) => c.after);
  const pooled = cases.filter((c) => !c.after);
  const report = (c, { problems, out }) => {
    const label = `${c.name} [${c.parser}]`;
    if (problems.length === 0) {
      passed++;
      console.log(`ok - ${label}`);
    } else {
      failed++;
      console.log(`not ok - ${label}\n    ${problems.join('\n    ')}`);
      if (process.env.SELFTEST_VERBOSE && out) console.log(`    output: ${JSON.stringify(out)}`);
    }
  };
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < pooled.length) {
        const index = next++;
        report(pooled[index], await runCase(pooled[index], server, dir, index));
      }
    }),
  );
  for (const [i, c] of solo.entries()) report(c, await runCase(c, server, dir, pooled.length + i));
} finally {
  await server.close();
  await rm(dir, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exitCode = failed === 0 ? 0 : 1;
