#!/usr/bin/env node
// A stand-in for `agent serve`, for checking the page and browser.mjs without the
// Rust server. It serves the built page (../crates/agent-server/web-dist) at /
// and /assets/..., and the API the page uses:
//
//   GET  /api/tools, /api/graphs, /api/limits
//   POST /api/chat                 plays the scenario's scripted turns as UI
//                                  message streams (v1, the chunks agent-server
//                                  sends), one turn per request; a continuation
//                                  after an approval plays the decision
//   GET  /api/chat/{id}/stream     the running answer of a chat so far, then live
//                                  (204 when none runs)
//   GET  /api/chats, GET|PATCH|DELETE /api/chats/{id}
//                                  the conversations (404 no_store with store: false)
//
// Like the real server on loopback it refuses a foreign Host or Origin, and an
// /api request without its token (`url` carries it in the fragment, as `agent
// serve` prints) or a second account's (`otherToken`). Like the real server's
// store, a thread's messages are recorded when its answer ends, with ids of the
// store's own and without metadata.
//
// Standalone: node web/tests/mock-server.mjs --scenario NAME [--port N] [--no-store]
// prints "listening http://127.0.0.1:PORT/#token=..." and serves until killed.
// GET /__log returns what it saw (requests, approvals, cancellations, graphs, files).

import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const DIST = fileURLToPath(new URL('../../crates/agent-server/web-dist/', import.meta.url));
const FILES = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/index.html': ['index.html', 'text/html; charset=utf-8'],
  '/assets/app.js': ['assets/app.js', 'text/javascript; charset=utf-8'],
  '/assets/app.css': ['assets/app.css', 'text/css; charset=utf-8'],
  '/assets/highlight.js': ['assets/highlight.js', 'text/javascript; charset=utf-8'],
};

const TOOLS = [
  { id: 'core__read_file', description: 'Read a text file in the workspace.', effect: 'read_only', decision: 'allow' },
  { id: 'core__write_file', description: 'Create or overwrite a text file.', effect: 'state_change', decision: 'approval' },
  { id: 'core__exec_shell', description: 'Run a shell command.', effect: 'external_side_effect', decision: 'approval' },
  { id: 'mcp__notes__search', description: 'Search the notes server.', effect: 'read_only', decision: 'allow' },
  { id: 'mcp__mail__send', description: 'Send an e-mail.', effect: 'external_side_effect', decision: 'deny' },
  { id: 'app__echo', description: 'Echo the text it is given.', effect: 'read_only', decision: 'allow' },
  { id: 'app__write', description: 'Write a value into the app.', effect: 'state_change', decision: 'approval' },
];

const GRAPHS = {
  default: 'chat',
  graphs: [
    { name: 'chat', description: 'The general assistant, with every tool.', tools: TOOLS.map((t) => t.id) },
    { name: 'researcher', description: 'Reads and searches; changes nothing.', tools: ['core__read_file', 'mcp__notes__search'] },
  ],
};

const LIMITS = {
  attachments: {
    maxFileBytes: 4 * 1024 * 1024,
    maxRequestFileBytes: 5 * 1024 * 1024,
    imageTypes: ['image/png', 'image/jpeg', 'image/webp', 'image/gif'],
  },
};

// The headers agent-server sends with the page (crates/agent-server/src/page.rs).
const PAGE_HEADERS = {
  'cache-control': 'no-cache',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
};

const STREAM_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const words = (text) => text.match(/\S+\s*/g) ?? [];
const LONG = Array.from({ length: 40 }, (_, i) => `line ${i + 1}: ${'lorem ipsum '.repeat(4)}`).join('\n');

/** The answer of the `markdown` scenario: GFM, links safe and unsafe, raw HTML. */
export const MARKDOWN_ANSWER = [
  'Here is a summary.',
  '',
  '| Crate | Lines |',
  '| --- | ---: |',
  '| agent-server | 7407 |',
  '| ai-core | 5120 |',
  '',
  '- first item',
  '- second item',
  '- [x] a finished task',
  '',
  '1. one',
  '2. two',
  '',
  '```rust',
  'fn main() {',
  '    let answer: u32 = 42;',
  '    println!("{answer}");',
  '}',
  '```',
  '',
  'Read https://example.com for more, or [click here](javascript:alert(1)); ~~old~~ new.',
  '',
  '<img src=x onerror=alert(1)>',
  '',
].join('\n');

