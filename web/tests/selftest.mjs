#!/usr/bin/env node
// Runs the browser.mjs scenarios against mock-server.mjs (the built page, a
// scripted stand-in for `agent serve`) and checks what the server saw: the
// approval id round trip, the denial, the cancellation on Stop, the graph and
// the files each request carried, the reattach after a reload.
//
//   node tests/selftest.mjs [--shots DIR] [scenario...]
//
// Needs `npm run build` first and Chromium at /usr/bin/chromium (or CHROMIUM).

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { PATHOLOGICAL_LAST_WORD, RESUME_LAST_WORD, startMockServer } from './mock-server.mjs';

const argv = process.argv.slice(2);
const shotsAt = argv.indexOf('--shots');
const shots = shotsAt === -1 ? null : argv[shotsAt + 1];
const picked = argv.filter((a, i) => !a.startsWith('--') && (shotsAt === -1 || i !== shotsAt + 1));

/** Each run: the scenario, a label, extra driver arguments (or a function of the mock giving them), mock options. */
const all = [
  { scenario: 'tool-run' },
  { scenario: 'approve' },
  { scenario: 'deny' },
  { scenario: 'stop' },
  { scenario: 'reload' },
  { scenario: 'reload', label: 'reload (no store)', store: false },
  { scenario: 'metrics' },
  { scenario: 'error', args: ['--expect', 'has no text part'] },
  { scenario: 'token' },
  { scenario: 'rlo' },
  { scenario: 'huge' },
  { scenario: 'conversations' },
  { scenario: 'resume', args: ['--expect', RESUME_LAST_WORD] },
  { scenario: 'graph' },
  { scenario: 'markdown' },
  { scenario: 'attach' },
  { scenario: 'tool-stream' },
  { scenario: 'model-label', args: ['--expect', 'TestModel (offline)'] },
  { scenario: 'a11y' },
  { scenario: 'screens' },
  { scenario: 'pathological', args: ['--expect', PATHOLOGICAL_LAST_WORD, '--timeout-ms', '60000'] },
  { scenario: 'token-switch', args: (mock) => ['--other-token', mock.otherToken] },
];
const runs = picked.length ? all.filter((r) => picked.includes(r.scenario) || picked.includes(r.label)) : all;
const driver = fileURLToPath(new URL('./browser.mjs', import.meta.url));

function run(mock, { scenario, args = [] }) {
  return new Promise((resolve) => {
    const argv = [driver, '--url', mock.url, '--scenario', scenario, ...(typeof args === 'function' ? args(mock) : args)];
    if (shots) argv.push('--shots', shots);
    const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('close', (code) => {
      try {
        resolve({ code, result: JSON.parse(out.trim().split('\n').pop()) });
      } catch {
        resolve({ code, result: { ok: false, error: `no JSON line: ${out.slice(0, 300)}` } });
      }
    });
  });
}

const decided = (log, approved) => {
  const d = log.decisions;
  if (d.length !== 1 || d[0].approved !== approved || !d[0].approvalId.startsWith('appr-call_'))
    return `expected one ${approved ? 'approval' : 'denial'} with the server's approval id, saw ${JSON.stringify(d)}`;
};

const expect = {
  approve: (log) => decided(log, true),
  deny: (log) => decided(log, false),
  'tool-stream': (log) => decided(log, false),
  a11y: (log) => decided(log, true),
  stop: (log) => {
    if (log.cancelled < 1) return 'the server did not see the request cancelled';
  },
  resume: (log) => {
    if (log.resumed < 1) return 'the page never reattached (GET /api/chat/{id}/stream with an answer running)';
    if (log.chats !== 1) return `${log.chats} chat requests (the reload must not send the prompt again)`;
  },
  graph: (log) => {
    if (log.graphs[0] !== 'researcher') return `the first request ran graph ${log.graphs[0]}`;
  },
  attach: (log) => {
    const png = log.files.find((f) => f.mediaType === 'image/png' && f.filename === 'dot.png');
    const txt = log.files.find((f) => f.mediaType.startsWith('text/') && f.filename === 'notes.txt');
    if (!png || !txt) return `the request did not carry both files: ${JSON.stringify(log.files)}`;
  },
  'token-switch': (log) => {
    if (log.chatTokens.join() !== 'token,other') return `the chat requests carried ${log.chatTokens.join() || 'no token'}, not the page's then the link's`;
  },
  conversations: (log) => {
    for (const want of ['PATCH /api/chats/', 'DELETE /api/chats/'])
      if (!log.requests.some((r) => r.startsWith(want))) return `the server never saw ${want}`;
  },
};

/** Every request to /api/chat names the graph (the mock lists graphs). */
function everyRequestNamesAGraph(log) {
  const missing = log.bodies.filter((b) => !b.graph);
  if (missing.length) return `${missing.length} chat requests without a graph: ${JSON.stringify(missing)}`;
}

let passed = 0;
let failed = 0;
for (const r of runs) {
  const name = r.label ?? r.scenario;
  const mock = await startMockServer({ scenario: r.scenario, store: r.store ?? true });
  const { code, result } = await run(mock, r);
  await new Promise((res) => setTimeout(res, 150));
  const problem = result.ok ? (expect[r.scenario]?.(mock.log) ?? everyRequestNamesAGraph(mock.log)) : result.error;
  await mock.close();
  if (code === 0 && !problem) {
    passed++;
    const extra = result.bytes?.gzip ? ` first-load gzip ${result.bytes.gzip.total} B` : '';
    console.log(`ok   ${name}  ${JSON.stringify(result.timings)}${extra}`);
  } else {
    failed++;
    console.log(`FAIL ${name}: ${problem ?? `exit ${code}`}`);
    console.log(`     ${JSON.stringify(result.steps)}`);
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
