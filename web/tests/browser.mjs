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
//        [--expect TEXT] [--other-token TOKEN] [--slow-cpu N] [--formatter-delay-ms N]
//
// --slow-cpu N runs the page's scripts N times slower (Chromium's CPU
// throttling); --formatter-delay-ms N holds the formatter (/assets/highlight.js)
// back that long: together, a loaded machine where the formatter arrives while
// an answer's blocks render.
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
//             and the bytes of index.html, app.js and app.css; fails when the
//             first load is over 200 KB gzipped (204,800 bytes)
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
//   conversations  (a server with a store; two answers) prompt A → the sidebar
//             lists the chat, titled from the prompt; a second tab shows the same
//             messages; renamed there, the first tab shows the title after a
//             reload; New chat, prompt B → two entries; the first opened with the
//             keyboard shows its messages; the second deleted (after its
//             confirmation) → one entry, still one after a reload
//   resume    (a store; one slow answer) prompt, the first words, reload → the
//             same answer continues (the page reattaches) and ends with --expect
//             (its last word); one user and one assistant message
//   graph     (two graphs: a default and "researcher") the picker lists
//             both; researcher picked, prompt → the answer, the picker replaced by
//             the label "researcher"; New chat → the picker is back at the default
//   markdown  prompt → an answer (formatted once the lazy formatter,
//             /assets/highlight.js, has loaded) with a GFM table, lists, a rust
//             code block (highlighted by the page's formatting worker), an https
//             link (new tab, noopener), a javascript: link (not a link) and raw
//             <img> HTML (shown as text, no element, no dialog)
//   attach    an 8x8 PNG through the paperclip input and a text file dropped on
//             the composer → chips; prompt → the user message shows the image
//             (img alt = file name) and the text file; the answer; then a 5 MB
//             text file → attach-error names it and the limit, nothing added
//   tool-stream  prompt → an app__write card whose arguments stream (growing,
//             collapsed behind Show all), then awaits approval showing all 4,000
//             characters of the value, not cut, no toggle, and its effect in
//             words; Deny → the follow-up text
//   model-label  prompt → the answer → the header's model label holds --expect
//             (an "offline" hint shown when the name says offline); none before
//   a11y      axe-core (wcag2a, wcag2aa, wcag21aa) on the empty page, after a
//             tool-run exchange and with a card awaiting approval, in light and
//             dark: no serious or critical violation; keyboard only: the Tab order
//             (sidebar, graph picker, messages, composer), a prompt sent with
//             Enter, Approve reached with the keyboard and pressed with Enter,
//             a visible focus outline on buttons, the live region announced the
//             answer ("I echoed your text." / "Written.")
//   pathological  prompt → an answer in several text parts of pathological
//             markdown (quotes and lists nested 500 deep, 300 code blocks, code
//             blocks just under the highlight cap past "Show more", a table row
//             of thousands of cells, bracket and setext bombs): every part shown
//             in full ("Show more" until none is left), nothing waiting to be
//             formatted, the last word (--expect) visible, quotes and lists
//             nested at most 16 deep, and no main-thread task over 200 ms from
//             the prompt until a second after the answer is complete
//   token-switch  (--other-token: a second token the server accepts) the page
//             has token A (from --url); opening /#token=B asks which to use, the
//             fragment already gone and no API request made while it asks (axe
//             on the question); "Keep" → the next chat request carries A; opening
//             /#token=B again, "Use the link's token" → B is stored and the next
//             chat request carries it
//   screens   an exchange with a tool card and a markdown answer, screenshots
//             screens-1280x800.png and screens-390x844.png (and -dark variants)
//             into --shots; no horizontal overflow at 390 px
//
// --url carries the server's token in its fragment (`/#token=...`), as `agent
// serve` prints it; every scenario checks the page takes it out of the address.
//
// Every request the page makes must go to the page's own origin; anything else
// is blocked and fails the scenario (the page must work without a network).

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { deflateSync, gzipSync } from 'node:zlib';

const SCENARIOS = [
  'tool-run',
  'approve',
  'deny',
  'stop',
  'reload',
  'metrics',
  'error',
  'token',
  'rlo',
  'huge',
  'conversations',
  'resume',
  'graph',
  'markdown',
  'attach',
  'tool-stream',
  'model-label',
  'a11y',
  'screens',
  'pathological',
  'token-switch',
];

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
  conversations: 'Tell me about the first topic.',
  resume: 'Tell me a long story, slowly.',
  graph: 'Research the notes about the release.',
  markdown: 'Show me some markdown.',
  attach: 'What is in the image?',
  'tool-stream': 'Write the long value into the app.',
  'model-label': 'Say hello.',
  a11y: 'Echo my text.',
  screens: 'What does the README say?',
  pathological: 'Show me the worst markdown you can.',
  'token-switch': 'Which account is this?',
};

/** The second prompt of scenarios that send two. */
const SECOND_PROMPTS = {
  conversations: 'Now the second topic, please.',
  'token-switch': 'And which account is this?',
  a11y: 'Write the greeting into the app.',
};

/** The first load's gzipped bytes may be at most this (index.html, app.js, app.css). */
const FIRST_LOAD_BUDGET = 204_800;

/** Longest main-thread task allowed while a chat is restored (ms). */
const RESTORE_BUDGET_MS = 200;

/** Longest main-thread task allowed while pathological markdown streams in and renders (ms). */
const RENDER_BUDGET_MS = 200;

/** Deepest nesting of quotes and lists the pathological answer may render as. */
const MAX_RENDERED_NESTING = 16;

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
    else if (a === '--other-token') out.otherToken = next();
    else if (a === '--slow-cpu') out.slowCpu = Number(next());
    else if (a === '--formatter-delay-ms') out.formatterDelayMs = Number(next());
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
        ' [--shots DIR] [--prompt TEXT] [--timeout-ms N] [--runs N] [--color-scheme light|dark] [--expect TEXT] [--other-token TOKEN]\n',
    );
    process.exit(0);
  }
  if (!args.url) throw new Error('--url is required');
  if (!SCENARIOS.includes(args.scenario)) throw new Error(`--scenario must be one of ${SCENARIOS.join(', ')}`);
  if (!Number.isFinite(args.timeoutMs) || args.timeoutMs <= 0) throw new Error('--timeout-ms must be a positive number');
  if (args.slowCpu !== undefined && !(args.slowCpu >= 1)) throw new Error('--slow-cpu must be a number >= 1');
  if (args.formatterDelayMs !== undefined && !(args.formatterDelayMs >= 0))
    throw new Error('--formatter-delay-ms must be a number >= 0');
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
  sidebar: '[data-testid="sidebar"]',
  chatItem: '[data-testid="chat-item"]',
  newChat: '[data-testid="new-chat"]',
  graphPicker: '[data-testid="graph-picker"]',
  graphLabel: '[data-testid="graph-label"]',
  attachInput: '[data-testid="attach-input"]',
  attachError: '[data-testid="attach-error"]',
  chip: '[data-testid="attachment-chip"]',
  attachment: '[data-testid="attachment"]',
  argsToggle: '[data-testid="tool-args-toggle"]',
  effectWords: '[data-testid="effect-words"]',
  modelLabel: '[data-testid="model-label"]',
  live: '[data-testid="live-region"]',
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
  // The console's "Failed to load resource" does not say which: the log does.
  page.on('response', (r) => {
    if (r.status() >= 400) consoleLog.push(`response: ${r.status()} ${r.request().method()} ${new URL(r.url()).pathname}`);
  });
  if (args.slowCpu) {
    const cdp = await context.newCDPSession(page);
    await cdp.send('Emulation.setCPUThrottlingRate', { rate: args.slowCpu });
  }
  const delay = args.formatterDelayMs;
  if (delay) {
    await page.route('**/assets/highlight.js', async (route) => {
      await new Promise((resolve) => setTimeout(resolve, delay));
      await route.continue();
    });
  }
  return page;
}