/** The last word of the `resume` answer (browser.mjs --expect). */
export const RESUME_LAST_WORD = 'finished';
const RESUME_ANSWER = `${Array.from({ length: 59 }, (_, i) => `word${i + 1}`).join(' ')} ${RESUME_LAST_WORD}.`;

/** The `value` the `tool-stream` scenario's call streams (4,000 characters). */
export const STREAMED_VALUE = Array.from({ length: 100 }, (_, i) => `chunk-${String(i).padStart(3, '0')}-`.padEnd(40, 'x')).join('');

/** The last word of the `pathological` answer (browser.mjs --expect). */
export const PATHOLOGICAL_LAST_WORD = 'bottom-line';

/**
 * The `pathological` answer, one text part per step (each part within the
 * page's first window of 32,000 characters but the fourth, which takes "Show
 * more"): markdown that stalled the page's main thread for seconds. The Rust
 * test (crates/agent-server/tests/it/browser.rs, `pathological_parts`) streams
 * the same parts.
 */
export function pathologicalParts() {
  const lines = (n, f) => Array.from({ length: n }, (_, i) => f(i + 1));
  const rust = (n) => {
    const line = '    let value: u32 = compute(&input, 42); // a comment with "text"\n';
    return `fn main() {\n${line.repeat(Math.ceil(n / line.length)).slice(0, n - 14)}\n}`;
  };
  return [
    // Block quotes nested 500 deep.
    ['Deep quotes:', '', ...lines(40, (i) => `${'>'.repeat(500)} quoted line ${i}`)].join('\n'),
    // Lists nested 500 (bullets) and 300 (numbers) deep.
    ['Deep lists:', '', ...lines(10, (i) => `${'- '.repeat(500)}item ${i}`), '', ...lines(5, (i) => `${'1. '.repeat(300)}step ${i}`)].join('\n'),
    // 300 fenced code blocks.
    ['Many blocks:', '', ...lines(300, (i) => `\`\`\`js\nconst v${i} = [${'1, '.repeat(16)}${i}];\n\`\`\``)].join('\n\n'),
    // Code blocks just under the highlight cap (20,000 characters), past the first window.
    ['Big blocks:', '', ...lines(12, () => `\`\`\`rust\n${rust(19_900)}\n\`\`\``)].join('\n\n'),
    // A table row of thousands of cells, bracket and setext bombs, then the last word.
    [
      '| a | b |',
      '| --- | --- |',
      `| ${'cell | '.repeat(2500)}`,
      '',
      `${'['.repeat(3000)}${']'.repeat(3000)}`,
      '',
      'a\n=\n'.repeat(1000),
      `The end: ${PATHOLOGICAL_LAST_WORD}.`,
    ].join('\n'),
  ];
}

/** What each scenario's model says, one turn per request (continuations aside). */
const TURNS = {
  conversations: ['text:First answer.', 'text:Second answer.'],
  resume: ['resume'],
  graph: ['text:I looked into it as the researcher.'],
  markdown: ['markdown'],
  attach: ['text:I see the image.'],
  'tool-stream': ['tool-stream'],
  'model-label': ['text:Hello from the offline model.'],
  a11y: ['echo', 'write'],
  screens: ['screens'],
  approve: ['write-file'],
  deny: ['write-file'],
  rlo: ['rlo'],
  stop: ['stop'],
  huge: ['huge'],
  pathological: ['pathological'],
  'token-switch': ['text:This is the first account.', 'text:This is the second account.'],
};

/** What a continuation says after the decision, by scenario: [approved, denied]. */
const AFTER_DECISION = {
  'tool-stream': ['Written.', 'Not written.'],
  a11y: ['Written.', 'Not written.'],
};

