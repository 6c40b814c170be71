#!/usr/bin/env node
// Drives SEVERAL stock chats ("tabs") in one node process against a live chat
// endpoint, following a JSON script with per-tab steps, and prints what
// happened as ONE JSON line.
//
//   node tabs-driver.mjs --api URL --script FILE [--client ai7|ai6]
//        [--header 'Name: value']... [--timeout-ms N]
//
// Each tab is what one browser tab running `useChat` holds: an AbstractChat of
// `ai` 7.x (or 6.x) with a DefaultChatTransport and an in-memory ChatState.
// A tab opened on an existing chat is made the way a page opening it is:
// GET /api/chats/{id} for its messages, checked with the SDK's
// validateUIMessages, then `new Chat({id, messages})`, and with "resume"
// `resumeStream()` (GET /api/chat/{id}/stream) as `useChat({resume: true})`
// does. Steps may run at the same moment (`parallel`), and a `pause` step
// hands control to the caller (a test that kills and restarts the server) and
// takes new server addresses back.
//
// The script format and the output are described in README.md.
// Output: {"ok","error","steps","tabs","warnings"}
// Exit code: 0 when ok, 1 when not ok, 2 on a usage error (bad arguments or
// script). A chat that ends in its error state (an HTTP 409, an error chunk,
// ...) is still ok: the tab's and the step's `status`/`error` say so.

import { createInterface } from 'node:readline';

import { MemoryChatState, POLL_MS, UsageError, captureOutput, check, checkScriptKeys, checkSharedStep, describe, headersOf, isBusy, parseBody, parseDriverCommandLine, readScript, runMain, sleep, timeoutOf, waitIdle } from './lib/driver.mjs';

const DEFAULT_TIMEOUT_MS = 60_000;

const STEPS = ['open', 'load', 'send', 'approve', 'toolOutput', 'stop', 'resume', 'wait', 'snapshot', 'sleep', 'pause'];
const PAUSE_PREFIX = 'tabs-driver pause ';

const started = Date.now();
const result = { ok: false, error: null, steps: [], tabs: {}, warnings: [] };

// Everything a library prints is captured, so stdout carries only our line.
const fail = captureOutput(result);

const elapsed = () => Date.now() - started;

// ------------------------------------------------------------------ state

/** Servers by name: `{ api, headers }`; "default" is --api / --header. */
const servers = {};
/** Tabs by id (a string): see `openTab`. */
const tabs = new Map();
/** Steps running now (for the timeout's message). */
const running = new Set();
let emitted = false;

function tabOutput(tab) {
  return {
    chatId: tab.chatId,
    server: tab.server,
    status: tab.chat.status,
    error: tab.chat.status === 'error' ? describe(tab.chat.error ?? 'error') : null,
    messages: tab.chat.messages,
    requests: tab.requests,
  };
}

function emit(exitCode) {
  if (emitted) return;
  emitted = true;
  for (const [id, tab] of tabs) result.tabs[id] = tabOutput(tab);
  result.ok = result.error === null;
  let line;
  try {
    line = JSON.stringify(result);
  } catch (error) {
    line = JSON.stringify({ ...result, ok: false, error: `cannot serialize the result: ${describe(error)}`, tabs: {} });
  }
  process.stdout.write(`${line}\n`, () => process.exit(exitCode ?? (result.ok ? 0 : 1)));
}

process.on('unhandledRejection', (error) => {
  fail(`unhandled rejection: ${describe(error)}`);
  emit();
});

// ------------------------------------------------------------ the chats

let ai;
let Chat;
let ObservedTransport;
let sendAutomaticallyWhen;
let prepareSendMessagesRequest;
/** Response body → its request record, for the chunk observer. */
const requestOfBody = new WeakMap();

