#!/usr/bin/env node
// Drives the chat page in headless Chromium (Debian's /usr/bin/chromium through
// playwright-core; no browser is ever downloaded) and prints ONE JSON line:
//
//   {"ok":bool,"error":string|null,"scenario":NAME,"steps":[...],"timings":{...},
//    "shots":[...],"console":[...], "bytes":{...} (metrics only)}
//
// exit code 0 when ok, 1 otherwise (2 for bad arguments).
//
//   node web/tests/browser.mjs --url http://127.0.0.1:PORT/ --scenario NAME [--shots DIR]
//        [--prompt TEXT] [--timeout-ms N] [--runs N (metrics)] [--color-scheme light|dark]
//
// The scenarios depend only on the page's behaviour (its data-testid contract),
// not on what the model says: the server under test plays the matching turns.
//
//   tool-run  prompt → a tool card reaches done with its result visible → the
//             answer's text, response over; screenshots, also at 360 px wide
//   approve   prompt → a card awaits approval (Approve/Deny shown) → Approve →
//             the card reaches done and text follows it
//   deny      the same, Deny → the card shows denied and text follows it
//   stop      prompt → a card is running → Stop → the page leaves the streaming
//             state (Stop gone, Send enabled); the server should see the cancel
//   reload    a tool-run exchange, reload: the conversation is restored from
//             localStorage; New chat empties it (and it stays empty on reload)
//   metrics   cold loads: navigation start → prompt enabled and focusable (ms),
//             and the bytes of index.html, app.js and app.css
//   error     prompt → the server fails the request → a role=alert banner with
//             text (containing --expect when given), and the page is usable
//             again (Send enabled)
//   token     the page opened without its token shows the access gate (and no
//             chat); pasting the token from --url opens the chat
//   rlo       prompt → a card awaits approval with arguments holding bidi
//             controls → they are shown escaped exactly as the CLI shows them
//             (the first case of fixtures/printable/cases.json), with a
//             warning, nothing scrolled out of sight; then Deny
//   huge      prompt → a 1 MB answer is shown a window at a time ("Show more");
//             reload: restoring it never blocks the main thread for more than
//             200 ms (long tasks observed from navigation start)
//
// --url carries the server's token in its fragment (`/#token=...`), as `agent
// serve` prints it; every scenario checks the page takes it out of the address.
//
// Every request the page makes must go to the page's own origin; anything else
// is blocked and fails the scenario (the page must work without a network).

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const SCENARIOS = ['tool-run', 'approve', 'deny', 'stop', 'reload', 'metrics', 'error', 'token', 'rlo', 'huge'];

const DEFAULT_PROMPTS = {
  'tool-run': 'List the files in the workspace and read one of them.',
  approve: 'Please make the change in the workspace.',
  deny: 'Please make the change in the workspace.',
  stop: 'Run the long task.',
  reload: 'List the files in the workspace and read one of them.',
  metrics: '',
  error: 'Hello?',
  token: 'Hello?',
  rlo: 'Please make the change in the workspace.',
  huge: 'Write a lot.',
};

/** Longest main-thread task allowed while a chat is restored (ms). */
const RESTORE_BUDGET_MS = 200;

// ---- arguments ---------------------------------------------------------------------
function parseArgs(argv) {
  const out = { timeoutMs: 20_000, runs: 3 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--url') out.url = next();
    else if (a === '--scenario') out.scenario = next();
    else if (a === '--shots') out.shots = next();
    else if (a === '--prompt') out.prompt = next();
    else if (a === '--timeout-ms') out.timeoutMs = Number(next());
    else if (a === '--runs') out.runs = Number(next());
    else if (a === '--color-scheme') out.colorScheme = next();
    else if (a === '--expect') out.expect = next();
    else if (a === '-h' || a === '--help') out.help = true;
    else throw new Error(`unknown argument ${a}`);
  }
  return out;
}