/** A UI message built from the chunks of a stream, as a client (or the store) would. */
function accumulator(base) {
  const message = base
    ? structuredClone(base)
    : { id: '', role: 'assistant', parts: [] };
  const texts = new Map();
  const tool = (id) => message.parts.find((p) => p.toolCallId === id);
  return {
    message,
    apply(c) {
      switch (c.type) {
        case 'start':
          if (c.messageId) message.id = c.messageId;
          break;
        case 'start-step':
          message.parts.push({ type: 'step-start' });
          break;
        case 'text-start':
        case 'reasoning-start': {
          const part = { type: c.type === 'text-start' ? 'text' : 'reasoning', text: '', state: 'streaming' };
          message.parts.push(part);
          texts.set(c.id, part);
          break;
        }
        case 'text-delta':
        case 'reasoning-delta':
          if (texts.has(c.id)) texts.get(c.id).text += c.delta;
          break;
        case 'text-end':
        case 'reasoning-end':
          if (texts.has(c.id)) texts.get(c.id).state = 'done';
          break;
        case 'tool-input-start':
          message.parts.push({ type: `tool-${c.toolName}`, toolCallId: c.toolCallId, state: 'input-streaming' });
          break;
        case 'tool-input-available': {
          const p = tool(c.toolCallId);
          if (p) Object.assign(p, { state: 'input-available', input: c.input });
          else message.parts.push({ type: `tool-${c.toolName}`, toolCallId: c.toolCallId, state: 'input-available', input: c.input });
          break;
        }
        case 'tool-approval-request': {
          const p = tool(c.toolCallId);
          if (p) Object.assign(p, { state: 'approval-requested', approval: { id: c.approvalId } });
          break;
        }
        case 'tool-output-available': {
          const p = tool(c.toolCallId);
          if (p) Object.assign(p, { state: 'output-available', output: c.output });
          break;
        }
        case 'tool-output-error': {
          const p = tool(c.toolCallId);
          if (p) Object.assign(p, { state: 'output-error', errorText: c.errorText });
          break;
        }
        case 'tool-output-denied': {
          const p = tool(c.toolCallId);
          if (p) Object.assign(p, { state: 'output-denied', approval: { ...(p.approval ?? {}), approved: false } });
          break;
        }
        default:
          break;
      }
    },
  };
}

/** Decoded bytes of a data URL. */
function dataBytes(url) {
  const data = String(url).slice(String(url).indexOf(',') + 1);
  return Buffer.from(data, 'base64').length;
}

/** The files of a request within the limits, or the refusal the real server would send. */
function checkFiles(messages, log) {
  let total = 0;
  for (const [i, m] of messages.entries()) {
    for (const [j, p] of (m.parts ?? []).entries()) {
      if (p.type !== 'file') continue;
      const path = `messages[${i}].parts[${j}]`;
      if (!String(p.url).startsWith('data:')) return { path, message: 'only data: URLs are accepted' };
      const size = dataBytes(p.url);
      if (size > LIMITS.attachments.maxFileBytes)
        return { path, message: `the file ${p.filename ?? ''} is ${size} bytes, over the limit of ${LIMITS.attachments.maxFileBytes}` };
      total += size;
      if (i === messages.length - 1) log.files.push({ mediaType: p.mediaType, filename: p.filename ?? null, bytes: size });
    }
  }
  if (total > LIMITS.attachments.maxRequestFileBytes)
    return { path: 'messages', message: `the request's files are over ${LIMITS.attachments.maxRequestFileBytes} bytes together` };
  return null;
}