/** After a load: the page must not open on an error (a failed reattach, a chat it cannot read). */
async function settledWithoutError(page) {
  await page.waitForTimeout(60);
  await noBanner(page);
}

async function load(page, url = args.url) {
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: T });
  await page.locator(sel.prompt).waitFor({ state: 'visible', timeout: T });
  await page.waitForFunction((s) => !document.querySelector(s)?.disabled, sel.prompt, { timeout: T });
  await settledWithoutError(page);
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

/** Waits until every block of the answers is formatted (none is marked data-pending). */
async function formatted(page, timeout = T) {
  await page.waitForFunction((s) => !document.querySelector(`${s.assistant} [data-pending]`), sel, { timeout });
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
    await settledWithoutError(page);
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
    // The page, its script and styles, and what it asks the API at load (the
    // highlighter is loaded only for an answer with code).
    const allowed = [
      /^\/(index\.html)?$/,
      /^\/assets\/app\.(js|css)$/,
      /^\/api\/(tools|graphs|limits|chats)$/,
      /^\/api\/chats\/[^/]+$/,
      /^\/api\/chat\/[^/]+\/stream$/,
    ];
    const extra = runs[0].requests.filter((p) => !allowed.some((re) => re.test(p)));
    if (extra.length) throw new Error(`unexpected requests at load: ${extra.join(', ')}`);
    return { requests: runs[0].requests };
  });
  await step('first load under 200 KB gzipped', async () => {
    // Gzipped here (level 6, as a server compresses by default), whatever the
    // server sent, so the budget does not depend on its compression.
    const gz = {};
    for (const path of ['/', '/assets/app.js', '/assets/app.css']) {
      const res = await page.request.get(new URL(path, args.url).toString(), { headers: { 'accept-encoding': 'identity' } });
      if (!res.ok()) throw new Error(`${path}: HTTP ${res.status()}`);
      const body = await res.body();
      gz[path === '/' ? 'index.html' : path.slice(1)] = { raw: body.length, gzip: gzipSync(body, { level: 6 }).length };
    }
    const total = Object.values(gz).reduce((n, f) => n + f.gzip, 0);
    bytes.gzip = { ...gz, total };
    timings.first_load_gzip_bytes = total;
    if (total > FIRST_LOAD_BUDGET) throw new Error(`the first load is ${total} bytes gzipped, over ${FIRST_LOAD_BUDGET}`);
    return { gzip: total, budget: FIRST_LOAD_BUDGET };
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

// ---- helpers of the newer scenarios ---------------------------------------------------

/** The conversations the sidebar lists: id, title, whether it is the open one. */
async function chatList(page) {
  return page.evaluate((s) =>
    [...document.querySelectorAll(s.chatItem)].map((li) => ({
      id: li.getAttribute('data-chat-id'),
      title: (li.querySelector('.chat-title')?.textContent ?? '').trim(),
      current: li.getAttribute('data-current') === 'true',
    })),
    sel,
  );
}

/** Waits until the sidebar's list satisfies `test` (polling); returns it. */
async function waitList(page, test, what, timeout = T) {
  const until = Date.now() + timeout;
  let list = await chatList(page);
  while (!test(list)) {
    if (Date.now() > until) throw new Error(`${what}; the list is ${JSON.stringify(list)}`);
    await page.waitForTimeout(50);
    list = await chatList(page);
  }
  return list;
}

/** The words of the conversation: each user message and each text part of the answers. */
async function messageTexts(page) {
  return page.evaluate((s) =>
    [...document.querySelectorAll(`${s.user}, ${s.assistant} [data-testid="assistant-text"]`)].map((el) =>
      (el.textContent ?? '').replace(/\s+/g, ' ').trim(),
    ),
    sel,
  );
}

/** Reloads and waits for the chat to be usable again. */
async function reloadPage(page) {
  await page.reload({ waitUntil: 'domcontentloaded', timeout: T });
  await page.locator(sel.prompt).waitFor({ state: 'visible', timeout: T });
  await page.waitForFunction((s) => !document.querySelector(s)?.disabled, sel.prompt, { timeout: T });
  await settledWithoutError(page);
}

/** Sends `text` and waits until the answer is over and has text; returns that text. */
async function ask(page, text) {
  await submit(page, text);
  await waitIdle(page);
  const answer = await waitTextAfter(page, null);
  await noBanner(page);
  return answer;
}

/** An 8x8 PNG (a red square with a blue diagonal), made here. */
function tinyPng() {
  const table = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = table[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(8, 0);
  ihdr.writeUInt32BE(8, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const rows = [];
  for (let y = 0; y < 8; y++) {
    rows.push(0); // filter: none
    for (let x = 0; x < 8; x++) rows.push(...(x === y ? [40, 80, 220] : [220, 40, 40]));
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.from(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Runs axe-core on the page (WCAG 2.0/2.1 A and AA); returns its violations, summarised. */
async function axeRun(page) {
  if (!globalThis.__axeSource) {
    const axe = await import('axe-core');
    globalThis.__axeSource = (axe.default ?? axe).source;
  }
  const loaded = await page.evaluate(() => typeof window.axe !== 'undefined');
  // Evaluated through the browser's debugging protocol, which the page's
  // content security policy (script-src 'self') does not govern.
  if (!loaded) await page.evaluate(globalThis.__axeSource);
  return page.evaluate(async () => {
    const result = await window.axe.run(document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21aa'] },
      resultTypes: ['violations'],
    });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      nodes: v.nodes.length,
      targets: v.nodes.slice(0, 3).map((n) => n.target.join(' ')),
      summary: (v.nodes[0]?.failureSummary ?? '').split('\n').slice(0, 2).join(' ').slice(0, 200),
    }));
  });
}

/** axe in light and dark: every violation reported; serious or critical ones fail. */
async function axeBoth(page, where) {
  const report = {};
  const serious = [];
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.waitForTimeout(80);
    const violations = await axeRun(page);
    report[scheme] = violations.map((v) => `${v.id}(${v.impact}) x${v.nodes}`);
    for (const v of violations)
      if (v.impact === 'serious' || v.impact === 'critical') serious.push(`${scheme}: ${v.id} (${v.impact}) at ${v.targets.join(' | ')}: ${v.summary}`);
  }
  await page.emulateMedia({ colorScheme: args.colorScheme ?? 'light' });
  if (serious.length) throw new Error(`axe on ${where}: ${serious.join(' ;; ')}`);
  return report;
}

// ---- the newer scenarios --------------------------------------------------------------

async function conversationsScenario(context) {
  const page = await openPage(context);
  const promptB = SECOND_PROMPTS.conversations;
  await step('load', () => load(page));
  await step('prompt A answered', async () => ({ text: (await ask(page, prompt)).slice(0, 200) }));
  const first = await step('the sidebar lists the chat, titled from the prompt', async () => {
    const list = await waitList(page, (l) => l.some((c) => c.current), 'the open chat is not listed');
    const item = list.find((c) => c.current);
    const norm = (t) => t.toLowerCase().replace(/…$/, '').trim();
    if (!item.title || !norm(prompt).startsWith(norm(item.title).slice(0, 12)))
      throw new Error(`the title ${JSON.stringify(item.title)} is not derived from the prompt ${JSON.stringify(prompt)}`);
    return item;
  });
  const before = await messageTexts(page);
  const renamed = 'Renamed in the second tab';
  await step('a second tab shows the same messages', async () => {
    const page2 = await openPage(context);
    await load(page2);
    let seen = await messageTexts(page2);
    for (let waited = 0; waited < T && JSON.stringify(seen) !== JSON.stringify(before); waited += 50) {
      await page2.waitForTimeout(50);
      seen = await messageTexts(page2);
    }
    if (JSON.stringify(seen) !== JSON.stringify(before))
      throw new Error(`tab 2 shows ${JSON.stringify(seen).slice(0, 300)}, tab 1 ${JSON.stringify(before).slice(0, 300)}`);
    await step('rename the chat in the second tab (Enter saves)', async () => {
      const item = page2.locator(`${sel.chatItem}[data-chat-id="${first.id}"]`);
      await item.locator('[data-testid="chat-rename"]').click();
      const input = item.locator('[data-testid="chat-rename-input"]');
      await input.waitFor({ state: 'visible', timeout: T });
      await input.fill('Not this title');
      await input.press('Escape'); // Escape cancels
      await waitList(page2, (l) => l.find((c) => c.id === first.id)?.title === first.title, 'Escape did not cancel the rename');
      await item.locator('[data-testid="chat-rename"]').click();
      await input.fill(renamed);
      await input.press('Enter');
      await waitList(page2, (l) => l.find((c) => c.id === first.id)?.title === renamed, 'the new title is not shown in tab 2');
    });
    await page2.close();
    return { messages: seen.length };
  });
  await step('tab 1 shows the new title after a reload', async () => {
    await reloadPage(page);
    await waitList(page, (l) => l.find((c) => c.id === first.id)?.title === renamed, 'tab 1 does not show the new title');
    const shown = await messageTexts(page);
    if (JSON.stringify(shown) !== JSON.stringify(before)) throw new Error(`after the reload tab 1 shows ${JSON.stringify(shown).slice(0, 300)}`);
  });
  await step('New chat: an empty chat', async () => {
    await page.locator(sel.newChat).click();
    await page.waitForFunction((s) => !document.querySelector(`${s.user}, ${s.assistant}`), sel, { timeout: T });
    await page.waitForFunction((s) => !document.querySelector(s)?.disabled, sel.prompt, { timeout: T });
  });
  await step('prompt B answered', async () => ({ text: (await ask(page, promptB)).slice(0, 200) }));
  const second = await step('two entries', async () => {
    const list = await waitList(page, (l) => l.length === 2 && l.some((c) => c.current && c.id !== first.id), 'not two entries with the new chat open');
    return list.find((c) => c.current);
  });
  await shot(page, 'two-chats');
  await step('open the first with the keyboard (focus, Enter)', async () => {
    await page.locator(`${sel.chatItem}[data-chat-id="${first.id}"] [data-testid="chat-open"]`).focus();
    await page.keyboard.press('Enter');
    await waitList(page, (l) => l.find((c) => c.id === first.id)?.current === true, 'the first chat is not the open one');
    let shown = await messageTexts(page);
    for (let waited = 0; waited < T && JSON.stringify(shown) !== JSON.stringify(before); waited += 50) {
      await page.waitForTimeout(50);
      shown = await messageTexts(page);
    }
    if (JSON.stringify(shown) !== JSON.stringify(before)) throw new Error(`the first chat shows ${JSON.stringify(shown).slice(0, 300)}`);
    const url = new URL(page.url());
    if (url.searchParams.get('chat') !== first.id) throw new Error(`the address names chat ${url.searchParams.get('chat')}`);
  });
  await step('delete the second (with its confirmation)', async () => {
    const item = page.locator(`${sel.chatItem}[data-chat-id="${second.id}"]`);
    await item.locator('[data-testid="chat-delete"]').click();
    const confirm = item.locator('[data-testid="chat-delete-confirm"]');
    await confirm.waitFor({ state: 'visible', timeout: T });
    if ((await chatList(page)).length !== 2) throw new Error('deleted before the confirmation');
    await confirm.click();
    await waitList(page, (l) => l.length === 1 && l[0].id === first.id, 'the second chat is still listed');
  });
  await step('after a reload, still one', async () => {
    await reloadPage(page);
    await page.waitForTimeout(300);
    const list = await waitList(page, (l) => l.length >= 1, 'nothing listed');
    if (list.length !== 1 || list[0].id !== first.id) throw new Error(`the list is ${JSON.stringify(list)}`);
    return list;
  });
  return page;
}

async function resumeScenario(context) {
  const page = await openPage(context);
  const lastText = () =>
    page.evaluate((s) => {
      const all = document.querySelectorAll(`${s.assistant} [data-testid="assistant-text"]`);
      return (all[all.length - 1]?.textContent ?? '').trim();
    }, sel);
  await step('load', () => load(page));
  await step('submit', () => submit(page));
  const early = await step('the first words of the answer', async () => {
    await page.waitForFunction(
      (s) => {
        const all = document.querySelectorAll(`${s.assistant} [data-testid="assistant-text"]`);
        return (all[all.length - 1]?.textContent ?? '').trim().split(/\s+/).length >= 3 && document.querySelector(s.stop);
      },
      sel,
      { timeout: T },
    );
    return lastText();
  });
  await step('reload in the middle of the answer', async () => {
    await page.reload({ waitUntil: 'domcontentloaded', timeout: T });
    await page.locator(sel.prompt).waitFor({ state: 'visible', timeout: T });
  });
  const resumed = await step('the page reattaches: the answer streams on', async () => {
    await page.locator(sel.stop).waitFor({ state: 'visible', timeout: T });
    const at = await lastText();
    return { length: at.length };
  });
  await step('the same answer ends, once', async () => {
    await waitIdle(page);
    const text = await lastText();
    if (text.length <= resumed.length) throw new Error(`the answer did not grow after the reload (${text.length} characters)`);
    const firstWord = early.split(/\s+/)[0];
    if (!text.startsWith(firstWord)) throw new Error(`the answer after the reload does not start as before: ${text.slice(0, 80)}`);
    const head = early.slice(0, Math.min(early.length, 20));
    const copies = text.split(head).length - 1;
    if (copies !== 1) throw new Error(`the start of the answer appears ${copies} times`);
    const strip = (w) => w.replace(/[.,;:!?…"')\]]+$/u, '');
    const last = strip(text.split(/\s+/).pop() ?? '');
    if (args.expect && last !== strip(args.expect)) throw new Error(`the answer ends with ${JSON.stringify(last)}, not ${JSON.stringify(args.expect)}`);
    const c = await conversation(page);
    const users = c.items.filter((i) => i.role === 'user').length;
    const assistants = c.items.filter((i) => i.role === 'assistant').length;
    if (assistants !== 1) throw new Error(`${assistants} assistant messages`);
    if (users !== 1) throw new Error(`${users} user messages`);
    await noBanner(page);
    return { words: text.split(/\s+/).length, last };
  });
  return page;
}

async function graphScenario(context) {
  const page = await openPage(context);
  await step('load', () => load(page));
  const picker = page.locator(sel.graphPicker);
  const defaults = await step('the picker lists both graphs', async () => {
    await picker.waitFor({ state: 'visible', timeout: T });
    const options = await picker.evaluate((el) => ({
      values: [...el.options].map((o) => o.value),
      value: el.value,
      label: el.labels?.[0]?.textContent ?? el.getAttribute('aria-label'),
    }));
    if (options.values.length < 2 || !options.values.includes('researcher'))
      throw new Error(`the picker does not list the default and researcher: ${options.values.join(', ')}`);
    if (options.value === 'researcher') throw new Error('the picker starts at researcher, not the default');
    if (!options.label) throw new Error('the picker has no label');
    return options;
  });
  await step('pick researcher, prompt → the answer', async () => {
    await picker.selectOption('researcher');
    const text = await ask(page, prompt);
    return { text: text.slice(0, 200) };
  });
  await step('the picker is replaced by the graph label', async () => {
    await page.locator(sel.graphLabel).waitFor({ state: 'visible', timeout: T });
    if (await picker.count()) throw new Error('the picker is still shown for a chat with messages');
    const label = ((await page.locator(sel.graphLabel).textContent()) ?? '').trim();
    if (label !== 'researcher') throw new Error(`the label says ${JSON.stringify(label)}`);
    return { label };
  });
  await shot(page, 'graph-label');
  await step('New chat: the picker is back at the default', async () => {
    await page.locator(sel.newChat).click();
    await picker.waitFor({ state: 'visible', timeout: T });
    const value = await picker.inputValue();
    if (value !== defaults.value) throw new Error(`the picker is at ${value}, not ${defaults.value}`);
    return { value };
  });
  return page;
}

async function markdownScenario(context) {
  const page = await openPage(context);
  const dialogs = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss().catch(() => {});
  });
  const requested = [];
  page.on('request', (r) => requested.push(new URL(r.url()).pathname));
  await step('load', () => load(page));
  await step('answer, formatted', async () => {
    const text = await ask(page, prompt);
    await formatted(page);
    return { text: text.slice(0, 120) };
  });
  const md = page.locator(`${sel.assistant} [data-testid="assistant-text"]`).last();
  await step('a table with header and data cells', async () => {
    const cells = await md.evaluate((el) => ({
      th: el.querySelectorAll('table th').length,
      td: el.querySelectorAll('table td').length,
    }));
    if (!cells.th || !cells.td) throw new Error(`table cells: ${JSON.stringify(cells)}`);
    return cells;
  });
  await step('a bullet list and a numbered list', async () => {
    const lists = await md.evaluate((el) => ({
      ul: [...el.querySelectorAll('ul > li')].map((li) => li.textContent.trim()),
      ol: [...el.querySelectorAll('ol > li')].map((li) => li.textContent.trim()),
    }));
    if (lists.ul.length < 2 || lists.ol.length < 2) throw new Error(`lists: ${JSON.stringify(lists)}`);
    return lists;
  });
  await step('the code block is highlighted by the formatting worker', async () => {
    await page.waitForFunction(
      (s) => {
        const all = document.querySelectorAll(`${s.assistant} [data-testid="assistant-text"]`);
        return !!all[all.length - 1]?.querySelector('pre code [class*="hljs-"], pre code [class*="token"]');
      },
      sel,
      { timeout: T },
    );
    if (!requested.includes('/assets/highlight.js')) throw new Error('the formatter was not loaded from /assets/highlight.js');
    return md.evaluate((el) => ({
      classes: [...new Set([...el.querySelectorAll('pre code [class]')].map((n) => n.className))].slice(0, 8),
    }));
  });
  await step('links: https opens in a new tab; javascript: is no link; raw HTML is text', async () => {
    const found = await page.evaluate(() => {
      const https = [...document.querySelectorAll('a[href^="https://example.com"]')].map((a) => ({
        target: a.getAttribute('target'),
        rel: a.getAttribute('rel') ?? '',
      }));
      return {
        https,
        js: document.querySelectorAll('a[href^="javascript:" i]').length,
        img: document.querySelectorAll('img[src="x"]').length,
        anyImg: document.querySelectorAll('.md img').length,
      };
    });
    if (!found.https.length) throw new Error('no link to https://example.com');
    if (found.https.some((a) => a.target !== '_blank' || !/\bnoopener\b/.test(a.rel)))
      throw new Error(`the https link is ${JSON.stringify(found.https)}`);
    if (found.js) throw new Error(`${found.js} javascript: links`);
    if (found.img || found.anyImg) throw new Error('an img element was made from the answer');
    await page.waitForTimeout(200);
    if (dialogs.length) throw new Error(`a dialog fired: ${dialogs.join(', ')}`);
    return found;
  });
  await shot(page, 'markdown');
  return page;
}

async function attachScenario(context) {
  const page = await openPage(context);
  await step('load', () => load(page));
  await step('attach a PNG with the paperclip', async () => {
    await page.locator(sel.attachInput).setInputFiles({ name: 'dot.png', mimeType: 'image/png', buffer: tinyPng() });
    await page.locator(`${sel.chip} img`).first().waitFor({ state: 'visible', timeout: T });
  });
  await step('drop a text file on the composer', async () => {
    await page.evaluate((s) => {
      const target = document.querySelector(s.prompt).closest('form');
      const data = new DataTransfer();
      data.items.add(new File(['hello from a text file\n'], 'notes.txt', { type: 'text/plain' }));
      for (const type of ['dragenter', 'dragover', 'drop'])
        target.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: data }));
    }, sel);
    await page.waitForFunction((s) => document.querySelectorAll(s.chip).length === 2, sel, { timeout: T });
    return { chips: await page.locator(sel.chip).allTextContents() };
  });
  await shot(page, 'chips');
  await step('send: the message shows the image and the text file', async () => {
    await submit(page);
    const user = page.locator(sel.user).last();
    await user.locator(`img${sel.attachment}[alt="dot.png"]`).waitFor({ state: 'visible', timeout: T });
    const img = await user.locator(`img${sel.attachment}`).evaluate((el) => ({ w: el.naturalWidth, h: el.naturalHeight }));
    if (img.w !== 8 || img.h !== 8) throw new Error(`the preview is ${img.w}x${img.h}, not the 8x8 image`);
    const text = user.locator(`${sel.attachment}:not(img)`);
    if (!((await text.first().textContent()) ?? '').includes('notes.txt')) throw new Error('the text file is not shown');
    if (await page.locator(sel.chip).count()) throw new Error('the chips stayed after sending');
  });
  await step('the answer', async () => {
    await waitIdle(page);
    const text = await waitTextAfter(page, null);
    await noBanner(page);
    return { text: text.slice(0, 120) };
  });
  await shot(page, 'sent');
  await step('a file over the limit is refused', async () => {
    const big = Buffer.alloc(5 * 1024 * 1024, 'a');
    await page.locator(sel.attachInput).setInputFiles({ name: 'big.txt', mimeType: 'text/plain', buffer: big });
    const error = page.locator(sel.attachError);
    await error.waitFor({ state: 'visible', timeout: T });
    const text = ((await error.textContent()) ?? '').trim();
    if ((await error.getAttribute('role')) !== 'alert') throw new Error('the error is not role=alert');
    if (!text.includes('big.txt')) throw new Error(`the error does not name the file: ${text}`);
    if (!/\d\s*(MB|KB|bytes|B)\b/.test(text)) throw new Error(`the error does not name the limit: ${text}`);
    if (await page.locator(sel.chip).count()) throw new Error('the file was added anyway');
    return { text };
  });
  await shot(page, 'refused');
  return page;
}