let args;
try {
  args = parseArgs(process.argv.slice(2));
  if (args.help) {
    process.stdout.write(
      'usage: browser.mjs --url URL --scenario ' +
        SCENARIOS.join('|') +
        ' [--shots DIR] [--prompt TEXT] [--timeout-ms N] [--runs N] [--color-scheme light|dark]\n',
    );
    process.exit(0);
  }
  if (!args.url) throw new Error('--url is required');
  if (!SCENARIOS.includes(args.scenario)) throw new Error(`--scenario must be one of ${SCENARIOS.join(', ')}`);
  if (!Number.isFinite(args.timeoutMs) || args.timeoutMs <= 0) throw new Error('--timeout-ms must be a positive number');
  if (args.colorScheme && !['light', 'dark'].includes(args.colorScheme)) throw new Error('--color-scheme must be light or dark');
  new URL(args.url);
} catch (e) {
  process.stdout.write(
    JSON.stringify({ ok: false, error: `bad arguments: ${e.message}`, steps: [], timings: {} }) + '\n',
  );
  process.exit(2);
}

const T = args.timeoutMs;
const prompt = args.prompt ?? DEFAULT_PROMPTS[args.scenario];
const origin = new URL(args.url).origin;
const tokenInUrl = /[#&]token=([^&]*)/.exec(new URL(args.url).hash)?.[1] ?? null;
const t0 = Date.now();
const steps = [];
const timings = {};
const shots = [];
const consoleLog = [];
const offOrigin = [];
const pageErrors = [];
const cspViolations = [];
let shotN = 0;
let lastSentAt = 0;
let bytes;

if (args.shots) mkdirSync(args.shots, { recursive: true });

// ---- helpers -------------------------------------------------------------------------
const sel = {
  prompt: '[data-testid="prompt"]',
  send: '[data-testid="send"]',
  stop: '[data-testid="stop"]',
  clear: '[data-testid="clear"]',
  user: '[data-testid="message-user"]',
  assistant: '[data-testid="message-assistant"]',
  card: '[data-testid="tool-card"]',
  approve: '[data-testid="approve"]',
  deny: '[data-testid="deny"]',
  banner: '[data-testid="error-banner"]',
  gate: '[data-testid="access-gate"]',
  more: '[data-testid="long-text-more"]',
  tools: '[data-testid="tools-panel"]',
  usage: '[data-testid="usage"]',
};
const card = (state) => `${sel.card}[data-state="${state}"]`;

async function step(name, fn) {
  const start = Date.now();
  try {
    const detail = await fn();
    steps.push({ name, ok: true, ms: Date.now() - start, ...(detail === undefined ? {} : { detail }) });
    return detail;
  } catch (e) {
    steps.push({ name, ok: false, ms: Date.now() - start, error: String(e?.message ?? e).split('\n')[0] });
    e.step = name;
    throw e;
  }
}

async function shot(page, state, opts = {}) {
  if (!args.shots) return;
  shotN += 1;
  const file = join(args.shots, `${args.scenario}-${shotN}-${state}.png`);
  await page.screenshot({ path: file, fullPage: false, animations: 'disabled', caret: 'hide', ...opts });
  shots.push(file);
}

/** What the page shows, for error messages. */
async function pageSummary(page) {
  try {
    return await page.evaluate((s) => {
      const cards = [...document.querySelectorAll(s.card)].map(
        (c) => `${c.getAttribute('data-tool')}:${c.getAttribute('data-state')}`,
      );
      const banner = document.querySelector(s.banner)?.textContent?.trim();
      return {
        users: document.querySelectorAll(s.user).length,
        assistants: document.querySelectorAll(s.assistant).length,
        cards,
        busy: !!document.querySelector(s.stop),
        banner: banner ?? null,
      };
    }, sel);
  } catch {
    return null;
  }
}

/** Waits until the response is over: Stop gone, Send visible and enabled. */
async function waitIdle(page, timeout = T) {
  await page.waitForFunction(
    (s) => {
      const send = document.querySelector(s.send);
      return !document.querySelector(s.stop) && send && !send.disabled;
    },
    sel,
    { timeout },
  );
}

async function openPage(context) {
  const page = await context.newPage();
  // Violations the page catches (e.g. a probe for eval) are not logged: listen for them.
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) =>
      console.error(`Content Security Policy violation: ${e.violatedDirective} blocked ${e.blockedURI || 'inline code'}`),
    );
  });
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') consoleLog.push(`${m.type()}: ${m.text()}`.slice(0, 500));
    if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text().slice(0, 300));
  });
  page.on('pageerror', (e) => pageErrors.push(String(e?.message ?? e).slice(0, 500)));
  return page;
}