export async function startMockServer({ scenario = 'tool-run', port = 0, delayMs = 120, store = true } = {}) {
  const log = { requests: [], decisions: [], cancelled: 0, chats: 0, graphs: [], files: [], resumed: 0, bodies: [], chatTokens: [] };
  const sockets = new Set();
  const threads = new Map();
  const runs = new Map(); // chat id → the running (or last) answer
  const turns = [...(TURNS[scenario] ?? [])];
  const model = scenario === 'model-label' ? 'TestModel (offline)' : 'mock-model';
  // A reload (the client going away) leaves the answer running where the
  // scenario checks reattaching; elsewhere it cancels it, as Stop does.
  const detach = scenario === 'resume';
  let calls = 0;
  let actualPort = port;
  const token = `mock-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
  // A second account's token (the `token-switch` scenario's B).
  const otherToken = `other-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
  const tokens = [token, otherToken];

  const json = (res, status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(body === undefined ? '' : JSON.stringify(body));
  };
  const threadJson = (t) => ({ id: t.id, title: t.title, graph: t.graph, created_ms: t.created_ms, updated_ms: t.updated_ms });

  async function readBody(req) {
    const pieces = [];
    for await (const p of req) pieces.push(p);
    return JSON.parse(Buffer.concat(pieces).toString('utf8'));
  }

  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    const hosts = [`127.0.0.1:${actualPort}`, `localhost:${actualPort}`];
    if (url.pathname === '/__log') return json(res, 200, log);
    log.requests.push(`${req.method} ${url.pathname}`);
    if (!hosts.includes(req.headers.host ?? ''))
      return json(res, 403, { error: 'host_not_allowed', message: 'the Host header is not one this server answers to' });
    if (req.headers.origin && !hosts.some((h) => req.headers.origin === `http://${h}`))
      return json(res, 403, { error: 'origin_not_allowed', message: 'requests from this origin are not accepted' });
    if (url.pathname.startsWith('/api/') && !tokens.some((t) => req.headers.authorization === `Bearer ${t}`)) {
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' });
      res.end(JSON.stringify({ error: 'unauthorized', message: 'a valid bearer token is required' }));
      return;
    }
    if (req.method === 'GET' && FILES[url.pathname]) {
      const [file, type] = FILES[url.pathname];
      try {
        const body = await readFile(DIST + file);
        res.writeHead(200, { 'content-type': type, ...PAGE_HEADERS });
        res.end(body);
      } catch {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('build the page first: npm run build');
      }
      return;
    }
    if (req.method === 'GET' && url.pathname === '/api/tools') return json(res, 200, { tools: TOOLS });
    if (req.method === 'GET' && url.pathname === '/api/graphs') return json(res, 200, GRAPHS);
    if (req.method === 'GET' && url.pathname === '/api/limits') return json(res, 200, LIMITS);

    if (req.method === 'POST' && /^\/api\/chat\/[^/]+\/stop$/.test(url.pathname)) {
      log.stops = (log.stops ?? 0) + 1;
      res.writeHead(204);
      return res.end();
    }
    const reattach = /^\/api\/chat\/([^/]+)\/stream$/.exec(url.pathname);
    if (req.method === 'GET' && reattach) {
      const run = runs.get(decodeURIComponent(reattach[1]));
      if (!run || run.done) {
        res.writeHead(204);
        res.end();
        return;
      }
      log.resumed += 1;
      res.writeHead(200, STREAM_HEADERS);
      for (const frame of run.frames) res.write(frame);
      run.readers.add(res);
      res.on('close', () => run.readers.delete(res));
      return;
    }

    if (url.pathname === '/api/chats' || url.pathname.startsWith('/api/chats/')) {
      if (!store) return json(res, 404, { error: 'no_store', message: 'this server keeps no conversations (it has no run store)' });
      if (url.pathname === '/api/chats' && req.method === 'GET') {
        const chats = [...threads.values()].sort((a, b) => b.updated_ms - a.updated_ms).map(threadJson);
        return json(res, 200, { chats });
      }
      const id = decodeURIComponent(url.pathname.slice('/api/chats/'.length));
      const thread = threads.get(id);
      if (!thread) return json(res, 404, { error: 'not_found', message: 'no such chat' });
      if (req.method === 'GET') return json(res, 200, { ...threadJson(thread), messages: thread.messages });
      if (req.method === 'DELETE') {
        threads.delete(id);
        res.writeHead(204);
        res.end();
        return;
      }
      if (req.method === 'PATCH') {
        let body;
        try {
          body = await readBody(req);
        } catch {
          return json(res, 400, { error: 'invalid_request', path: '', message: 'not valid JSON' });
        }
        const title = typeof body?.title === 'string' ? body.title.trim() : '';
        if (!title || [...title].length > 200)
          return json(res, 400, { error: 'invalid_request', path: 'title', message: 'a title has 1 to 200 characters' });
        thread.title = title;
        return json(res, 200, threadJson(thread));
      }
      return json(res, 405, { error: 'method_not_allowed', message: 'not allowed' });
    }

    if (req.method === 'POST' && url.pathname === '/api/chat') {
      let body;
      try {
        body = await readBody(req);
      } catch {
        return json(res, 400, { error: 'invalid_request', path: '', message: 'not valid JSON' });
      }
      log.chats += 1;
      log.chatTokens.push(req.headers.authorization === `Bearer ${token}` ? 'token' : 'other');
      log.bodies.push({ keys: Object.keys(body).sort(), graph: body.graph ?? null, trigger: body.trigger ?? null });
      if (body.graph !== undefined) {
        log.graphs.push(body.graph);
        if (body.graph === 'forbidden') return json(res, 403, { error: 'graph_forbidden', message: `this token may not use graph ${body.graph}` });
        if (!GRAPHS.graphs.some((g) => g.name === body.graph))
          return json(res, 400, { error: 'unknown_graph', message: `no graph is named ${body.graph}` });
      }
      const messages = Array.isArray(body.messages) ? body.messages : [];
      const refused = checkFiles(messages, log);
      if (refused) return json(res, 400, { error: 'invalid_request', ...refused });
      await chat(body, messages, res);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found');
  });

  /** Records what the store would keep of a finished answer. */
  function record(chatId, messages, answer) {
    const thread = threads.get(chatId);
    if (!thread) return;
    const all = [...messages];
    if (all[all.length - 1]?.role === 'assistant' && all[all.length - 1].id === answer.id) all.pop();
    all.push(answer);
    thread.messages = all.map((m, i) => {
      const { metadata: _ignored, ...rest } = m;
      return { ...structuredClone(rest), id: `${m.role === 'user' ? 'u' : 'a'}-${i}` };
    });
    thread.updated_ms = Date.now();
  }

  async function chat(body, messages, res) {
    if (scenario === 'error') {
      return json(res, 400, { error: 'invalid_request', path: 'messages[0].parts', message: 'has no text part' });
    }
    const chatId = typeof body.id === 'string' ? body.id : 'chat';
    const firstUser = messages.find((m) => m.role === 'user');
    if (store && !threads.has(chatId)) {
      const text = (firstUser?.parts ?? []).filter((p) => p.type === 'text').map((p) => p.text).join(' ').trim();
      const title = text ? (text.length > 60 ? `${text.slice(0, 60).trimEnd()}…` : text) : 'Files';
      const now = Date.now();
      threads.set(chatId, { id: chatId, title, graph: body.graph ?? GRAPHS.default, created_ms: now, updated_ms: now, messages: [] });
    } else if (store) {
      threads.get(chatId).updated_ms = Date.now();
    }

    const last = messages[messages.length - 1];
    const responded = last?.role === 'assistant' ? last.parts.filter((p) => p.state === 'approval-responded') : [];
    const acc = accumulator(responded.length ? last : null);
    const run = { frames: [], readers: new Set([res]), done: false, cancelled: false };
    runs.set(chatId, run);
    res.writeHead(200, STREAM_HEADERS);
    res.on('close', () => {
      run.readers.delete(res);
      if (!run.done && !detach && !run.cancelled) {
        run.cancelled = true;
        log.cancelled += 1;
      }
    });

    const send = async (chunk, pause = 0) => {
      if (run.cancelled) return false;
      const frame = `data: ${JSON.stringify(chunk)}\n\n`;
      run.frames.push(frame);
      acc.apply(chunk);
      for (const r of run.readers) r.write(frame);
      if (pause) await sleep(pause);
      return !run.cancelled;
    };
    const text = async (id, s, pause = 15) => {
      await send({ type: 'text-start', id });
      for (const w of words(s)) if (!(await send({ type: 'text-delta', id, delta: w }, pause))) return;
      await send({ type: 'text-end', id });
    };
    const end = async (reason) => {
      await send({ type: 'message-metadata', messageMetadata: { usage: { inputTokens: 812, outputTokens: 64, totalTokens: 876 }, model } });
      await send({ type: 'finish', finishReason: reason });
      run.done = true;
      for (const r of run.readers) {
        r.write('data: [DONE]\n\n');
        r.end();
      }
      run.readers.clear();
      if (!run.cancelled && store) record(chatId, messages, acc.message);
    };

    if (responded.length) {
      // A continuation: the same assistant message (its id), the decisions first.
      await send({ type: 'start', messageId: last.id });
      await send({ type: 'start-step' });
      for (const p of responded) {
        log.decisions.push({ approvalId: p.approval.id, approved: p.approval.approved, toolCallId: p.toolCallId, messageId: body.messageId ?? null });
        if (p.approval.approved) {
          await sleep(delayMs);
          await send({ type: 'tool-output-available', toolCallId: p.toolCallId, output: { written: p.input?.path ?? 'notes.txt', bytes: 42 } });
        } else {
          await send({ type: 'tool-output-denied', toolCallId: p.toolCallId });
        }
      }
      await send({ type: 'finish-step' });
      await send({ type: 'start-step' });
      const approved = responded.every((p) => p.approval.approved);
      const [yes, no] = AFTER_DECISION[scenario] ?? [
        'Done: the file is written (42 bytes).',
        'Understood — I left the file alone, since you denied the call.',
      ];
      await text('text-1', approved ? yes : no);
      await send({ type: 'finish-step' });
      return end('stop');
    }

    const id = `call_${++calls}`;
    await send({ type: 'start', messageId: `msg-${Date.now()}-${calls}` });
    await send({ type: 'start-step' });
    const turn = turns.length ? turns.shift() : TURNS[scenario] ? 'text:(no more scripted turns)' : 'tool-run';

    if (turn.startsWith('text:')) {
      await text('text-0', turn.slice(5));
      await send({ type: 'finish-step' });
      return end('stop');
    }
    switch (turn) {
      case 'write-file':
      case 'rlo': {
        const input =
          turn === 'rlo'
            ? { command: JSON.parse(readFileSync(new URL('../../fixtures/printable/cases.json', import.meta.url), 'utf8')).cases[0].input }
            : { path: 'notes.txt', content: 'hello\n' };
        const tool = turn === 'rlo' ? 'core__exec_shell' : 'core__write_file';
        await text('text-0', 'I will write the change to notes.txt.');
        await send({ type: 'tool-input-start', toolCallId: id, toolName: tool });
        await send({ type: 'tool-input-available', toolCallId: id, toolName: tool, input }, delayMs);
        await send({ type: 'tool-approval-request', approvalId: `appr-${id}-${Math.random().toString(36).slice(2, 10)}`, toolCallId: id });
        await send({ type: 'finish-step' });
        return end('tool-calls');
      }
      case 'stop': {
        await send({ type: 'reasoning-start', id: 'reasoning-0' });
        await send({ type: 'reasoning-delta', id: 'reasoning-0', delta: 'The task is long; run it in the shell.' });
        await send({ type: 'reasoning-end', id: 'reasoning-0' });
        await send({ type: 'tool-input-start', toolCallId: id, toolName: 'core__exec_shell' });
        await send({ type: 'tool-input-available', toolCallId: id, toolName: 'core__exec_shell', input: { command: 'sleep 600' } });
        // Runs until the client goes away; heartbeats show a dead client.
        for (let i = 0; i < 600 && !run.cancelled; i++) {
          for (const r of run.readers) r.write(': keep-alive\n\n');
          await sleep(100);
        }
        return end('stop');
      }
      case 'resume': {
        // About 60 words over 6 seconds.
        await text('text-0', RESUME_ANSWER, 100);
        await send({ type: 'finish-step' });
        return end('stop');
      }
      case 'markdown': {
        await text('text-0', MARKDOWN_ANSWER, 2);
        await send({ type: 'finish-step' });
        return end('stop');
      }
      case 'huge': {
        await send({ type: 'text-start', id: 'text-0' });
        const piece = 'x'.repeat(8192);
        for (let i = 0; i < 128; i++) if (!(await send({ type: 'text-delta', id: 'text-0', delta: piece }, i % 8 === 0 ? 5 : 0))) return;
        await send({ type: 'text-end', id: 'text-0' });
        await send({ type: 'finish-step' });
        return end('stop');
      }
      case 'pathological': {
        // Each part in its own step after an echo call, streamed in pieces of 2,000 characters.
        const parts = pathologicalParts();
        for (const [n, part] of parts.entries()) {
          const call = `${id}-${n}`;
          await send({ type: 'text-start', id: `text-${n}` });
          for (let i = 0; i < part.length; i += 2000)
            if (!(await send({ type: 'text-delta', id: `text-${n}`, delta: part.slice(i, i + 2000) }, 5))) return;
          await send({ type: 'text-end', id: `text-${n}` });
          if (n === parts.length - 1) break;
          await send({ type: 'tool-input-start', toolCallId: call, toolName: 'app__echo' });
          await send({ type: 'tool-input-available', toolCallId: call, toolName: 'app__echo', input: { text: `part ${n + 1}` } });
          await send({ type: 'tool-output-available', toolCallId: call, output: { text: `part ${n + 1}` } });
          await send({ type: 'finish-step' });
          await send({ type: 'start-step' });
        }
        await send({ type: 'finish-step' });
        return end('stop');
      }
      case 'tool-stream': {
        // app__write's arguments streamed in 40-byte pieces, then the approval request.
        const input = { key: 'notes', value: STREAMED_VALUE };
        const raw = JSON.stringify(input);
        await send({ type: 'tool-input-start', toolCallId: id, toolName: 'app__write' });
        for (let i = 0; i < raw.length; i += 40) {
          if (!(await send({ type: 'tool-input-delta', toolCallId: id, inputTextDelta: raw.slice(i, i + 40) }, 30))) return;
        }
        await send({ type: 'tool-input-available', toolCallId: id, toolName: 'app__write', input });
        await send({ type: 'tool-approval-request', approvalId: `appr-${id}-${Math.random().toString(36).slice(2, 10)}`, toolCallId: id });
        await send({ type: 'finish-step' });
        return end('tool-calls');
      }
      case 'echo': {
        await send({ type: 'tool-input-start', toolCallId: id, toolName: 'app__echo' });
        await send({ type: 'tool-input-available', toolCallId: id, toolName: 'app__echo', input: { text: 'hello' } }, delayMs);
        await send({ type: 'tool-output-available', toolCallId: id, output: { text: 'hello' } });
        await send({ type: 'finish-step' });
        await send({ type: 'start-step' });
        await text('text-1', 'I echoed your text.');
        await send({ type: 'finish-step' });
        return end('stop');
      }
      case 'write': {
        await send({ type: 'tool-input-start', toolCallId: id, toolName: 'app__write' });
        await send({ type: 'tool-input-available', toolCallId: id, toolName: 'app__write', input: { key: 'greeting', value: 'hello' } }, delayMs);
        await send({ type: 'tool-approval-request', approvalId: `appr-${id}-${Math.random().toString(36).slice(2, 10)}`, toolCallId: id });
        await send({ type: 'finish-step' });
        return end('tool-calls');
      }
      case 'screens': {
        await send({ type: 'tool-input-start', toolCallId: id, toolName: 'core__read_file' });
        await send({ type: 'tool-input-available', toolCallId: id, toolName: 'core__read_file', input: { path: 'README.md' } }, delayMs);
        await send({ type: 'tool-output-available', toolCallId: id, output: { path: 'README.md', lines: 3 } });
        await send({ type: 'finish-step' });
        await send({ type: 'start-step' });
        await text(
          'text-1',
          'The README says three things:\n\n1. **Build** with `cargo build`.\n2. Run `agent serve`.\n3. Open the page.\n\n```sh\ncargo build --release\n./target/release/agent serve\n```\n\n| Step | Time |\n| --- | --- |\n| build | 2 min |\n| serve | instant |\n',
          3,
        );
        await send({ type: 'finish-step' });
        return end('stop');
      }
      default: {
        // tool-run, reload, metrics, token
        await send({ type: 'tool-input-start', toolCallId: id, toolName: 'core__read_file' });
        await send({ type: 'tool-input-available', toolCallId: id, toolName: 'core__read_file', input: { path: 'README.md' } }, delayMs);
        await send({ type: 'tool-output-available', toolCallId: id, output: { path: 'README.md', content: LONG, lines: 40 } });
        const id2 = `call_${++calls}`;
        await send({ type: 'tool-input-start', toolCallId: id2, toolName: 'mcp__notes__search' });
        await send({ type: 'tool-input-available', toolCallId: id2, toolName: 'mcp__notes__search', input: { query: 'readme' } }, delayMs);
        await send({ type: 'tool-output-error', toolCallId: id2, errorText: 'unavailable: the notes server did not answer' });
        await send({ type: 'finish-step' });
        await send({ type: 'start-step' });
        await text('text-1', 'The README has **40 lines** of placeholder text; the `notes` search failed, so I could not cross-check it.');
        await send({ type: 'finish-step' });
        return end('stop');
      }
    }
  }

  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  actualPort = server.address().port;
  return {
    url: `http://127.0.0.1:${actualPort}/#token=${token}`,
    otherToken,
    log,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const argv = process.argv.slice(2);
  const get = (name) => {
    const i = argv.indexOf(name);
    return i === -1 ? undefined : argv[i + 1];
  };
  const mock = await startMockServer({
    scenario: get('--scenario') ?? 'tool-run',
    port: Number(get('--port') ?? 0),
    store: !argv.includes('--no-store'),
  });
  console.log(`listening ${mock.url}`);
}