async function setUp(args, script) {
  ai = await import(args.client);
  sendAutomaticallyWhen = {
    none: undefined,
    approvals: ai.lastAssistantMessageIsCompleteWithApprovalResponses,
    toolCalls: ai.lastAssistantMessageIsCompleteWithToolCalls,
  }[script.sendAutomaticallyWhen ?? 'none'];
  prepareSendMessagesRequest = script.lastMessageOnly
    ? ({ id, messages, trigger, messageId }) => ({ body: { id, messages: messages.slice(-1), trigger, messageId } })
    : undefined;

  // The validated chunks between the transport's parser and the chat, recorded
  // in the request whose body they came from (POST and GET alike).
  ObservedTransport = class extends ai.DefaultChatTransport {
    processResponseStream(stream) {
      const request = requestOfBody.get(stream);
      return super.processResponseStream(stream).pipeThrough(
        new TransformStream({
          transform(chunk, controller) {
            if (request) {
              request.chunks.push(chunk.type);
              if (chunk.type === 'data-warning') request.warnings.push(chunk.data);
            }
            controller.enqueue(chunk);
          },
        }),
      );
    }
  };

  Chat = class extends ai.AbstractChat {
    constructor({ messages, ...init }) {
      super({ ...init, state: new MemoryChatState(messages) });
    }
  };
}

/**
 * A fetch for `tab` that sends to its server as it is NOW (a restarted server
 * has a new address and token: the URL's prefix and the headers are swapped)
 * and records every request in the tab: method, url, status, parsed body, the
 * chunks the chat got from it, its data-warning parts, and when it was made.
 */
function tabFetch(tab) {
  return async (input, init = {}) => {
    const server = servers[tab.server];
    let url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (url.startsWith(tab.api)) url = server.api + url.slice(tab.api.length);
    const headers = new Headers(init.headers ?? {});
    for (const [name, value] of Object.entries(server.headers)) headers.set(name, value);
    const entry = {
      method: (init.method ?? 'GET').toUpperCase(),
      url,
      status: null,
      body: parseBody(init.body),
      error: null,
      errorBody: null,
      chunks: [],
      warnings: [],
      sentAtMs: elapsed(),
      answeredAtMs: null,
    };
    tab.requests.push(entry);
    try {
      const response = await globalThis.fetch(url, { ...init, headers });
      entry.status = response.status;
      entry.answeredAtMs = elapsed();
      if (!response.ok) {
        // The chat reads the body for its error; keep a copy of it here too.
        entry.errorBody = parseBody(await response.clone().text());
      }
      if (response.body) requestOfBody.set(response.body, entry);
      return response;
    } catch (error) {
      entry.error = describe(error);
      throw error;
    }
  };
}

/** A new chat for `tab` holding `messages`, with its own transport (one page load). */
function newChat(tab, messages) {
  tab.api = servers[tab.server].api;
  return new Chat({
    id: tab.chatId,
    messages,
    transport: new ObservedTransport({ api: tab.api, fetch: tab.fetch, prepareSendMessagesRequest }),
    sendAutomaticallyWhen,
  });
}

/** Tab `id`, opened empty (a page starting a new chat) if it is not open yet. */
function tabFor(step, script) {
  const id = String(step.tab);
  let tab = tabs.get(id);
  if (tab === undefined) {
    const server = step.server ?? 'default';
    if (servers[server] === undefined) throw new UsageError(`tab ${id}: no server ${JSON.stringify(server)}`);
    tab = { id, chatId: step.chatId ?? script.chatId ?? 'chat-1', server, requests: [], pending: new Set() };
    tab.fetch = tabFetch(tab);
    tab.chat = newChat(tab, []);
    tabs.set(id, tab);
  }
  return tab;
}

/** Requests a step started and did not wait for; a failure ends the run. */
function track(tab, promise) {
  tab.pending.add(promise);
  promise.then(
    () => tab.pending.delete(promise),
    (error) => {
      tab.pending.delete(promise);
      fail(`tab ${tab.id}: ${describe(error)}`);
      emit();
    },
  );
  return promise;
}

async function settle(tab) {
  await Promise.allSettled([...tab.pending]);
  await waitIdle(tab.chat);
}

function firstToolPart(chat, predicate) {
  for (const message of chat.messages) {
    for (const part of message.parts) if (ai.isToolUIPart(part) && predicate(part)) return part;
  }
  return undefined;
}

function textOf(message) {
  return (message?.parts ?? []).filter((part) => part.type === 'text').map((part) => part.text).join('');
}

function chatsUrl(api, chatId) {
  const url = new URL(api);
  url.pathname = url.pathname.replace(/\/chat\/?$/, `/chats/${encodeURIComponent(chatId)}`);
  url.search = '';
  return url.href;
}