async function load(page, url = args.url) {
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: T });
  await page.locator(sel.prompt).waitFor({ state: 'visible', timeout: T });
  await page.waitForFunction((s) => !document.querySelector(s)?.disabled, sel.prompt, { timeout: T });
  if (tokenInUrl !== null) {
    const hash = await page.evaluate(() => window.location.hash);
    if (hash.includes('token=')) throw new Error(`the token stayed in the address bar (${hash.slice(0, 20)}…)`);
  }
}

/** Types the prompt and presses Enter; checks the input is cleared and focused again. */
async function submit(page, text = prompt) {
  const box = page.locator(sel.prompt);
  await box.click();
  await box.fill(text);
  const sentAt = Date.now();
  await box.press('Enter');
  await page.locator(sel.user).last().waitFor({ state: 'visible', timeout: T });
  const after = await page.evaluate((s) => {
    const el = document.querySelector(s);
    return { value: el?.value ?? null, focused: document.activeElement === el };
  }, sel.prompt);
  if (after.value !== '') throw new Error(`the prompt was not cleared after sending (value ${JSON.stringify(after.value)})`);
  if (!after.focused) throw new Error('focus did not return to the prompt after sending');
  lastSentAt = sentAt;
}

/** Text of the assistant message's text parts after the card `callId` (the last message's, when null). */
async function textAfter(page, callId) {
  return page.evaluate(
    ({ s, callId }) => {
      const msgs = [...document.querySelectorAll(s.assistant)];
      const msg = callId
        ? msgs.find((m) => m.querySelector(`${s.card}[data-tool-call-id="${CSS.escape(callId)}"]`))
        : msgs[msgs.length - 1];
      if (!msg) return '';
      const cardEl = callId ? msg.querySelector(`${s.card}[data-tool-call-id="${CSS.escape(callId)}"]`) : null;
      return [...msg.querySelectorAll('[data-testid="assistant-text"]')]
        .filter((t) => !cardEl || cardEl.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING)
        .map((t) => t.textContent ?? '')
        .join('\n')
        .trim();
    },
    { s: sel, callId },
  );
}

async function waitTextAfter(page, callId, timeout = T) {
  await page.waitForFunction(
    ({ s, callId }) => {
      const msgs = [...document.querySelectorAll(s.assistant)];
      const msg = callId
        ? msgs.find((m) => m.querySelector(`${s.card}[data-tool-call-id="${CSS.escape(callId)}"]`))
        : msgs[msgs.length - 1];
      if (!msg) return false;
      const cardEl = callId ? msg.querySelector(`${s.card}[data-tool-call-id="${CSS.escape(callId)}"]`) : null;
      return [...msg.querySelectorAll('[data-testid="assistant-text"]')].some(
        (t) =>
          (!cardEl || cardEl.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING) &&
          (t.textContent ?? '').trim() !== '',
      );
    },
    { s: sel, callId },
    { timeout },
  );
  return textAfter(page, callId);
}

async function noBanner(page) {
  const banner = page.locator(sel.banner);
  if (await banner.count()) throw new Error(`error banner shown: ${(await banner.first().textContent())?.trim()}`);
}

async function conversation(page) {
  return page.evaluate((s) => {
    const items = [...document.querySelectorAll(`${s.user}, ${s.assistant}`)].map((m) => ({
      role: m.matches(s.user) ? 'user' : 'assistant',
      text: (m.textContent ?? '').replace(/\s+/g, ' ').trim().slice(0, 2000),
    }));
    const cards = [...document.querySelectorAll(s.card)].map((c) => ({
      tool: c.getAttribute('data-tool'),
      state: c.getAttribute('data-state'),
      id: c.getAttribute('data-tool-call-id'),
    }));
    return { items, cards };
  }, sel);
}