async function toolStreamScenario(context) {
  const page = await openPage(context);
  const argsLength = () =>
    page.evaluate((s) => {
      const c = document.querySelector(`${s.card}[data-state="input-streaming"]`);
      return c ? (c.querySelector('[data-testid="tool-args"]')?.textContent ?? '').length : -1;
    }, sel);
  await step('load', () => load(page));
  await step('submit', () => submit(page));
  await step('the arguments stream into the card', async () => {
    await page.locator(sel.card).first().waitFor({ state: 'visible', timeout: T });
    await page.waitForFunction(
      (s) => {
        const c = document.querySelector(`${s.card}[data-state="input-streaming"]`);
        if (!c) return !!document.querySelector(s.card); // checked below
        const t = (c.querySelector('[data-testid="tool-args"]')?.textContent ?? '').replace(/^…$/, '');
        return t.length > 0;
      },
      sel,
      { timeout: T, polling: 20 },
    );
    const first = await argsLength();
    if (first <= 0) throw new Error('the card never showed arguments while they streamed');
    await page.waitForFunction(
      ({ s, n }) => {
        const c = document.querySelector(`${s.card}[data-state="input-streaming"]`);
        if (!c) return true; // no longer streaming: checked below
        return (c.querySelector('[data-testid="tool-args"]')?.textContent ?? '').length > n;
      },
      { s: sel, n: first },
      { timeout: T, polling: 20 },
    );
    const second = await argsLength();
    if (second <= first) throw new Error(`the arguments did not grow while streaming (${first} → ${second})`);
    return { first, second };
  });
  await step('long streaming arguments are collapsed (Show all)', async () => {
    await page.waitForFunction(
      (s) => {
        const c = document.querySelector(`${s.card}[data-state="input-streaming"]`);
        if (!c) return true;
        return !!c.querySelector(s.argsToggle) && c.querySelector('[data-testid="tool-args"]')?.getAttribute('data-collapsed') === 'true';
      },
      sel,
      { timeout: T, polling: 20 },
    );
    const still = await page.locator(card('input-streaming')).count();
    if (!still) throw new Error('the card stopped streaming before its arguments were collapsed');
    await shot(page, 'streaming');
  });
  const callId = await step('the approval card shows every argument', async () => {
    const c = page.locator(card('awaiting-approval')).first();
    await c.waitFor({ state: 'visible', timeout: T });
    await waitIdle(page);
    const shown = await c.evaluate((el, s) => {
      const a = el.querySelector('[data-testid="tool-args"]');
      return {
        text: a?.textContent ?? '',
        clipped: a ? a.scrollHeight > a.clientHeight + 1 || a.scrollWidth > a.clientWidth + 1 : true,
        toggle: !!el.querySelector(s.argsToggle),
        effect: el.querySelector(s.effectWords)?.textContent?.trim() ?? '',
        card: el.textContent ?? '',
      };
    }, sel);
    let longest = '';
    try {
      const walk = (v) => {
        if (typeof v === 'string') {
          if (v.length > longest.length) longest = v;
        } else if (v && typeof v === 'object') Object.values(v).forEach(walk);
      };
      walk(JSON.parse(shown.text));
    } catch {
      throw new Error(`the arguments are not the whole JSON: ${shown.text.slice(0, 80)}…`);
    }
    if (longest.length < 4000) throw new Error(`the longest value shown is ${longest.length} characters`);
    if (!shown.card.includes(longest)) throw new Error('the value is not whole in the card');
    if (shown.clipped) throw new Error('the arguments are scrolled or cut');
    if (shown.toggle) throw new Error('the approval card collapses its arguments');
    if (!/chang/i.test(shown.effect)) throw new Error(`the effect words say ${JSON.stringify(shown.effect)}`);
    return c.getAttribute('data-tool-call-id');
  });
  await shot(page, 'approval');
  await step('deny → the follow-up', async () => {
    await page.locator(`${sel.card}[data-tool-call-id="${callId}"] ${sel.deny}`).click();
    await page.locator(`${sel.card}[data-tool-call-id="${callId}"][data-state="denied"]`).waitFor({ timeout: T });
    await waitIdle(page);
    return { text: (await waitTextAfter(page, callId)).slice(0, 120) };
  });
  return page;
}