// ------------------------------------------------------------ the steps

const actions = {
  async open() {},

  // A page opening the chat: its messages from the server, then (with
  // "resume") the running answer, as useChat({ resume: true }) does on mount.
  // On a tab already open this is a reload: the old page goes away first (its
  // fetch aborted, as the browser does).
  async load(step, record, script) {
    const id = String(step.tab);
    const old = tabs.get(id);
    if (old !== undefined) {
      await old.chat.stop();
      tabs.delete(id);
    }
    const tab = tabFor({ ...step, chatId: step.chatId ?? old?.chatId, server: step.server ?? old?.server }, script);
    if (old !== undefined) tab.requests = old.requests;
    // With "untilToolState": loaded again (every 50 ms, for up to 10 s) until
    // a tool part is in that state, as a person would reload a tab that does
    // not show it yet; `loadAttempts` says how often.
    let messages = [];
    const deadline = Date.now() + 10_000;
    record.loadAttempts = 0;
    for (;;) {
      record.loadAttempts += 1;
      const response = await tab.fetch(chatsUrl(servers[tab.server].api, tab.chatId), { method: 'GET' });
      record.loadStatus = response.status;
      messages = [];
      if (response.ok) {
        const body = await response.json();
        messages = await ai.validateUIMessages({ messages: body.messages ?? [] });
      } else if (response.status !== 404) {
        throw new Error(`GET /api/chats/${tab.chatId}: ${response.status}`);
      }
      if (step.untilToolState === undefined || Date.now() > deadline) break;
      if (firstToolPart({ messages }, (p) => p.state === step.untilToolState) !== undefined) break;
      await sleep(50);
    }
    record.loaded = structuredClone(messages);
    tab.chat = newChat(tab, messages);
    if (step.resume) {
      const first = tab.requests.length;
      const resumed = track(tab, tab.chat.resumeStream());
      const reconnected = (async () => {
        await resumed;
        await waitIdle(tab.chat);
      })();
      if (step.wait === false) {
        // Until the reconnect was answered, so the record has its status.
        while (tab.requests.length === first || tab.requests[first].status === null) {
          if (tab.requests[first]?.error) break;
          if (!isBusy(tab.chat.status) && tab.pending.size === 0) break;
          await sleep(POLL_MS);
        }
      } else {
        await reconnected;
      }
      record.reconnectStatus = tab.requests[first]?.status ?? null;
    }
  },

  async send(step, record, script) {
    const tab = tabFor(step, script);
    const sent = track(tab, tab.chat.sendMessage({ text: step.text }));
    if (step.wait === false) return;
    await sent;
    await waitIdle(tab.chat);
  },

  async approve(step, record, script) {
    const tab = tabFor(step, script);
    const part = firstToolPart(tab.chat, (p) => p.state === 'approval-requested');
    if (part === undefined) throw new Error('approve: no tool part in state approval-requested');
    record.toolCallId = part.toolCallId;
    record.approvalId = part.approval.id;
    await tab.chat.addToolApprovalResponse({ id: part.approval.id, approved: step.approved, ...(step.reason === undefined ? {} : { reason: step.reason }) });
    if (step.wait === false) return;
    await settle(tab);
  },

  async toolOutput(step, record, script) {
    const tab = tabFor(step, script);
    const part = firstToolPart(tab.chat, (p) => ai.getToolName(p) === step.tool && p.state === 'input-available');
    if (part === undefined) throw new Error(`toolOutput: no part of tool ${step.tool} in state input-available`);
    record.toolCallId = part.toolCallId;
    const outcome = typeof step.errorText === 'string' && !('output' in step) ? { state: 'output-error', errorText: step.errorText } : { output: step.output };
    await tab.chat.addToolOutput({ tool: step.tool, toolCallId: part.toolCallId, ...outcome });
    if (step.wait === false) return;
    await settle(tab);
  },

  // The stock client's stop(): its fetch aborted. With "stopRun": true also
  // POST /api/chat/{id}/stop, as the page's Stop button does after it.
  async stop(step, record, script) {
    const tab = tabFor(step, script);
    await tab.chat.stop();
    if (step.stopRun) {
      const response = await tab.fetch(`${servers[tab.server].api}/${encodeURIComponent(tab.chatId)}/stop`, { method: 'POST' });
      record.stopStatus = response.status;
    }
    await settle(tab);
  },

  async resume(step, record, script) {
    const tab = tabFor(step, script);
    const first = tab.requests.length;
    const resumed = track(tab, tab.chat.resumeStream());
    if (step.wait === false) return;
    await resumed;
    await waitIdle(tab.chat);
    record.reconnectStatus = tab.requests[first]?.status ?? null;
  },

  // Until the tab's latest request delivered chunk `untilChunk`, or its last
  // message's text contains `untilText`, or (without either) its requests ended.
  async wait(step, record, script) {
    const tab = tabFor(step, script);
    if (step.untilChunk !== undefined || step.untilText !== undefined) {
      for (;;) {
        if (step.untilChunk !== undefined && tab.requests.at(-1)?.chunks.includes(step.untilChunk)) break;
        if (step.untilText !== undefined && textOf(tab.chat.messages.at(-1)).includes(step.untilText)) break;
        if (!isBusy(tab.chat.status) && tab.pending.size === 0) {
          record.found = false;
          return;
        }
        await sleep(POLL_MS);
      }
      record.found = true;
      return;
    }
    await settle(tab);
  },

  async snapshot(step, record, script) {
    const tab = tabFor(step, script);
    record.messages = structuredClone(tab.chat.messages);
  },

  async sleep(step) {
    await sleep(step.ms);
  },

  // Hands control to the caller: one line `tabs-driver pause {name, tabs}` on
  // stderr, then one JSON line on stdin: `{"servers": {NAME: {api, headers}}}`
  // (servers to change; `{}` changes nothing).
  async pause(step, record) {
    const state = {};
    for (const [id, tab] of tabs) state[id] = { chatId: tab.chatId, server: tab.server, status: tab.chat.status, messages: tab.chat.messages };
    pausedSince = Date.now();
    process.stderr.write(`${PAUSE_PREFIX}${JSON.stringify({ name: step.name ?? null, tabs: state })}\n`);
    const line = await nextInputLine();
    pausedMs += Date.now() - pausedSince;
    pausedSince = null;
    if (line === null) throw new Error('pause: stdin closed');
    let answer;
    try {
      answer = JSON.parse(line);
    } catch (error) {
      throw new Error(`pause: not JSON on stdin: ${describe(error)}`);
    }
    for (const [name, server] of Object.entries(answer.servers ?? {})) servers[name] = checkServer(server, `pause answer: servers.${name}`);
    record.resumedWith = Object.keys(answer.servers ?? {});
  },
};