// ---- scenarios -----------------------------------------------------------------------
async function toolRun(context, { narrow = true } = {}) {
  const page = await openPage(context);
  await step('load', async () => {
    await load(page);
    await page.locator(sel.tools).waitFor({ state: 'attached', timeout: T });
  });
  await shot(page, 'empty');
  await step('submit', () => submit(page));
  const sentAt = lastSentAt;
  await shot(page, 'sent');
  const done = await step('tool card done with result', async () => {
    const c = page.locator(card('done')).first();
    await c.waitFor({ state: 'visible', timeout: T });
    timings.first_tool_done_ms = Date.now() - sentAt;
    // Short results are shown; long ones are collapsed in <details>: open it.
    const details = c.locator('details.tool-long');
    if (await details.count()) await details.first().locator('summary').click();
    const result = c.locator('[data-testid="tool-result"]').first();
    await result.waitFor({ state: 'visible', timeout: T });
    const text = ((await result.textContent()) ?? '').trim();
    if (!text) throw new Error('the done card shows no result text');
    const tool = await c.getAttribute('data-tool');
    const callId = await c.getAttribute('data-tool-call-id');
    return { tool, callId, result: text.slice(0, 200), collapsed: (await details.count()) > 0 };
  });
  await shot(page, 'tool-done');
  await step('final text', async () => {
    await waitIdle(page);
    const text = await waitTextAfter(page, done.callId);
    timings.answer_complete_ms = Date.now() - sentAt;
    await noBanner(page);
    const usage = (await page.locator(sel.usage).count())
      ? ((await page.locator(sel.usage).last().textContent()) ?? '').trim()
      : null;
    const c = await conversation(page);
    const stuck = c.cards.filter((x) => ['running', 'input-streaming'].includes(x.state));
    if (stuck.length) throw new Error(`cards still running after the answer: ${JSON.stringify(stuck)}`);
    return { text: text.slice(0, 300), usage, cards: c.cards.map((x) => `${x.tool}:${x.state}`) };
  });
  await shot(page, 'final');
  if (narrow) {
    await step('360px wide', async () => {
      await page.setViewportSize({ width: 360, height: 740 });
      await page.waitForTimeout(100);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      await shot(page, 'final-360px');
      if (overflow > 0) throw new Error(`the page is ${overflow}px wider than a 360px screen`);
      await page.setViewportSize({ width: 1280, height: 800 });
      return { overflowPx: overflow };
    });
  }
  return page;
}

async function decide(context, approve) {
  const page = await openPage(context);
  await step('load', () => load(page));
  await step('submit', () => submit(page));
  const sentAt = lastSentAt;
  const callId = await step('card awaits approval', async () => {
    const c = page.locator(card('awaiting-approval')).first();
    await c.waitFor({ state: 'visible', timeout: T });
    await c.locator(sel.approve).waitFor({ state: 'visible', timeout: T });
    await c.locator(sel.deny).waitFor({ state: 'visible', timeout: T });
    timings.approval_shown_ms = Date.now() - sentAt;
    await waitIdle(page); // the response ended (finish: tool-calls)
    return c.getAttribute('data-tool-call-id');
  });
  await shot(page, 'awaiting-approval');
  const thisCard = page.locator(`${sel.card}[data-tool-call-id="${callId}"]`);
  const clickedAt = await step(approve ? 'click Approve' : 'click Deny', async () => {
    const at = Date.now();
    await thisCard.locator(approve ? sel.approve : sel.deny).click();
    return at;
  });
  const want = approve ? 'done' : 'denied';
  await step(`card ${want}`, async () => {
    await page.locator(`${sel.card}[data-tool-call-id="${callId}"][data-state="${want}"]`).waitFor({ timeout: T });
    timings[approve ? 'approved_to_done_ms' : 'denied_to_denied_ms'] = Date.now() - clickedAt;
    if (await thisCard.locator(`${sel.approve}, ${sel.deny}`).count())
      throw new Error('Approve/Deny still shown after the decision');
    if (approve) {
      const text = ((await thisCard.locator('[data-testid="tool-result"]').first().textContent()) ?? '').trim();
      return { result: text.slice(0, 200) };
    }
  });
  await step('follow-up text', async () => {
    await waitIdle(page);
    const text = await waitTextAfter(page, callId);
    timings.follow_up_ms = Date.now() - clickedAt;
    await noBanner(page);
    const c = await conversation(page);
    const state = c.cards.find((x) => x.id === callId)?.state;
    if (state !== want) throw new Error(`the card ended in ${state}, not ${want}`);
    return { text: text.slice(0, 300), assistants: c.items.filter((i) => i.role === 'assistant').length };
  });
  await shot(page, approve ? 'approved-done' : 'denied');
  return page;
}