async function modelLabelScenario(context) {
  const page = await openPage(context);
  await step('load: no model shown before an answer', async () => {
    await load(page);
    if (await page.locator(sel.modelLabel).count()) throw new Error('a model is named before any answer');
  });
  await step('answer', async () => ({ text: (await ask(page, prompt)).slice(0, 120) }));
  await step('the header names the model that answered', async () => {
    const label = page.locator(sel.modelLabel);
    await label.waitFor({ state: 'visible', timeout: T });
    const text = ((await label.textContent()) ?? '').trim();
    if (args.expect && !text.includes(args.expect)) throw new Error(`the label says ${JSON.stringify(text)}`);
    if (!text) throw new Error('the label is empty');
    let hint = null;
    if (/offline/i.test(args.expect ?? text)) {
      hint = label.locator('.model-offline');
      if (!(await hint.isVisible())) throw new Error('no visible offline hint');
      hint = ((await hint.textContent()) ?? '').trim();
    }
    return { text, hint };
  });
  return page;
}

async function a11yScenario(context) {
  const page = await openPage(context);
  await page.addInitScript((s) => {
    // Everything the live region is given, in order.
    window.__live = [];
    const seen = new WeakSet();
    new MutationObserver(() => {
      for (const p of document.querySelectorAll(`${s.live} > *`)) {
        if (seen.has(p)) continue;
        seen.add(p);
        window.__live.push(p.textContent ?? '');
      }
    }).observe(document, { subtree: true, childList: true, characterData: true });
  }, sel);
  const report = {};
  await step('load', async () => {
    await load(page);
    const landmarks = await page.evaluate(() => ({
      banner: !!document.querySelector('header'),
      nav: document.querySelector('nav')?.getAttribute('aria-label'),
      main: !!document.querySelector('main'),
    }));
    if (!landmarks.banner || landmarks.nav !== 'Conversations' || !landmarks.main) throw new Error(`landmarks: ${JSON.stringify(landmarks)}`);
    return landmarks;
  });
  await step('axe: the empty page', async () => (report.empty = await axeBoth(page, 'the empty page')));
  /** Where the focused element is, in words. */
  const focusedAt = () =>
    page.evaluate((s) => {
      const el = document.activeElement;
      if (!el || el === document.body) return 'body';
      if (el.matches(s.prompt)) return 'prompt';
      if (el.matches(s.graphPicker)) return 'graph-picker';
      if (el.closest('nav')) return 'sidebar';
      if (el.matches('.messages')) return 'messages';
      if (el.closest('.messages')) return 'message-content';
      if (el.closest('header')) return 'header';
      if (el.closest('form')) return 'composer';
      if (el.closest('aside')) return 'tools-panel';
      return el.tagName.toLowerCase();
    }, sel);
  await step('keyboard: the Tab order is sidebar, graph picker, messages, composer', async () => {
    // The prompt has the focus on load; Tab goes round the page back to it.
    if ((await focusedAt()) !== 'prompt') throw new Error(`the prompt is not focused on load (${await focusedAt()})`);
    const cycle = [];
    for (let i = 0; i < 80; i++) {
      await page.keyboard.press('Tab');
      const where = await focusedAt();
      if (where === 'prompt') break;
      cycle.push(where);
    }
    // From the top of the page: after the last stop past the composer and the panel.
    const top = cycle.findIndex((w) => w === 'header' || w === 'sidebar');
    if (top === -1) throw new Error(`Tab never reached the top of the page: ${cycle.join(' → ')}`);
    const order = [...cycle.slice(top), 'prompt'];
    const at = (w) => order.indexOf(w);
    for (const w of ['sidebar', 'graph-picker', 'messages'])
      if (at(w) === -1) throw new Error(`Tab skipped the ${w}: ${order.join(' → ')}`);
    if (!(at('sidebar') < at('graph-picker') && at('graph-picker') < at('messages') && at('messages') < at('prompt')))
      throw new Error(`Tab order: ${order.join(' → ')}`);
    return { order: order.filter((w, i) => w !== order[i - 1]) };
  });
  await step('keyboard: type, Enter → the answer', async () => {
    await page.keyboard.type(prompt);
    await page.keyboard.press('Enter');
    await page.locator(card('done')).first().waitFor({ timeout: T });
    await waitIdle(page);
    return { text: (await waitTextAfter(page, null)).slice(0, 120) };
  });
  await step('axe: after a tool-run exchange', async () => (report.exchange = await axeBoth(page, 'the page after an exchange')));
  const second = SECOND_PROMPTS.a11y;
  await step('keyboard: a call awaiting approval', async () => {
    const focused = await page.evaluate((s) => document.activeElement === document.querySelector(s), sel.prompt);
    if (!focused) throw new Error('the prompt lost focus after sending');
    await page.keyboard.type(second);
    await page.keyboard.press('Enter');
    await page.locator(card('awaiting-approval')).first().waitFor({ timeout: T });
    await waitIdle(page);
  });
  await step('axe: a card awaiting approval', async () => (report.approval = await axeBoth(page, 'the page awaiting approval')));
  await step('keyboard: Tab to Approve; focus visible', async () => {
    let found = false;
    for (let i = 0; i < 40 && !found; i++) {
      await page.keyboard.press('Shift+Tab');
      found = await page.evaluate((s) => document.activeElement?.matches(s), sel.approve);
    }
    if (!found) throw new Error('Shift+Tab from the prompt never reached Approve');
    const ring = await page.evaluate(() => {
      const el = document.activeElement;
      const cs = getComputedStyle(el);
      return { focusVisible: el.matches(':focus-visible'), outline: `${cs.outlineStyle} ${cs.outlineWidth}`, shadow: cs.boxShadow };
    });
    if (!ring.focusVisible) throw new Error('Approve is focused but not :focus-visible');
    if (ring.outline.startsWith('none') && ring.shadow === 'none') throw new Error(`no visible focus ring on Approve: ${JSON.stringify(ring)}`);
    return ring;
  });
  await shot(page, 'approve-focused');
  await step('keyboard: Enter approves', async () => {
    await page.keyboard.press('Enter');
    await page.locator(card('done')).nth(1).waitFor({ timeout: T });
    await waitIdle(page);
    return { text: (await waitTextAfter(page, null)).slice(0, 120) };
  });
  await step('every button shows a focus ring', async () => {
    // Once round the page with Tab from the prompt: each button reached must be
    // :focus-visible and draw an outline or a shadow.
    await page.locator(sel.prompt).focus();
    const missing = [];
    let buttons = 0;
    for (let i = 0; i < 120; i++) {
      await page.keyboard.press('Tab');
      const r = await page.evaluate((s) => {
        const el = document.activeElement;
        if (!el || el === document.body) return { body: true };
        const cs = getComputedStyle(el);
        return {
          prompt: el.matches(s.prompt),
          button: el.tagName === 'BUTTON',
          name: (el.getAttribute('aria-label') || el.textContent || '').trim().slice(0, 40),
          ring: (cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0) || cs.boxShadow !== 'none',
          visible: el.matches(':focus-visible'),
        };
      }, sel);
      if (r.prompt) break;
      if (r.button) {
        buttons += 1;
        if (!r.ring || !r.visible) missing.push(r.name);
      }
    }
    if (missing.length) throw new Error(`buttons without a visible focus ring: ${missing.join(', ')}`);
    if (buttons < 3) throw new Error(`Tab reached only ${buttons} buttons`);
    return { buttons };
  });
  await step('the live region announced the answers', async () => {
    const live = await page.evaluate(() => window.__live);
    const all = live.join(' | ');
    for (const want of ['I echoed your text.', 'Answer finished', 'Waiting for your approval', 'Written.'])
      if (!all.includes(want)) throw new Error(`the live region never said ${JSON.stringify(want)}: ${all.slice(0, 400)}`);
    const labelled = await page.evaluate(() =>
      [...document.querySelectorAll('button')].filter((b) => !(b.getAttribute('aria-label') || b.textContent || '').trim()).length,
    );
    if (labelled) throw new Error(`${labelled} buttons without a name`);
    return { announcements: live.slice(0, 12) };
  });
  steps.push({ name: 'axe report', ok: true, ms: 0, detail: report });
  return page;
}

