#!/usr/bin/env node
// A stand-in for `agent serve`, for checking the page and browser.mjs without the
// Rust server: serves the built page (../crates/agent-server/web-dist) at / and
// /assets/..., GET /api/tools, and POST /api/chat playing scripted UI message
// streams (v1, the chunks agent-server sends) for one scenario. Like the real
// server on loopback it refuses a foreign Host or Origin, and an /api request
// without its token (`url` carries it in the fragment, as `agent serve` prints).
//
// Standalone: node web/tests/mock-server.mjs --scenario NAME [--port N]
// prints "listening http://127.0.0.1:PORT" and serves until killed.
// GET /__log returns what it saw (requests, approvals, cancellations).

import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

const DIST = fileURLToPath(new URL('../../crates/agent-server/web-dist/', import.meta.url));
const FILES = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/index.html': ['index.html', 'text/html; charset=utf-8'],
  '/assets/app.js': ['assets/app.js', 'text/javascript; charset=utf-8'],
  '/assets/app.css': ['assets/app.css', 'text/css; charset=utf-8'],
};

const TOOLS = [
  { id: 'core__read_file', description: 'Read a text file in the workspace.', effect: 'read_only', decision: 'allow' },
  { id: 'core__write_file', description: 'Create or overwrite a text file.', effect: 'state_change', decision: 'approval' },
  { id: 'core__exec_shell', description: 'Run a shell command.', effect: 'external_side_effect', decision: 'approval' },
  { id: 'mcp__notes__search', description: 'Search the notes server.', effect: 'read_only', decision: 'allow' },
  { id: 'mcp__mail__send', description: 'Send an e-mail.', effect: 'external_side_effect', decision: 'deny' },
];

// The headers agent-server sends with the page (crates/agent-server/src/page.rs).
const PAGE_HEADERS = {
  'cache-control': 'no-cache',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const words = (text) => text.match(/\S+\s*/g) ?? [];
const LONG = Array.from({ length: 40 }, (_, i) => `line ${i + 1}: ${'lorem ipsum '.repeat(4)}`).join('\n');

export async function startMockServer({ scenario = 'tool-run', port = 0, delayMs = 120 } = {}) {
  const log = { requests: [], decisions: [], cancelled: 0, chats: 0 };
  const sockets = new Set();
  let calls = 0;
  let actualPort = port;
  const token = `mock-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;

  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://x');
    const hosts = [`127.0.0.1:${actualPort}`, `localhost:${actualPort}`];
    if (url.pathname === '/__log') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(log));
      return;
    }
    log.requests.push(`${req.method} ${url.pathname}`);
    if (!hosts.includes(req.headers.host ?? '')) {
      res.writeHead(403, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'host_not_allowed', message: 'the Host header is not one this server answers to' }));
      return;
    }
    if (req.headers.origin && !hosts.some((h) => req.headers.origin === `http://${h}`)) {
      res.writeHead(403, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'origin_not_allowed', message: 'requests from this origin are not accepted' }));
      return;
    }
    if (url.pathname.startsWith('/api/') && req.headers.authorization !== `Bearer ${token}`) {
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
    if (req.method === 'GET' && url.pathname === '/api/tools') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ tools: TOOLS }));
      return;
    }
    if (req.method === 'POST' && url.pathname === '/api/chat') {
      const pieces = [];
      for await (const p of req) pieces.push(p);
      let body;
      try {
        body = JSON.parse(Buffer.concat(pieces).toString('utf8'));
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'invalid_request', path: '', message: 'not valid JSON' }));
        return;
      }
      log.chats += 1;
      await chat(body, res);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found');
  });

  async function chat(body, res) {
    if (scenario === 'error') {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'invalid_request', path: 'messages[0].parts', message: 'has no text part' }));
      return;
    }
    let open = true;
    res.on('close', () => {
      if (open) log.cancelled += 1;
      open = false;
    });
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      'x-vercel-ai-ui-message-stream': 'v1',
      'x-accel-buffering': 'no',
    });
    const send = async (chunk, pause = 0) => {
      if (!open) return false;
      res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      if (pause) await sleep(pause);
      return open;
    };
    const text = async (id, s) => {
      await send({ type: 'text-start', id });
      for (const w of words(s)) if (!(await send({ type: 'text-delta', id, delta: w }, 15))) return;
      await send({ type: 'text-end', id });
    };
    const end = async (reason) => {
      await send({ type: 'message-metadata', messageMetadata: { usage: { inputTokens: 812, outputTokens: 64, totalTokens: 876 }, model: 'mock-model' } });
      await send({ type: 'finish', finishReason: reason });
      if (open) res.write('data: [DONE]\n\n');
      open = false;
      res.end();
    };

    const messages = Array.isArray(body.messages) ? body.messages : [];
    const last = messages[messages.length - 1];
    const responded = last?.role === 'assistant' ? last.parts.filter((p) => p.state === 'approval-responded') : [];
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
      await text('text-1', approved ? 'Done: the file is written (42 bytes).' : 'Understood — I left the file alone, since you denied the call.');
      await send({ type: 'finish-step' });
      return end('stop');
    }

    const id = `call_${++calls}`;
    await send({ type: 'start', messageId: `msg-${Date.now()}-${calls}` });
    await send({ type: 'start-step' });
    if (scenario === 'approve' || scenario === 'deny') {
      await text('text-0', 'I will write the change to notes.txt.');
      await send({ type: 'tool-input-start', toolCallId: id, toolName: 'core__write_file' });
      await send({ type: 'tool-input-available', toolCallId: id, toolName: 'core__write_file', input: { path: 'notes.txt', content: 'hello\n' } }, delayMs);
      await send({ type: 'tool-approval-request', approvalId: `appr-${id}-${Math.random().toString(36).slice(2, 10)}`, toolCallId: id });
      await send({ type: 'finish-step' });
      return end('tool-calls');
    }
    if (scenario === 'stop') {
      await send({ type: 'reasoning-start', id: 'reasoning-0' });
      await send({ type: 'reasoning-delta', id: 'reasoning-0', delta: 'The task is long; run it in the shell.' });
      await send({ type: 'reasoning-end', id: 'reasoning-0' });
      await send({ type: 'tool-input-start', toolCallId: id, toolName: 'core__exec_shell' });
      await send({ type: 'tool-input-available', toolCallId: id, toolName: 'core__exec_shell', input: { command: 'sleep 600' } });
      // Runs until the client goes away; heartbeats show a dead client.
      for (let i = 0; i < 600 && open; i++) {
        res.write(': keep-alive\n\n');
        await sleep(100);
      }
      return end('stop');
    }
    // tool-run, reload, metrics
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

  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  actualPort = server.address().port;
  return {
    url: `http://127.0.0.1:${actualPort}/#token=${token}`,
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
  const mock = await startMockServer({ scenario: get('--scenario') ?? 'tool-run', port: Number(get('--port') ?? 0) });
  console.log(`listening ${mock.url}`);
}