async function stopScenario(context) {
  const page = await openPage(context);
  await step('load', () => load(page));
  await step('submit', () => submit(page));
  const sentAt = lastSentAt;
  const callId = await step('card running', async () => {
    const c = page.locator(card('running')).first();
    await c.waitFor({ state: 'visible', timeout: T });
    timings.running_shown_ms = Date.now() - sentAt;
    await page.locator(sel.stop).waitFor({ state: 'visible', timeout: T });
    return c.getAttribute('data-tool-call-id');
  });
  await shot(page, 'running');
  await step('click Stop', async () => {
    const at = Date.now();
    await page.locator(sel.stop).click();
    await waitIdle(page);
    timings.stop_to_idle_ms = Date.now() - at;
    const focused = await page.evaluate((s) => document.activeElement === document.querySelector(s), sel.prompt);
    const state = await page
      .locator(`${sel.card}[data-tool-call-id="${callId}"]`)
      .getAttribute('data-state')
      .catch(() => null);
    if (state === 'running' || state === 'input-streaming')
      throw new Error(`the stopped card still shows ${state}`);
    await noBanner(page);
    return { cardState: state, focusOnPrompt: focused };
  });
  await shot(page, 'stopped');
  return page;
}

async function reloadScenario(context) {
  const page = await toolRun(context, { narrow: false });
  const before = await step('conversation before reload', async () => {
    const c = await conversation(page);
    if (!c.items.length) throw new Error('no messages');
    return c;
  });
  await step('reload restores', async () => {
    await page.reload({ waitUntil: 'domcontentloaded', timeout: T });
    await page.locator(sel.prompt).waitFor({ state: 'visible', timeout: T });
    await page.locator(sel.user).first().waitFor({ timeout: T });
    // The tool list (effect badges on the cards) arrives with its own request:
    // wait for it as the first load does, then give the render a moment.
    await page.locator(sel.tools).waitFor({ state: 'attached', timeout: T });
    let after = await conversation(page);
    for (let waited = 0; waited < T && JSON.stringify(after.items) !== JSON.stringify(before.items); waited += 50) {
      await page.waitForTimeout(50);
      after = await conversation(page);
    }
    if (JSON.stringify(after.items) !== JSON.stringify(before.items))
      throw new Error(
        `restored conversation differs: before ${JSON.stringify(before.items).slice(0, 300)} after ${JSON.stringify(after.items).slice(0, 300)}`,
      );
    const states = (c) => JSON.stringify(c.cards.map((x) => [x.id, x.state]));
    if (states(after) !== states(before))
      throw new Error(`tool cards differ after reload: ${states(before)} → ${states(after)}`);
    return { messages: after.items.length, cards: after.cards.length };
  });
  await shot(page, 'restored');
  await step('New chat clears', async () => {
    await page.locator(sel.clear).click();
    await page.waitForFunction((s) => !document.querySelector(`${s.user}, ${s.assistant}`), sel, { timeout: T });
    const focused = await page.evaluate((s) => document.activeElement === document.querySelector(s), sel.prompt);
    await page.reload({ waitUntil: 'domcontentloaded', timeout: T });
    await page.locator(sel.prompt).waitFor({ state: 'visible', timeout: T });
    await page.waitForTimeout(200);
    const left = await page.locator(`${sel.user}, ${sel.assistant}`).count();
    if (left) throw new Error(`${left} messages came back after clearing and reloading`);
    const stored = await page.evaluate(() =>
      Object.keys(localStorage).filter((k) => k.startsWith('agent-web:chat:')),
    );
    if (stored.length) throw new Error(`conversations still stored: ${stored.join(', ')}`);
    return { focusOnPrompt: focused };
  });
  await shot(page, 'cleared');
  return page;
}