async function screensScenario(context) {
  const page = await openPage(context);
  await step('load', () => load(page));
  await step('an exchange with a tool card and a markdown answer', async () => {
    await submit(page);
    await page.locator(card('done')).first().waitFor({ timeout: T });
    await waitIdle(page);
    const text = await waitTextAfter(page, null);
    await formatted(page);
    return { text: text.slice(0, 120) };
  });
  const sizes = [
    [1280, 800],
    [390, 844],
  ];
  const overflow = {};
  for (const scheme of ['light', 'dark']) {
    for (const [w, h] of sizes) {
      await step(`${w}x${h} ${scheme}`, async () => {
        await page.setViewportSize({ width: w, height: h });
        await page.emulateMedia({ colorScheme: scheme });
        await page.waitForTimeout(250); // the highlighter, layout and scrolling settle
        const o = await page.evaluate(() => document.documentElement.scrollWidth);
        overflow[`${w}-${scheme}`] = o;
        if (args.shots) {
          const file = join(args.shots, `screens-${w}x${h}${scheme === 'dark' ? '-dark' : ''}.png`);
          await page.screenshot({ path: file, animations: 'disabled', caret: 'hide' });
          shots.push(file);
        }
        if (w === 390 && o > 390) throw new Error(`the page is ${o}px wide at 390px`);
        return { scrollWidth: o };
      });
    }
  }
  return page;
}

