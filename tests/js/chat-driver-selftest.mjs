#!/usr/bin/env node
// Self-test for chat-driver.mjs. It serves the AI SDK's OWN server side
// in-process (streamText with a mock model, answered with
// toUIMessageStreamResponse() for ai 6/7 and toDataStreamResponse() for
// ai 4) and runs the driver against it as a child process, the way the Rust
// tests run it against agent-server.
//
// Routes (127.0.0.1, random port):
//   POST /v6/api/chat, /v7/api/chat   ai 6 / ai 7 streamText → UI message stream
//   POST /v4/api/chat                 ai 4 streamText → data stream
//   GET  /vN/api/chat/:id/stream      204, except for chat ids starting with
//                                     "resumable": while that chat's last
//                                     response is still streaming, a replay of
//                                     it from the start (like the
//                                     resumable-stream package), else 204
//   POST /vN/api/bad                  400 "bad request"
//
// The mock model answers from the prompt: the last user text "slow" → 20
// words 40 ms apart; "weather" → a get_weather call (needs approval, runs on
// the server); "ask" → an ask_user call (client-side, no execute); "hang" →
// a stream that never ends; anything else → "You said: <text>". After a tool
// result it says "Tool said: <output>", and when the prompt ends with an
// assistant message (a continuation) it says "Continued.".
//
// Run: node chat-driver-selftest.mjs   (ends with "N passed, N failed";
// SELFTEST_VERBOSE=1 prints the driver output of failing cases, =2 of all)

import { createServer } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { fileURLToPath } from 'node:url';
import * as ai4 from 'ai4';
import { MockLanguageModelV1 } from 'ai4/test';
import * as ai6 from 'ai6';
import { MockLanguageModelV3 } from 'ai6/test';
import * as ai7 from 'ai7';
import { MockLanguageModelV4 } from 'ai7/test';
import { listenLocally, runScript } from './lib/selftest.mjs';

const DRIVER = fileURLToPath(new URL('./chat-driver.mjs', import.meta.url));
const CONCURRENCY = 3;
const SLOW_WORDS = Array.from({ length: 20 }, (_, i) => `w${i} `);
const SLOW_TEXT = SLOW_WORDS.join('');

// ------------------------------------------------------------ mock model

/** What the mock model does for a prompt (v1 and v3/v4 prompts alike). */
function decide(prompt) {
  const last = prompt.at(-1);
  if (last?.role === 'tool') {
    const outputs = last.content.filter((part) => part.type === 'tool-result').map((part) => part.output ?? part.result);
    return { kind: 'text', deltas: [`Tool said: ${JSON.stringify(outputs.at(-1) ?? null)}`] };
  }
  if (last?.role === 'assistant') return { kind: 'text', deltas: ['Continued.'] };
  const content = typeof last?.content === 'string' ? [{ type: 'text', text: last.content }] : (last?.content ?? []);
  const said = content.filter((part) => part.type === 'text').map((part) => part.text).join('');
  if (said.includes('hang')) return { kind: 'hang' };
  if (said.includes('slow')) return { kind: 'text', deltas: SLOW_WORDS, delayMs: 40 };
  if (said.includes('weather')) return { kind: 'tool', toolName: 'get_weather', input: { city: 'Paris' } };
  if (said.includes('ask')) return { kind: 'tool', toolName: 'ask_user', input: { question: 'Favourite colour?' } };
  return { kind: 'text', deltas: ['You said: ', said] };
}