async function metricsScenario(browser) {
  const runs = [];
  let page;
  let context;
  for (let i = 0; i < Math.max(1, args.runs); i++) {
    context = await browser.newContext(contextOptions);
    await guard(context);
    page = await openPage(context);
    const requests = [];
    page.on('request', (r) => requests.push(new URL(r.url()).pathname));
    const run = await step(`cold load ${i + 1}`, async () => {
      await page.goto(args.url, { waitUntil: 'commit', timeout: T });
      const tti = await page.waitForFunction(
        (s) => {
          const el = document.querySelector(s);
          if (!el || el.disabled) return false;
          el.focus();
          return document.activeElement === el ? performance.now() : false;
        },
        sel.prompt,
        { timeout: T, polling: 'raf' },
      );
      const ttiMs = await tti.jsonValue();
      await page.waitForLoadState('load', { timeout: T });
      await page.waitForTimeout(300); // let /api/tools and late requests show up
      const perf = await page.evaluate(() => {
        const nav = performance.getEntriesByType('navigation')[0];
        const res = performance.getEntriesByType('resource');
        const pick = (e) =>
          e && { transfer: e.transferSize, encoded: e.encodedBodySize, decoded: e.decodedBodySize };
        const byPath = (p) => res.find((r) => new URL(r.name).pathname === p);
        const fcp = performance.getEntriesByName('first-contentful-paint')[0];
        return {
          domContentLoaded: nav?.domContentLoadedEventEnd,
          load: nav?.loadEventEnd,
          fcp: fcp?.startTime,
          appJsLoaded: byPath('/assets/app.js')?.responseEnd,
          files: {
            'index.html': pick(nav),
            'assets/app.js': pick(byPath('/assets/app.js')),
            'assets/app.css': pick(byPath('/assets/app.css')),
          },
        };
      });
      const ms = (v) => (typeof v === 'number' ? Math.round(v) : null);
      return {
        ttiMs: Math.round(ttiMs),
        fcpMs: ms(perf.fcp),
        appJsLoadedMs: ms(perf.appJsLoaded),
        domContentLoadedMs: ms(perf.domContentLoaded),
        loadMs: ms(perf.load),
        files: perf.files,
        requests,
      };
    });
    runs.push(run);
    if (i < args.runs - 1) await context.close();
  }
  const sorted = runs.map((r) => r.ttiMs).sort((a, b) => a - b);
  timings.tti_ms = sorted[Math.floor(sorted.length / 2)];
  timings.tti_runs_ms = runs.map((r) => r.ttiMs);
  const lastRun = runs[runs.length - 1];
  timings.first_contentful_paint_ms = lastRun.fcpMs;
  timings.app_js_loaded_ms = lastRun.appJsLoadedMs;
  timings.dom_content_loaded_ms = lastRun.domContentLoadedMs;
  timings.load_ms = lastRun.loadMs;
  const files = runs[0].files;
  bytes = { ...files, total: {} };
  for (const k of ['transfer', 'encoded', 'decoded'])
    bytes.total[k] = Object.values(files).reduce((n, f) => n + (f?.[k] ?? 0), 0);
  await step('requests', async () => {
    const missing = Object.entries(files).filter(([, f]) => !f).map(([k]) => k);
    if (missing.length) throw new Error(`not loaded: ${missing.join(', ')}`);
    const extra = runs[0].requests.filter((p) => !['/', '/index.html', '/assets/app.js', '/assets/app.css', '/api/tools'].includes(p));
    if (extra.length) throw new Error(`unexpected requests at load: ${extra.join(', ')}`);
    return { requests: runs[0].requests };
  });
  await shot(page, 'loaded');
  return page;
}