/** Long tasks (start, duration) the page saw from `from` (performance.now()) on. */
async function longTasksSince(page, from) {
  return page.evaluate((from) => (window.__longTasks ?? []).filter((t) => t.start + t.ms >= from), from);
}

/** Records every long task of the page in `window.__longTasks`, from navigation start. */
async function observeLongTasks(page) {
  await page.addInitScript(() => {
    window.__longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longTasks.push({ start: e.startTime, ms: e.duration });
    }).observe({ type: 'longtask', buffered: true });
  });
}

/** The `Authorization` of each `POST /api/chat` a page sends, in order, in `into`. */
function recordChatTokens(page, into) {
  page.on('request', (r) => {
    if (r.method() === 'POST' && new URL(r.url()).pathname === '/api/chat')
      into.push((r.headers().authorization ?? '').replace(/^Bearer /i, ''));
  });
}

/** Opens `/#token=OTHER` in a new tab: the question, before any API request; checks on it. */
async function openOtherLink(context, other, label) {
  const page = await openPage(context);
  const api = [];
  page.on('request', (r) => {
    const path = new URL(r.url()).pathname;
    if (path.startsWith('/api/')) api.push(`${r.method()} ${path}`);
  });
  const detail = await step(`${label}: opening /#token=B asks which token to use`, async () => {
    await page.goto(`${origin}/#token=${encodeURIComponent(other)}`, { waitUntil: 'domcontentloaded', timeout: T });
    const dialog = page.locator('[data-testid="token-choice"]');
    await dialog.waitFor({ state: 'visible', timeout: T });
    await page.waitForTimeout(300); // anything the page would send, it has sent by now
    const state = await page.evaluate(() => ({
      hash: window.location.hash,
      stored: localStorage.getItem('agent-web:token'),
      modal: document.querySelector('[data-testid="token-choice"]')?.matches(':modal') ?? false,
      focused: document.activeElement?.getAttribute('data-testid') ?? null,
      title: document.getElementById(document.querySelector('[data-testid="token-choice"]')?.getAttribute('aria-labelledby') ?? '')?.textContent ?? '',
    }));
    if (state.hash.includes('token=')) throw new Error(`the token stayed in the address bar (${state.hash.slice(0, 20)}…)`);
    if (state.stored !== decodeURIComponent(tokenInUrl)) throw new Error('the stored token changed before the user chose');
    if (api.length) throw new Error(`the page made API requests before the user chose: ${api.join(', ')}`);
    if (await page.locator(sel.prompt).count()) throw new Error('the chat is shown before the user chose');
    if (!state.modal) throw new Error('the question is not a modal dialog');
    if (state.focused !== 'token-keep') throw new Error(`the focus is on ${state.focused}, not on "Keep the current token"`);
    if (!state.title.trim()) throw new Error('the dialog has no name');
    return { title: state.title.trim() };
  });
  return { page, detail };
}