function timedStream(chunks, delayMs = 0, { hang = false } = {}) {
  let index = 0;
  return new ReadableStream({
    async pull(controller) {
      if (hang) return new Promise(() => {});
      if (index > 0 && delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (index < chunks.length) controller.enqueue(chunks[index++]);
      else controller.close();
    },
  });
}

let toolCalls = 0;

/** LanguageModelV3/V4 stream parts (the same for ai 6 and ai 7). */
function modelStream(plan) {
  const usage = { inputTokens: { total: 3, noCache: 3 }, outputTokens: { total: 5, text: 5 } };
  const finish = (unified) => ({ type: 'finish', finishReason: { unified, raw: undefined }, usage });
  if (plan.kind === 'hang') return timedStream([], 0, { hang: true });
  if (plan.kind === 'tool') {
    const toolCallId = `call-${++toolCalls}`;
    return timedStream([{ type: 'tool-call', toolCallId, toolName: plan.toolName, input: JSON.stringify(plan.input) }, finish('tool-calls')]);
  }
  return timedStream(
    [
      { type: 'text-start', id: 't1' },
      ...plan.deltas.map((delta) => ({ type: 'text-delta', id: 't1', delta })),
      { type: 'text-end', id: 't1' },
      finish('stop'),
    ],
    plan.delayMs,
  );
}

/** LanguageModelV1 stream parts (ai 4). */
function modelStreamV1(plan) {
  const finish = (finishReason) => ({ type: 'finish', finishReason, usage: { promptTokens: 3, completionTokens: 5 } });
  if (plan.kind === 'hang') return timedStream([], 0, { hang: true });
  if (plan.kind === 'tool') {
    const toolCallId = `call-${++toolCalls}`;
    return timedStream([{ type: 'tool-call', toolCallType: 'function', toolCallId, toolName: plan.toolName, args: JSON.stringify(plan.input) }, finish('tool-calls')]);
  }
  return timedStream([...plan.deltas.map((textDelta) => ({ type: 'text-delta', textDelta })), finish('stop')], plan.delayMs);
}

// ------------------------------------------------------------ SDK server

let serverMessageIds = 0;

async function uiChatResponse(version, body) {
  const ai = version === 6 ? ai6 : ai7;
  const Mock = version === 6 ? MockLanguageModelV3 : MockLanguageModelV4;
  const model = new Mock({ doStream: async ({ prompt }) => ({ stream: modelStream(decide(prompt)) }) });
  const tools = {
    get_weather: ai.tool({
      description: 'Current weather',
      inputSchema: ai.jsonSchema({ type: 'object', properties: { city: { type: 'string' } } }),
      needsApproval: true,
      execute: async () => ({ tempC: 21 }),
    }),
    ask_user: ai.tool({
      description: 'Ask the user',
      inputSchema: ai.jsonSchema({ type: 'object', properties: { question: { type: 'string' } } }),
    }),
  };
  const result = ai.streamText({
    model,
    tools,
    messages: await ai.convertToModelMessages(body.messages, { tools }),
    stopWhen: ai.stepCountIs(5),
  });
  // The persistence setup of the AI SDK docs: originalMessages plus a
  // server-side message id generator, so the start chunk names the id.
  return result.toUIMessageStreamResponse({
    originalMessages: body.messages,
    generateMessageId: () => `srv${version}-${++serverMessageIds}`,
  });
}

function dataChatResponse(body) {
  const model = new MockLanguageModelV1({
    doStream: async ({ prompt }) => ({ stream: modelStreamV1(decide(prompt)), rawCall: { rawPrompt: null, rawSettings: {} } }),
  });
  const result = ai4.streamText({
    model,
    messages: body.messages, // AI SDK 4's route handlers pass useChat's messages straight in
    tools: { ask_user: ai4.tool({ description: 'Ask the user', parameters: ai4.jsonSchema({ type: 'object', properties: { question: { type: 'string' } } }) }) },
    maxSteps: 5,
  });
  return result.toDataStreamResponse();
}

async function startServer() {
  const requests = [];
  const live = new Map(); // chat id → { pieces, listeners, headers } while a resumable response streams

  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    const pieces = [];
    for await (const piece of req) pieces.push(piece);
    const text = Buffer.concat(pieces).toString('utf8');
    const record = { method: req.method, path: url.pathname, headers: req.headers, body: text, closedEarly: false };
    requests.push(record);
    let finished = false;
    res.on('close', () => {
      if (!finished) record.closedEarly = true;
    });
    try {
      const route = /^\/v([467])\/api\/(chat|bad)(?:\/([^/]+)\/stream)?$/.exec(url.pathname);
      if (!route) {
        res.writeHead(404).end('not found');
        return;
      }
      const [, version, endpoint, streamId] = route;
      if (endpoint === 'bad') {
        res.writeHead(400, { 'content-type': 'text/plain' }).end('bad request');
        return;
      }
      if (streamId !== undefined) {
        if (req.method !== 'GET') return void res.writeHead(405).end();
        const active = live.get(decodeURIComponent(streamId));
        if (active === undefined) return void res.writeHead(204).end();
        res.writeHead(200, active.headers);
        for (const piece of active.pieces) res.write(piece);
        await new Promise((resolve) => {
          active.listeners.add((piece) => (piece === null ? resolve() : res.write(piece)));
          res.on('close', resolve);
        });
        finished = true;
        res.end();
        return;
      }
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const body = JSON.parse(text);
      const response = version === '4' ? dataChatResponse(body) : await uiChatResponse(Number(version), body);
      const resumable = typeof body.id === 'string' && body.id.startsWith('resumable');
      await writeResponse(res, response, resumable ? body.id : null);
      finished = true;
    } catch (error) {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`selftest server: ${error?.stack ?? error}`);
    }
  });

  async function writeResponse(res, response, resumableId) {
    const headers = Object.fromEntries(response.headers);
    res.writeHead(response.status, headers);
    res.flushHeaders();
    let active;
    if (resumableId !== null) {
      active = { pieces: [], listeners: new Set(), headers };
      live.set(resumableId, active);
    }
    const reader = response.body.getReader();
    // A resumable response runs to its end even without a client, as it
    // would behind resumable-stream; any other one stops with its client.
    if (!active) res.on('close', () => reader.cancel().catch(() => {}));
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (active) {
          active.pieces.push(value);
          for (const listener of active.listeners) listener(value);
        }
        if (!res.destroyed) res.write(value);
      }
    } catch {
      // client went away
    } finally {
      if (active) {
        if (live.get(resumableId) === active) live.delete(resumableId);
        for (const listener of active.listeners) listener(null);
      }
      res.end();
    }
  }

  return { ...(await listenLocally(server)), requests };
}