async function errorScenario(context) {
  const page = await openPage(context);
  await step('load', () => load(page));
  await step('submit', () => submit(page));
  await step('error banner', async () => {
    const banner = page.locator(`${sel.banner}[role="alert"]`);
    await banner.waitFor({ state: 'visible', timeout: T });
    const text = ((await banner.textContent()) ?? '').trim();
    if (!text) throw new Error('the banner is empty');
    if (args.expect && !text.includes(args.expect))
      throw new Error(`the banner does not say ${JSON.stringify(args.expect)}: ${text.slice(0, 300)}`);
    await waitIdle(page);
    return { text: text.slice(0, 300) };
  });
  await shot(page, 'error');
  return page;
}

async function tokenScenario(context) {
  const page = await openPage(context);
  const bare = new URL(args.url);
  bare.hash = '';
  await step('no token: the access gate', async () => {
    await page.goto(bare.toString(), { waitUntil: 'domcontentloaded', timeout: T });
    await page.locator(sel.gate).waitFor({ state: 'visible', timeout: T });
    if (await page.locator(sel.prompt).count()) throw new Error('the chat is shown without a token');
    return { text: ((await page.locator(sel.gate).textContent()) ?? '').trim().slice(0, 160) };
  });
  await shot(page, 'gate');
  await step('paste the token', async () => {
    if (!tokenInUrl) throw new Error('--url has no #token=');
    await page.locator('[data-testid="token-input"]').fill(decodeURIComponent(tokenInUrl));
    await page.locator('[data-testid="token-submit"]').click();
    await page.locator(sel.prompt).waitFor({ state: 'visible', timeout: T });
    await page.locator(`${sel.tools} li`).first().waitFor({ state: 'attached', timeout: T });
  });
  await step('a wrong token is refused again', async () => {
    await page.evaluate(() => localStorage.setItem('agent-web:token', 'wrong'));
    await page.reload({ waitUntil: 'domcontentloaded', timeout: T });
    await page.locator(sel.gate).waitFor({ state: 'visible', timeout: T });
  });
  await shot(page, 'refused');
  return page;
}

async function rloScenario(context) {
  const page = await openPage(context);
  const { readFile } = await import('node:fs/promises');
  const cases = JSON.parse(await readFile(new URL('../../fixtures/printable/cases.json', import.meta.url), 'utf8'));
  const expected = cases.cases[0].shown;
  await step('load', () => load(page));
  await step('submit', () => submit(page));
  await step('arguments shown escaped, with a warning', async () => {
    const c = page.locator(card('awaiting-approval')).first();
    await c.waitFor({ state: 'visible', timeout: T });
    await waitIdle(page);
    const shown = await c.locator('[data-testid="tool-args"]').evaluate((el) => ({
      text: el.textContent ?? '',
      clipped: el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1,
    }));
    if (!shown.text.includes(expected))
      throw new Error(`arguments ${JSON.stringify(shown.text)} do not show ${JSON.stringify(expected)}`);
    const raw = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/u.exec(await c.textContent());
    if (raw) throw new Error(`a raw U+${raw[0].codePointAt(0).toString(16)} is on the card`);
    if (shown.clipped) throw new Error('the arguments are scrolled or cut on the approval card');
    const warning = c.locator('[data-testid="hidden-warning"]');
    await warning.waitFor({ state: 'visible', timeout: T });
    return { args: shown.text.slice(0, 200) };
  });
  await shot(page, 'rlo-approval');
  await step('deny', async () => {
    const c = page.locator(card('awaiting-approval')).first();
    await c.locator(sel.deny).click();
    await page.locator(card('denied')).first().waitFor({ timeout: T });
    await waitIdle(page);
  });
  return page;
}