async function tokenSwitchScenario(context) {
  if (!tokenInUrl) throw new Error('--url has no #token=');
  const other = args.otherToken;
  if (!other) throw new Error('--other-token is required');
  const a = decodeURIComponent(tokenInUrl);
  const first = await openPage(context);
  await step('token A: the page stores the first token it is given', async () => {
    await load(first);
    const stored = await first.evaluate(() => localStorage.getItem('agent-web:token'));
    if (stored !== a) throw new Error('the first token was not stored');
  });
  const firstChat = new URL(first.url()).searchParams.get('chat');

  const { page: keep } = await openOtherLink(context, other, 'keep');
  await step('axe: the question', async () => axeBoth(keep, 'the token question'));
  await shot(keep, 'question');
  const keptTokens = [];
  recordChatTokens(keep, keptTokens);
  await step('Enter keeps the current token: the next chat carries A', async () => {
    await keep.keyboard.press('Enter');
    await keep.locator(sel.prompt).waitFor({ state: 'visible', timeout: T });
    await keep.waitForFunction((s) => !document.querySelector(s)?.disabled, sel.prompt, { timeout: T });
    if (await keep.locator('[data-testid="token-choice"]').count()) throw new Error('the question stayed after the choice');
    const text = await ask(keep, prompt);
    const stored = await keep.evaluate(() => localStorage.getItem('agent-web:token'));
    if (stored !== a) throw new Error('keeping the token changed it');
    if (keptTokens.length !== 1 || keptTokens[0] !== a) throw new Error(`the chat requests carried ${keptTokens.length} tokens, not A`);
    return { text: text.slice(0, 80) };
  });
  await keep.close();

  const { page: use } = await openOtherLink(context, other, 'switch');
  const usedTokens = [];
  recordChatTokens(use, usedTokens);
  await step("Use the link's token: B is stored, a new chat, the next chat carries B", async () => {
    await use.locator('[data-testid="token-use-link"]').click();
    await use.locator(sel.prompt).waitFor({ state: 'visible', timeout: T });
    await use.waitForFunction((s) => !document.querySelector(s)?.disabled, sel.prompt, { timeout: T });
    const stored = await use.evaluate(() => localStorage.getItem('agent-web:token'));
    if (stored !== other) throw new Error('the link token was not stored');
    if (await use.locator(`${sel.user}, ${sel.assistant}`).count()) throw new Error("the other account's conversation is shown");
    const chat = new URL(use.url()).searchParams.get('chat');
    if (chat && chat === firstChat) throw new Error('the switched page opened the chat of the other token');
    const text = await ask(use, SECOND_PROMPTS['token-switch']);
    if (usedTokens.length !== 1 || usedTokens[0] !== other) throw new Error(`the chat requests carried ${usedTokens.length} tokens, not B`);
    return { text: text.slice(0, 80) };
  });
  await step('a tab still open on A follows: it opens a new chat, not A\'s with B', async () => {
    await first.waitForFunction((id) => new URL(location.href).searchParams.get('chat') !== id, firstChat, { timeout: T });
    await first.locator(sel.prompt).waitFor({ state: 'visible', timeout: T });
    if (await first.locator(`${sel.user}, ${sel.assistant}`).count()) throw new Error('the first tab still shows a conversation');
  });
  return use;
}