// ------------------------------------------------------------ assertions

function checker(out) {
  const problems = [];
  const t = {
    problems,
    that(cond, what) {
      if (!cond) problems.push(what);
      return t;
    },
    eq(actual, expected, what) {
      if (!isDeepStrictEqual(actual, expected)) problems.push(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
      return t;
    },
    match(actual, pattern, what) {
      if (!pattern.test(actual ?? '')) problems.push(`${what}: expected ${pattern}, got ${JSON.stringify(actual)}`);
      return t;
    },
    clean() {
      t.that(out.ok === true && out.error === null, `expected ok, got error ${JSON.stringify(out.error)}`);
      t.eq(out.warnings, [], 'warnings');
      // Steps that wait end ready; a "wait": false send may still be running.
      t.that(out.steps.every((step) => step.error === null && step.status !== 'error'), `a step failed: ${JSON.stringify(out.steps)}`);
      t.eq(out.steps.at(-1)?.status, 'ready', 'status after the last step');
      t.eq(out.status, 'ready', 'final status');
      t.eq(out.chunks.length, out.requests.length, 'one chunks entry per request');
      return t;
    },
  };
  return t;
}

const textOf = (message) => (message?.parts ?? []).filter((part) => part.type === 'text').map((part) => part.text).join('');
const toolParts = (message) => (message?.parts ?? []).filter((part) => part.type.startsWith('tool-'));
const userText = (text) => [{ type: 'text', text }];

// ----------------------------------------------------------------- cases

const cases = [];
const add = (name, clients, script, check, { args = [], api, exitCode, resumable = false } = {}) => {
  for (const client of clients) {
    const chatId = `${resumable ? 'resumable-' : ''}${name}-${client}`;
    cases.push({ name, client, script: { chatId, ...script }, check, args, api, exitCode });
  }
};
const UI = ['ai6', 'ai7'];
const api = (client, endpoint = 'chat') => `/v${client.slice(2)}/api/${endpoint}`;

add(
  'plain-send',
  UI,
  { steps: [{ do: 'send', text: 'hello' }] },
  (t, out, { client, chatId, serverRequests }) => {
    t.clean();
    t.eq(out.messages.map((m) => m.role), ['user', 'assistant'], 'roles');
    t.eq(out.messages[0].parts, userText('hello'), 'user parts');
    t.eq(textOf(out.messages[1]), 'You said: hello', 'reply');
    t.match(out.messages[1].id, new RegExp(`^srv${client.slice(2)}-\\d+$`), 'reply id comes from the server');
    t.eq(out.requests.length, 1, 'requests');
    const request = out.requests[0];
    t.eq([request.method, request.status], ['POST', 200], 'request');
    t.eq(request.body, { id: chatId, messages: [{ id: out.messages[0].id, role: 'user', parts: userText('hello') }], trigger: 'submit-message' }, 'request body');
    t.eq(out.chunks[0].at(0), 'start', 'first chunk').eq(out.chunks[0].at(-1), 'finish', 'last chunk');
    t.that(out.chunks[0].includes('text-delta'), `chunks ${JSON.stringify(out.chunks[0])}`);
    t.eq(serverRequests[0]?.headers['x-test'], 'yes', 'custom header reached the server');
  },
  { args: ['--header', 'x-test: yes'] },
);

add(
  'edit',
  UI,
  { steps: [{ do: 'send', text: 'first' }, { do: 'send', text: 'second' }, { do: 'send', text: 'first, edited', editIndex: 0 }] },
  (t, out) => {
    t.clean();
    const firstUserId = out.requests[0]?.body?.messages?.[0]?.id;
    t.eq(out.messages.map((m) => m.role), ['user', 'assistant'], 'roles after the edit');
    t.eq(out.messages[0]?.id, firstUserId, 'edited message keeps its id');
    t.eq(out.messages[0]?.parts, userText('first, edited'), 'edited text');
    t.eq(textOf(out.messages[1]), 'You said: first, edited', 'reply to the edit');
    const edit = out.requests[2]?.body;
    t.eq(edit?.trigger, 'submit-message', 'edit trigger').eq(edit?.messageId, firstUserId, 'edit messageId');
    t.eq(edit?.messages?.length, 1, 'edit sends the history up to the edited message');
    t.eq(out.requests.length, 3, 'requests');
    t.that(out.messages[1]?.id !== out.requests[1]?.body?.messages?.[1]?.id, 'the reply to the edit is a new message');
    t.match(out.messages[1]?.id, /^srv\d-\d+$/, 'with an id from the server');
  },
);

add(
  'stop-after-chunk-then-continue',
  UI,
  { steps: [{ do: 'send', text: 'slow', stopAfterChunk: 'text-delta' }, { do: 'continue' }] },
  (t, out) => {
    t.clean();
    t.eq(out.chunks[0], ['start', 'start-step', 'text-start', 'text-delta'], 'the chat saw chunks up to the first text-delta');
    t.eq(out.messages.map((m) => m.role), ['user', 'assistant'], 'roles');
    const assistant = out.messages[1];
    t.eq(textOf(assistant), 'w0 Continued.', 'partial text, then the continuation in the same message');
    const body = out.requests[1]?.body;
    t.eq(body?.trigger, 'submit-message', 'continue trigger');
    t.eq(body?.messages?.map((m) => m.role), ['user', 'assistant'], 'continue sends the partial assistant message');
    t.eq(body?.messageId, assistant?.id, 'continue names the assistant message');
    t.eq(body?.messages?.[1]?.id, assistant?.id, 'continued message keeps its id');
    t.eq(body?.messages?.[1]?.parts?.find((p) => p.type === 'text')?.state, 'streaming', 'stopped text part is left streaming');
  },
);

add(
  'stop-after-ms',
  UI,
  { steps: [{ do: 'send', text: 'slow', stopAfterMs: 250 }] },
  (t, out, { serverRequests }) => {
    t.clean();
    // The reply takes 800 ms. On a loaded machine the stop can come before
    // the first word, or even before the response headers.
    const text = textOf(out.messages[1]);
    t.that(text.length < SLOW_TEXT.length && SLOW_TEXT.startsWith(text), `partial text ${JSON.stringify(text)}`);
    t.that(!out.chunks[0].includes('finish'), 'no finish chunk');
    if (out.requests[0]?.status === 200) t.that(serverRequests[0]?.closedEarly === true, 'server saw the client go away');
    else t.match(out.requests[0]?.error, /aborted/, 'request aborted');
  },
);

add(
  'stop-step',
  UI,
  { steps: [{ do: 'send', text: 'slow', wait: false }, { do: 'wait', untilChunk: 'text-delta' }, { do: 'stop' }] },
  (t, out) => {
    t.clean();
    t.that(['submitted', 'streaming'].includes(out.steps[0]?.status), `a "wait": false send reports the status it left: ${out.steps[0]?.status}`);
    const text = textOf(out.messages[1]);
    t.that(text.length > 0 && text.length < SLOW_TEXT.length, `partial text ${JSON.stringify(text)}`);
  },
);

add(
  'reload-204',
  UI,
  { steps: [{ do: 'send', text: 'hello' }, { do: 'reload' }] },
  (t, out, { chatId, base, client }) => {
    t.clean();
    t.eq(out.steps[1].reconnectStatus, 204, 'reconnectStatus');
    t.eq(out.requests[1] && { method: out.requests[1].method, url: out.requests[1].url, status: out.requests[1].status, body: out.requests[1].body }, { method: 'GET', url: `${base}${api(client)}/${chatId}/stream`, status: 204, body: null }, 'reconnect request');
    t.eq(out.chunks[1], [], 'no chunks on 204');
    t.eq(out.steps[1].persisted, 2, 'an idle chat persisted all its messages');
    t.eq(out.messages.map((m) => m.role), ['user', 'assistant'], 'messages after the reload');
  },
);

add(
  'reload-204-last-user',
  UI,
  { steps: [{ do: 'send', text: 'hello' }, { do: 'reload', persist: 'lastUser' }] },
  (t, out) => {
    t.clean();
    t.eq(out.steps[1].reconnectStatus, 204, 'reconnectStatus');
    t.eq(out.messages.map((m) => m.role), ['user'], 'after a 204 only the persisted messages remain');
  },
);

add(
  'reload-mid-stream-204',
  UI,
  { steps: [{ do: 'send', text: 'slow', wait: false }, { do: 'wait', untilChunk: 'text-delta' }, { do: 'reload' }] },
  (t, out) => {
    t.clean();
    t.eq(out.steps[2].reconnectStatus, 204, 'reconnectStatus');
    t.eq(out.steps[2].persisted, 1, 'a busy chat persisted up to the last user message');
    t.eq(out.messages.map((m) => m.role), ['user'], 'messages');
    t.eq(out.requests.map((r) => r.method), ['POST', 'GET'], 'the first request was not aborted by the reload');
  },
);

add(
  'reload-mid-stream-200',
  UI,
  { steps: [{ do: 'send', text: 'slow', wait: false }, { do: 'wait', untilChunk: 'text-delta' }, { do: 'reload' }, { do: 'reload' }] },
  (t, out) => {
    t.clean();
    t.eq(out.steps.slice(2).map((step) => step.reconnectStatus), [200, 204], 'reconnectStatus: resumed, then nothing left to resume');
    t.eq(out.messages.map((m) => m.role), ['user', 'assistant'], 'roles');
    t.eq(textOf(out.messages[1]), SLOW_TEXT, 'the resumed chat has the whole reply');
    t.eq(out.chunks[1]?.at(0), 'start', 'replay starts at the start').eq(out.chunks[1]?.at(-1), 'finish', 'replay ends with finish');
  },
  { resumable: true },
);

for (const approved of [true, false]) {
  add(
    `approve-${approved}`,
    UI,
    { sendAutomaticallyWhen: 'approvals', steps: [{ do: 'send', text: 'weather?' }, { do: 'approve', approved, reason: approved ? undefined : 'not now' }] },
    (t, out) => {
      t.clean();
      t.eq(out.requests.length, 2, 'the approval was sent automatically');
      const sent = out.requests[1]?.body?.messages?.[1];
      t.eq(toolParts(sent).map((p) => [p.state, p.approval?.approved]), [['approval-responded', approved]], 'tool part in the automatic request');
      t.eq(out.messages.map((m) => m.role), ['user', 'assistant'], 'roles');
      const [tool] = toolParts(out.messages[1]);
      t.eq(tool?.type, 'tool-get_weather', 'tool part');
      if (approved) {
        t.eq([tool?.state, tool?.output], ['output-available', { tempC: 21 }], 'tool ran');
        t.eq(textOf(out.messages[1]), 'Tool said: {"type":"json","value":{"tempC":21}}', 'reply after the tool');
      } else {
        t.eq(tool?.state, 'output-denied', 'tool denied');
        t.eq(tool?.approval?.reason, 'not now', 'reason kept');
      }
      t.eq(out.messages[1]?.id, sent?.id, 'the continuation keeps the assistant message id');
    },
  );
}

add(
  'stop-at-approval-request',
  UI,
  {
    sendAutomaticallyWhen: 'approvals',
    steps: [{ do: 'send', text: 'weather?', stopAfterChunk: 'tool-approval-request' }, { do: 'approve', approved: true }],
  },
  (t, out) => {
    t.clean();
    t.eq(out.chunks[0]?.at(-1), 'tool-approval-request', 'the first response was cut after the approval request');
    t.that(!out.chunks[0]?.includes('finish'), 'no finish chunk in the first response');
    t.eq(out.requests.length, 2, 'the approval was still sent automatically');
    t.eq(toolParts(out.messages[1]).map((p) => p.state), ['output-available'], 'tool ran after the approval');
  },
);

add(
  'approve-without-auto-send',
  UI,
  { steps: [{ do: 'send', text: 'weather?' }, { do: 'approve', approved: true }] },
  (t, out) => {
    t.clean();
    t.eq(out.requests.length, 1, 'no automatic request');
    t.eq(toolParts(out.messages[1]).map((p) => p.state), ['approval-responded'], 'approval recorded locally');
  },
);

add(
  'tool-output',
  UI,
  { sendAutomaticallyWhen: 'toolCalls', steps: [{ do: 'send', text: 'ask me' }, { do: 'toolOutput', tool: 'ask_user', output: { answer: 'blue' } }] },
  (t, out) => {
    t.clean();
    t.eq(out.requests.length, 2, 'the tool output was sent automatically');
    const [tool] = toolParts(out.messages[1]);
    t.eq([tool?.type, tool?.state, tool?.output], ['tool-ask_user', 'output-available', { answer: 'blue' }], 'tool part');
    t.eq(textOf(out.messages[1]), 'Tool said: {"type":"json","value":{"answer":"blue"}}', 'reply after the tool output');
  },
);

add(
  'regenerate',
  UI,
  { steps: [{ do: 'send', text: 'hello' }, { do: 'regenerate' }] },
  (t, out) => {
    t.clean();
    t.eq(out.requests[1]?.body?.trigger, 'regenerate-message', 'trigger');
    t.eq(out.requests[1]?.body?.messages?.length, 1, 'regenerate drops the old reply');
    t.eq(out.messages.map((m) => m.role), ['user', 'assistant'], 'roles');
    t.that(out.messages[1]?.id !== out.requests[1]?.body?.messageId || out.requests[1]?.body?.messageId === undefined, 'new reply');
  },
);

add(
  'files',
  UI,
  { steps: [{ do: 'send', text: 'look', files: [{ mediaType: 'image/png', filename: 'a.png', url: 'data:image/png;base64,AAAA' }] }] },
  (t, out) => {
    t.clean();
    t.eq(out.requests[0]?.body?.messages?.[0]?.parts, [{ type: 'file', mediaType: 'image/png', filename: 'a.png', url: 'data:image/png;base64,AAAA' }, { type: 'text', text: 'look' }], 'parts sent');
  },
);

add(
  'http-400',
  UI,
  { steps: [{ do: 'send', text: 'hello' }] },
  (t, out) => {
    t.that(out.ok === true, `ok: ${JSON.stringify(out.error)}`);
    t.eq([out.steps[0]?.status, out.steps[0]?.error], ['error', 'bad request'], 'step');
    t.eq(out.requests[0]?.status, 400, 'status');
    t.eq(out.status, 'error', 'final status');
  },
  { api: 'bad' },
);

add(
  'timeout',
  UI,
  { steps: [{ do: 'send', text: 'hang' }] },
  (t, out) => {
    t.that(out.ok === false, 'not ok');
    t.match(out.error, /^timed out after 3000 ms in step 0 \(send\)$/, 'error');
    t.eq(out.steps[0]?.status, 'submitted', 'the running step is reported');
  },
  { args: ['--timeout-ms', '3000'], exitCode: 1 },
);

add(
  'bad-script',
  [...UI, 'ai4'],
  { steps: [{ do: 'dance' }] },
  (t, out) => {
    t.that(out.ok === false, 'not ok');
    t.match(out.error, /^script: step 0: "do" must be one of/, 'error');
  },
  { exitCode: 2 },
);

add(
  'approve-without-request',
  UI,
  { steps: [{ do: 'send', text: 'hello' }, { do: 'approve', approved: true }] },
  (t, out) => {
    t.that(out.ok === false, 'not ok');
    t.match(out.error, /approval-requested/, 'error');
  },
  { exitCode: 1 },
);

// ai 4: callChatApi with the body useChat builds by default.
add(
  'v4-plain-send',
  ['ai4'],
  { steps: [{ do: 'send', text: 'hello' }] },
  (t, out, { chatId, base }) => {
    t.clean();
    t.eq(out.requests[0]?.url, `${base}/v4/api/chat?protocol=data`, 'the driver asks for the data stream');
    t.eq(out.requests[0]?.body, { id: chatId, messages: [{ role: 'user', content: 'hello', parts: userText('hello') }] }, 'v4 default body');
    t.eq(out.messages.map((m) => m.role), ['user', 'assistant'], 'roles');
    t.eq(out.messages[1]?.content, 'You said: hello', 'reply');
    t.that(out.chunks[0]?.includes('text') && out.chunks[0]?.at(-1) === 'finish_message', `chunks ${JSON.stringify(out.chunks[0])}`);
  },
);

add(
  'v4-tool-result',
  ['ai4'],
  { steps: [{ do: 'send', text: 'ask me' }, { do: 'toolResult', tool: 'ask_user', result: { answer: 'blue' } }] },
  (t, out) => {
    t.clean();
    t.eq(out.requests.length, 2, 'addToolResult resent the messages');
    const sent = out.requests[1]?.body?.messages?.[1];
    t.eq(Object.keys(sent ?? {}).sort(), ['content', 'parts', 'role', 'toolInvocations'], 'assistant message fields in the body');
    t.eq(sent?.toolInvocations?.map((call) => [call.state, call.toolName, call.result]), [['result', 'ask_user', { answer: 'blue' }]], 'toolInvocations');
    t.that(sent?.parts?.some((part) => part.type === 'tool-invocation' && part.toolInvocation.state === 'result'), `parts ${JSON.stringify(sent?.parts)}`);
    t.eq(out.messages.map((m) => m.role), ['user', 'assistant'], 'roles');
    t.eq(out.messages[1]?.content, 'Tool said: {"answer":"blue"}', 'reply after the tool result');
  },
);

add(
  'v4-protocol-kept',
  ['ai4'],
  { steps: [{ do: 'send', text: 'hello' }] },
  (t, out, { base }) => {
    t.clean();
    t.eq(out.requests[0]?.url, `${base}/v4/api/chat?x=1&protocol=data`, 'a protocol parameter in --api is kept');
  },
  { api: 'chat?x=1&protocol=data' },
);

add(
  'v4-extra-fields',
  ['ai4'],
  { sendExtraMessageFields: true, steps: [{ do: 'send', text: 'hello' }] },
  (t, out) => {
    t.clean();
    t.eq(Object.keys(out.requests[0]?.body?.messages?.[0] ?? {}).sort(), ['content', 'createdAt', 'id', 'parts', 'role'], 'whole message sent');
  },
);

// ----------------------------------------------------------------- runner

async function runCase(c, server, dir, index) {
  const script = c.script;
  const file = join(dir, `script-${index}.json`);
  await writeFile(file, JSON.stringify(script));
  const base = server.url;
  const apiUrl = `${base}${api(c.client, c.api ?? 'chat')}`;
  const { code, stdout, stderr } = await runScript(DRIVER, ['--client', c.client, '--api', apiUrl, '--script', file, ...c.args]);
  const lines = stdout.split('\n').filter(Boolean);
  if (lines.length !== 1) return { problems: [`expected one stdout line, got ${lines.length}: ${stdout}${stderr}`] };
  const out = JSON.parse(lines[0]);
  const t = checker(out);
  t.eq(code, c.exitCode ?? 0, 'exit code');
  if (stderr) t.that(false, `stderr: ${stderr}`);
  for (const key of ['ok', 'error', 'steps', 'status', 'messages', 'requests', 'chunks', 'warnings']) t.that(key in out, `output lacks ${key}`);
  await new Promise((resolve) => setTimeout(resolve, 100)); // let the server notice disconnects
  const serverRequests = server.requests.filter((r) => r.body.includes(`"${script.chatId}"`));
  try {
    c.check(t, out, { client: c.client, chatId: script.chatId, base, serverRequests });
  } catch (error) {
    t.that(false, `check threw: ${error?.stack ?? error}`);
  }
  return { problems: t.problems, out };
}

const server = await startServer();
const dir = await mkdtemp(join(tmpdir(), 'chat-driver-selftest-'));
let passed = 0;
let failed = 0;
try {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < cases.length) {
        const index = next++;
        const c = cases[index];
        const { problems, out } = await runCase(c, server, dir, index);
        const label = `${c.name} [${c.client}]`;
        if (problems.length === 0) {
          passed++;
          console.log(`ok - ${label}`);
          if (process.env.SELFTEST_VERBOSE === '2') console.log(`    output: ${JSON.stringify(out)}`);
        } else {
          failed++;
          console.log(`not ok - ${label}\n    ${problems.join('\n    ')}`);
          if (process.env.SELFTEST_VERBOSE && out) console.log(`    output: ${JSON.stringify(out)}`);
        }
      }
    }),
  );
} finally {
  await server.close();
  await rm(dir, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exitCode = failed === 0 ? 0 : 1;