async function hugeScenario(context) {
  const page = await openPage(context);
  await page.addInitScript(() => {
    window.__longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longTasks.push({ start: e.startTime, ms: e.duration });
    }).observe({ type: 'longtask', buffered: true });
  });
  await step('load', () => load(page));
  await step('submit', () => submit(page));
  const sentAt = lastSentAt;
  await step('a window of the answer, and Show more', async () => {
    await page.locator(sel.more).first().waitFor({ state: 'visible', timeout: T });
    await waitIdle(page);
    timings.answer_complete_ms = Date.now() - sentAt;
    const rendered = await page.locator('[data-testid="assistant-text"]').last().evaluate((el) => el.textContent?.length ?? 0);
    if (rendered > 200_000) throw new Error(`${rendered} characters rendered at once`);
    return { rendered };
  });
  await step('reload: restored without a long task over the budget', async () => {
    await page.reload({ waitUntil: 'domcontentloaded', timeout: T });
    await page.locator(sel.more).first().waitFor({ state: 'visible', timeout: T });
    await page.waitForTimeout(1000); // tasks after the first paint count too
    const tasks = await page.evaluate(() => window.__longTasks);
    const longest = tasks.reduce((m, t) => Math.max(m, t.ms), 0);
    timings.restore_longest_task_ms = Math.round(longest);
    if (longest > RESTORE_BUDGET_MS)
      throw new Error(`restoring blocked the main thread for ${Math.round(longest)} ms (budget ${RESTORE_BUDGET_MS} ms)`);
    return { longTasks: tasks.length, longestMs: Math.round(longest) };
  });
  await shot(page, 'huge-restored');
  await step('Show more adds a window', async () => {
    const before = await page.locator('[data-testid="assistant-text"]').last().evaluate((el) => el.textContent?.length ?? 0);
    const at = Date.now();
    await page.locator(`${sel.more} button`).first().click();
    await page.waitForFunction(
      ({ n }) => {
        const all = document.querySelectorAll('[data-testid="assistant-text"]');
        return (all[all.length - 1]?.textContent?.length ?? 0) > n;
      },
      { n: before },
      { timeout: T },
    );
    timings.show_more_ms = Date.now() - at;
    return { before };
  });
  return page;
}

// ---- run -----------------------------------------------------------------------------
async function guard(context) {
  // Only the page's own origin; data: URLs never reach the router.
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(origin + '/') || url === origin) return route.continue();
    offOrigin.push(url.slice(0, 200));
    return route.abort('blockedbyclient');
  });
}

const contextOptions = { viewport: { width: 1280, height: 800 }, colorScheme: args.colorScheme ?? 'light' };

let browser;
let ok = false;
let error = null;
let lastPage;
try {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    // playwright-core gives every launch a fresh, temporary user-data dir.
    args: [
      '--headless=new',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    timeout: 30_000,
  });
  timings.launch_ms = Date.now() - t0;
  if (args.scenario === 'metrics') {
    lastPage = await metricsScenario(browser);
  } else {
    const context = await browser.newContext(contextOptions);
    await guard(context);
    context.setDefaultTimeout(T);
    const run = {
      'tool-run': () => toolRun(context),
      approve: () => decide(context, true),
      deny: () => decide(context, false),
      stop: () => stopScenario(context),
      reload: () => reloadScenario(context),
      error: () => errorScenario(context),
      token: () => tokenScenario(context),
      rlo: () => rloScenario(context),
      huge: () => hugeScenario(context),
    }[args.scenario];
    lastPage = await run();
  }
  if (offOrigin.length) throw new Error(`the page requested other origins: ${offOrigin.join(', ')}`);
  if (pageErrors.length) throw new Error(`uncaught errors in the page: ${pageErrors.join(' | ')}`);
  if (cspViolations.length) throw new Error(`content security policy violations: ${cspViolations.join(' | ')}`);
  ok = true;
} catch (e) {
  error = `${e.step ? `${e.step}: ` : ''}${String(e?.message ?? e).split('\n')[0]}`;
  const pages = browser?.contexts().flatMap((c) => c.pages()) ?? [];
  const page = pages[pages.length - 1] ?? lastPage;
  if (page) {
    const summary = await pageSummary(page);
    if (summary) error += ` [page: ${JSON.stringify(summary)}]`;
    await shot(page, 'failure').catch(() => {});
  }
} finally {
  timings.total_ms = Date.now() - t0;
  await browser?.close().catch(() => {});
}

const out = { ok, error, scenario: args.scenario, steps, timings, shots, console: consoleLog };
if (bytes) out.bytes = bytes;
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(ok ? 0 : 1);