async function pathologicalScenario(context) {
  const page = await openPage(context);
  await observeLongTasks(page);
  const parts = `${sel.assistant} [data-testid="assistant-text"]`;
  await step('load', () => load(page));
  const from = await page.evaluate(() => performance.now());
  let completeAt = Infinity; // performance.now() when the answer was complete
  /** The longest task since the prompt (and while streaming, and after), kept in timings whatever happens next. */
  const measure = async () => {
    const tasks = await longTasksSince(page, from).catch(() => []);
    const longest = (list) => Math.round(list.reduce((m, t) => Math.max(m, t.ms), 0));
    const ms = tasks.map((t) => Math.round(t.ms)).sort((a, b) => b - a);
    timings.longest_task_ms = ms[0] ?? 0;
    timings.longest_task_streaming_ms = longest(tasks.filter((t) => t.start < completeAt));
    timings.longest_task_after_ms = longest(tasks.filter((t) => t.start >= completeAt));
    timings.long_tasks = ms.length;
    timings.longest_tasks_ms = ms.slice(0, 5);
    return ms[0] ?? 0;
  };
  try {
    await step('submit', () => submit(page));
    const sentAt = lastSentAt;
    await step('the answer streams to its end', async () => {
      await waitIdle(page);
      timings.answer_complete_ms = Date.now() - sentAt;
      completeAt = await page.evaluate(() => performance.now());
      return { parts: await page.locator(parts).count() };
    });
    await step('Show more until every part is whole', async () => {
      let clicks = 0;
      while (await page.locator(`${sel.more} button`).count()) {
        if (++clicks > 20) throw new Error('Show more is still offered after 20 clicks');
        // What is left to show, as the page says it (cheap to poll: the page's own
        // tasks are what is measured, and reading 300,000 characters is not).
        const before = await page.locator(sel.more).first().textContent();
        await page.locator(`${sel.more} button`).first().click();
        await page.waitForFunction(
          ({ more, before }) => document.querySelector(more)?.textContent !== before,
          { more: sel.more, before },
          { timeout: T },
        );
      }
      return { clicks };
    });
    await step('every block rendered; the last word visible', async () => {
      // A block waiting for its turn to be formatted is marked data-pending.
      await formatted(page);
      const word = args.expect ?? '';
      const last = page.locator(parts).last();
      const text = ((await last.textContent()) ?? '').trim();
      if (word && !text.replace(/[.!]+$/, '').endsWith(word)) throw new Error(`the last part ends with ${JSON.stringify(text.slice(-80))}`);
      if (word) await last.getByText(word).last().waitFor({ state: 'visible', timeout: T });
      const shown = await page.evaluate((parts) => {
        const all = [...document.querySelectorAll(parts)];
        let nesting = 0;
        for (const el of document.querySelectorAll(`${parts} :is(blockquote, ul, ol)`)) {
          let d = 0;
          for (let e = el; e && !e.matches('[data-testid="assistant-text"]'); e = e.parentElement) if (e.matches('blockquote, ul, ol')) d++;
          nesting = Math.max(nesting, d);
        }
        return {
          parts: all.length,
          characters: all.reduce((n, el) => n + (el.textContent?.length ?? 0), 0),
          codeBlocks: document.querySelectorAll(`${parts} pre code`).length,
          highlighted: [...document.querySelectorAll(`${parts} pre code`)].filter((c) => c.querySelector('[class*="hljs-"]')).length,
          plain: document.querySelectorAll(`${parts} [data-testid="md-plain"]`).length,
          nesting,
        };
      }, parts);
      if (shown.nesting > MAX_RENDERED_NESTING) throw new Error(`quotes and lists are rendered ${shown.nesting} deep`);
      if (shown.codeBlocks < 300) throw new Error(`${shown.codeBlocks} code blocks shown, not 300 or more`);
      return shown;
    });
    await shot(page, 'rendered');
    await step(`no main-thread task over ${RENDER_BUDGET_MS} ms, streaming and after`, async () => {
      await page.waitForTimeout(1000); // highlighting and late formatting count too
      const longest = await measure();
      if (longest > RENDER_BUDGET_MS)
        throw new Error(`the main thread was blocked for ${longest} ms (budget ${RENDER_BUDGET_MS} ms; longest: ${timings.longest_tasks_ms.join(', ')})`);
      return { longestMs: longest, longTasks: timings.long_tasks };
    });
  } finally {
    await measure();
  }
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
      conversations: () => conversationsScenario(context),
      resume: () => resumeScenario(context),
      graph: () => graphScenario(context),
      markdown: () => markdownScenario(context),
      attach: () => attachScenario(context),
      'tool-stream': () => toolStreamScenario(context),
      'model-label': () => modelLabelScenario(context),
      a11y: () => a11yScenario(context),
      screens: () => screensScenario(context),
      pathological: () => pathologicalScenario(context),
      'token-switch': () => tokenSwitchScenario(context),
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