let input;
let pausedMs = 0;
let pausedSince = null;

async function nextInputLine() {
  input ??= createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const { value, done } = await input.next();
  return done ? null : value;
}

function checkServer(server, where) {
  if (server === null || typeof server !== 'object' || typeof server.api !== 'string') throw new UsageError(`${where} must be {"api": URL, "headers": {...}}`);
  const headers = server.headers ?? {};
  if (typeof headers !== 'object' || Object.values(headers).some((v) => typeof v !== 'string')) throw new UsageError(`${where}.headers must map names to strings`);
  return { api: server.api, headers: { ...headers } };
}

async function runStep(step, script, where) {
  if (step.parallel !== undefined) {
    const record = { do: 'parallel', steps: [] };
    // All started in the same turn of the event loop.
    await Promise.all(step.parallel.map((inner, i) => {
      const innerRecord = { tab: null, do: inner.do };
      record.steps.push(innerRecord);
      return runOne(inner, innerRecord, script, `${where}.${i}`);
    }));
    return record;
  }
  const record = { tab: null, do: step.do };
  await runOne(step, record, script, where);
  return record;
}

async function runOne(step, record, script, where) {
  if (step.tab !== undefined) record.tab = String(step.tab);
  const marker = { where, do: step.do, tab: record.tab };
  running.add(marker);
  record.startedAtMs = elapsed();
  try {
    await actions[step.do](step, record, script);
  } catch (error) {
    const Kind = error instanceof UsageError ? UsageError : Error;
    throw new Kind(`step ${where} (${step.do}${record.tab === null ? '' : ` tab ${record.tab}`}): ${describe(error)}`);
  } finally {
    running.delete(marker);
  }
  record.endedAtMs = elapsed();
  const tab = record.tab === null ? undefined : tabs.get(record.tab);
  if (tab !== undefined) {
    record.status = tab.chat.status;
    record.error = tab.chat.status === 'error' ? describe(tab.chat.error ?? 'error') : null;
  }
}

