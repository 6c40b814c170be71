#!/usr/bin/env node
// Runs every browser.mjs scenario against mock-server.mjs (the built page, a
// scripted stand-in for `agent serve`) and checks what the server saw: the
// approval id round trip, the denial, the cancellation on Stop.
//
//   node tests/selftest.mjs [--shots DIR] [scenario...]
//
// Needs `npm run build` first and Chromium at /usr/bin/chromium (or CHROMIUM).

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startMockServer } from './mock-server.mjs';

const argv = process.argv.slice(2);
const shotsAt = argv.indexOf('--shots');
const shots = shotsAt === -1 ? null : argv[shotsAt + 1];
const picked = argv.filter((a, i) => !a.startsWith('--') && (shotsAt === -1 || i !== shotsAt + 1));
const all = ['tool-run', 'approve', 'deny', 'stop', 'reload', 'metrics', 'error'];
const scenarios = picked.length ? picked : all;
const driver = fileURLToPath(new URL('./browser.mjs', import.meta.url));

function run(url, scenario) {
  return new Promise((resolve) => {
    const args = [driver, '--url', url, '--scenario', scenario];
    if (shots) args.push('--shots', shots);
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
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

const expect = {
  approve: (log) => {
    const d = log.decisions;
    if (d.length !== 1 || d[0].approved !== true || !d[0].approvalId.startsWith('appr-call_'))
      return `expected one approved decision with the server's approval id, saw ${JSON.stringify(d)}`;
  },
  deny: (log) => {
    const d = log.decisions;
    if (d.length !== 1 || d[0].approved !== false) return `expected one denial, saw ${JSON.stringify(d)}`;
  },
  stop: (log) => {
    if (log.cancelled < 1) return 'the server did not see the request cancelled';
  },
};

let passed = 0;
let failed = 0;
for (const scenario of scenarios) {
  const mock = await startMockServer({ scenario });
  const { code, result } = await run(mock.url, scenario);
  await new Promise((r) => setTimeout(r, 150));
  const problem = result.ok ? expect[scenario]?.(mock.log) : result.error;
  await mock.close();
  if (code === 0 && !problem) {
    passed++;
    console.log(`ok   ${scenario}  ${JSON.stringify(result.timings)}${result.bytes ? ` bytes ${JSON.stringify(result.bytes.total)}` : ''}`);
  } else {
    failed++;
    console.log(`FAIL ${scenario}: ${problem ?? `exit ${code}`}`);
    console.log(`     ${JSON.stringify(result.steps)}`);
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