function validateScript(script) {
  checkScriptKeys(script);
  check(script.servers === undefined || (typeof script.servers === 'object' && script.servers !== null), '"servers" must be an object');
  check(Array.isArray(script.steps), '"steps" must be an array');
  const checkStep = (step, where, nested) => {
    check(step !== null && typeof step === 'object', `${where} must be an object`);
    if (step.parallel !== undefined) {
      check(!nested, `${where}: "parallel" groups do not nest`);
      check(Array.isArray(step.parallel) && step.parallel.length > 0, `${where}: "parallel" must be a non-empty array`);
      step.parallel.forEach((inner, i) => checkStep(inner, `${where}.${i}`, true));
      return;
    }
    check(STEPS.includes(step.do), `${where}: "do" must be one of ${STEPS.join(', ')}, got ${JSON.stringify(step.do)}`);
    const global = ['sleep', 'pause'].includes(step.do);
    check(global || typeof step.tab === 'number' || typeof step.tab === 'string', `${where}: ${step.do} needs "tab"`);
    check(!nested || step.do !== 'pause', `${where}: pause cannot run in parallel`);
    check(step.chatId === undefined || typeof step.chatId === 'string', `${where}: "chatId" must be a string`);
    check(step.server === undefined || typeof step.server === 'string', `${where}: "server" must be a string`);
    check(step.wait === undefined || typeof step.wait === 'boolean', `${where}: "wait" must be a boolean`);
    if (step.do === 'send') check(typeof step.text === 'string', `${where}: send needs "text"`);
    checkSharedStep(step, where);
    if (step.do === 'load') {
      check(step.resume === undefined || typeof step.resume === 'boolean', `${where}: "resume" must be a boolean`);
      check(step.untilToolState === undefined || typeof step.untilToolState === 'string', `${where}: "untilToolState" must be a string`);
    }
    if (step.do === 'stop') check(step.stopRun === undefined || typeof step.stopRun === 'boolean', `${where}: "stopRun" must be a boolean`);
    if (step.do === 'wait') {
      check(step.untilChunk === undefined || typeof step.untilChunk === 'string', `${where}: "untilChunk" must be a string`);
      check(step.untilText === undefined || typeof step.untilText === 'string', `${where}: "untilText" must be a string`);
    }
  };
  script.steps.forEach((step, i) => checkStep(step, `step ${i}`, false));
}

async function main(args) {
  const script = await readScript(args.script);
  validateScript(script);
  servers.default = { api: args.api, headers: headersOf(args.header) };
  for (const [name, server] of Object.entries(script.servers ?? {})) servers[name] = checkServer(server, `"servers.${name}"`);
  await setUp(args, script);
  for (const [index, step] of script.steps.entries()) result.steps.push(await runStep(step, script, String(index)));
}

// ------------------------------------------------------------------ CLI

const args = parseDriverCommandLine(['ai6', 'ai7'], 'ai7', (error) => {
  fail(`usage: ${describe(error)}`);
  emit(2);
});

if (args) {
  // The timeout counts the driver's own time: time spent in a pause (the
  // caller restarting a server) is not counted.
  const timeoutMs = timeoutOf(args, DEFAULT_TIMEOUT_MS);
  const timer = setInterval(() => {
    const paused = pausedMs + (pausedSince === null ? 0 : Date.now() - pausedSince);
    if (elapsed() - paused <= timeoutMs) return;
    const where = [...running].map((m) => `step ${m.where} (${m.do}${m.tab === null ? '' : ` tab ${m.tab}`})`).join(', ');
    fail(`timed out after ${timeoutMs} ms${where ? ` in ${where}` : ''}`);
    emit();
  }, 100);
  timer.unref();
  await runMain(main, args, fail, emit);
}
