#!/usr/bin/env node
// Drives the chat logic of a real frontend against a live chat endpoint,
// following a JSON script, and prints what happened as ONE JSON line.
//
//   node chat-driver.mjs --client ai6|ai7|ai4 --api URL --script FILE
//        [--header 'Name: value']... [--timeout-ms N]
//
// ai6, ai7  the classes behind `useChat` in `ai` 6.x / 7.x: AbstractChat with
//           DefaultChatTransport, and an in-memory ChatState (below) in place
//           of the React one. Speaks the UI message stream.
// ai4       AI SDK 4's `useChat` logic: `callChatApi` from @ai-sdk/ui-utils
//           (the version ai@4.3.19 pins) with the request body useChat builds
//           by default, streamProtocol 'data'. agent-server answers in the
//           data stream with `?protocol=data`, so the driver adds that query
//           to --api unless the URL already has a `protocol` parameter (a v4
//           page would have it in useChat's `api` option).
//
// The script format and the output are described in README.md.
// Output: {"ok","error","steps","status","messages","requests","chunks","warnings"}
// Exit code: 0 when ok, 1 when not ok, 2 on a usage error (bad arguments or
// script). A chat that ends in its error state (HTTP 400, an error chunk, ...)
// is still ok: the step's `status`/`error` say so.

import { MemoryChatState, POLL_MS, UsageError, captureOutput, check, checkScriptKeys, checkSharedStep, describe, headersOf, isBusy, parseBody, parseDriverCommandLine, readScript, runMain, sleep, timeoutOf, waitIdle } from './lib/driver.mjs';

const DEFAULT_TIMEOUT_MS = 20_000;

const UI_STEPS = ['send', 'continue', 'regenerate', 'approve', 'toolOutput', 'stop', 'wait', 'reload', 'sleep'];
const AI4_STEPS = ['send', 'toolResult', 'stop', 'wait', 'sleep'];

const result = {
  ok: false,
  error: null,
  steps: [],
  status: null,
  messages: [],
  requests: [],
  chunks: [],
  warnings: [],
};

// Everything a library prints is captured, so stdout carries only our line.
const fail = captureOutput(result);

// The chat the steps act on; `reload` replaces it. `{ status, error, messages }`.
let current = null;
let runningStep = null;
let emitted = false;

function emit(exitCode) {
  if (emitted) return;
  emitted = true;
  if (current !== null) {
    result.status = current.status;
    result.messages = current.messages;
  }
  if (runningStep !== null) fillStep(runningStep);
  result.ok = result.error === null;
  let line;
  try {
    line = JSON.stringify(result);
  } catch (error) {
    line = JSON.stringify({ ...result, ok: false, error: `cannot serialize the result: ${describe(error)}`, messages: [] });
  }
  process.stdout.write(`${line}\n`, () => process.exit(exitCode ?? (result.ok ? 0 : 1)));
}

function fillStep(record) {
  if (current === null) return;
  record.status = current.status;
  record.error = current.status === 'error' ? describe(current.error ?? 'error') : null;
}

process.on('unhandledRejection', (error) => {
  fail(`unhandled rejection: ${describe(error)}`);
  emit();
});

async function main(args) {
  const script = await readScript(args.script);
  validateScript(script, args.client);
  const headers = headersOf(args.header);
  const driver = args.client === 'ai4' ? await ai4Driver(args, headers, script) : await uiDriver(args, headers, script);
  for (const [index, step] of script.steps.entries()) {
    const record = { do: step.do, status: null, error: null };
    result.steps.push(record);
    runningStep = record;
    try {
      await driver[step.do](step, record);
    } catch (error) {
      const Kind = error instanceof UsageError ? UsageError : Error;
      throw new Kind(`step ${index} (${step.do}): ${describe(error)}`);
    }
    fillStep(record);
    runningStep = null;
  }
}

function validateScript(script, client) {
  checkScriptKeys(script);
  check(!script.lastMessageOnly || client !== 'ai4', '"lastMessageOnly" is not supported with --client ai4');
  check(Array.isArray(script.steps), '"steps" must be an array');
  const allowed = client === 'ai4' ? AI4_STEPS : UI_STEPS;
  for (const [index, step] of script.steps.entries()) {
    const where = `step ${index}`;
    check(step !== null && typeof step === 'object', `${where} must be an object`);
    check(allowed.includes(step.do), `${where}: "do" must be one of ${allowed.join(', ')} with --client ${client}, got ${JSON.stringify(step.do)}`);
    if (step.do === 'send') {
      check(typeof step.text === 'string' || Array.isArray(step.files), `${where}: send needs "text" (or "files")`);
      check(step.files === undefined || (Array.isArray(step.files) && step.files.every((f) => f && typeof f.url === 'string' && typeof f.mediaType === 'string')), `${where}: "files" must be [{mediaType, url, filename?}]`);
      check(step.editIndex === undefined || Number.isInteger(step.editIndex), `${where}: "editIndex" must be an integer`);
      check(step.wait === undefined || typeof step.wait === 'boolean', `${where}: "wait" must be a boolean`);
      check(step.stopAfterChunk === undefined || typeof step.stopAfterChunk === 'string', `${where}: "stopAfterChunk" must be a string`);
      check(step.stopAfterMs === undefined || (Number.isInteger(step.stopAfterMs) && step.stopAfterMs >= 0), `${where}: "stopAfterMs" must be a whole number`);
      if (client === 'ai4') {
        check(step.editIndex === undefined && step.stopAfterChunk === undefined && step.stopAfterMs === undefined, `${where}: editIndex/stopAfterChunk/stopAfterMs are not supported with --client ai4`);
      }
    }
    if (step.do === 'regenerate') check(step.messageIndex === undefined || Number.isInteger(step.messageIndex), `${where}: "messageIndex" must be an integer`);
    checkSharedStep(step, where);
    if (step.do === 'toolResult') check(typeof step.tool === 'string' && 'result' in step, `${where}: toolResult needs "tool" and "result"`);
    if (step.do === 'wait') {
      check(step.untilChunk === undefined || typeof step.untilChunk === 'string', `${where}: "untilChunk" must be a string`);
      check(step.untilChunk === undefined || client !== 'ai4', `${where}: "untilChunk" is not supported with --client ai4`);
    }
    if (step.do === 'reload') check(step.persist === undefined || ['lastUser', 'all', 'server'].includes(step.persist), `${where}: "persist" must be "lastUser", "all" or "server"`);
  }
}

// ------------------------------------------------------- request recording

/**
 * A fetch that records every request in `result.requests` (method, url,
 * status, parsed body) and opens its slot in `result.chunks`. `onResponse`
 * may wrap the response.
 */
function recordingFetch(onResponse) {
  return async (input, init = {}) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const entry = { method: (init.method ?? input?.method ?? 'GET').toUpperCase(), url, status: null, body: parseBody(init.body), error: null };
    const index = result.requests.push(entry) - 1;
    result.chunks.push([]);
    try {
      const response = await globalThis.fetch(input, init);
      entry.status = response.status;
      return onResponse ? onResponse(response, index) : response;
    } catch (error) {
      entry.error = describe(error);
      throw error;
    }
  };
}

// ------------------------------------------------------------ ai6 / ai7

async function uiDriver(args, headers, script) {
  const ai = await import(args.client);
  const chatId = script.chatId ?? 'chat-1';

  // Chunks are observed between the transport's parser and the chat: the
  // transport below overrides DefaultChatTransport.processResponseStream and
  // pipes its validated UIMessageChunks through `observeChunks`. That sees
  // exactly the chunks the chat gets, in order, for both sendMessages (POST)
  // and reconnectToStream (GET). The fetch wrapper maps the response body
  // back to its request, so chunks land in the slot of that request.
  // (The chat's own hooks don't fit "stopAfterChunk": onData fires for data-*
  // parts only, and message updates don't map one-to-one onto chunk types.)
  const requestOfBody = new WeakMap();
  const fetch = recordingFetch((response, index) => {
    if (response.body) requestOfBody.set(response.body, index);
    return response;
  });
  const chunkWatchers = new Set();

  function observeChunks(index) {
    // Once a watcher holds the stream, nothing more reaches the chat until the
    // hold is released (after its stop), so the chat's view ends exactly at
    // the chunk the watcher acted on.
    let hold = null;
    return new TransformStream({
      async transform(chunk, controller) {
        if (hold !== null) {
          await hold;
          return;
        }
        if (index !== undefined) result.chunks[index].push(chunk.type);
        controller.enqueue(chunk);
        for (const watcher of chunkWatchers) {
          const held = watcher(chunk, index);
          if (held) hold = held;
        }
      },
      async flush() {
        if (hold !== null) await hold;
      },
    });
  }

  class ObservedTransport extends ai.DefaultChatTransport {
    processResponseStream(stream) {
      return super.processResponseStream(stream).pipeThrough(observeChunks(requestOfBody.get(stream)));
    }
  }

  const sendAutomaticallyWhen = {
    none: undefined,
    approvals: ai.lastAssistantMessageIsCompleteWithApprovalResponses,
    toolCalls: ai.lastAssistantMessageIsCompleteWithToolCalls,
  }[script.sendAutomaticallyWhen ?? 'none'];

  class Chat extends ai.AbstractChat {
    constructor({ messages, ...init }) {
      super({ ...init, state: new MemoryChatState(messages) });
    }
  }

  // "lastMessageOnly": the request carries only the last message, as a page
  // whose server keeps the conversation sends it (the AI SDK's persistence
  // recipe with prepareSendMessagesRequest).
  const prepareSendMessagesRequest = script.lastMessageOnly
    ? ({ id, messages, trigger, messageId }) => ({ body: { id, messages: messages.slice(-1), trigger, messageId } })
    : undefined;

  // One per "page load": a new chat with its own transport, as useChat makes.
  const createChat = (messages) =>
    new Chat({
      id: chatId,
      messages,
      transport: new ObservedTransport({ api: args.api, headers, fetch, prepareSendMessagesRequest }),
      sendAutomaticallyWhen,
    });

  let chat = createChat([]);
  current = chat;
  // Requests started with "wait": false, per chat.
  const pending = new WeakMap([[chat, new Set()]]);

  const track = (promise) => {
    const set = pending.get(chat);
    set.add(promise);
    promise.then(
      () => set.delete(promise),
      (error) => {
        set.delete(promise);
        fail(error);
        emit();
      },
    );
    return promise;
  };

  const firstPart = (predicate) => {
    for (const message of chat.messages) {
      for (const part of message.parts) if (ai.isToolUIPart(part) && predicate(part)) return part;
    }
    return undefined;
  };

  return {
    async send(step) {
      const files = step.files?.map((file) => ({ type: 'file', ...file }));
      const message = { text: step.text, ...(files ? { files } : {}) };
      if (step.text === undefined) delete message.text;
      if (step.editIndex !== undefined) {
        const edited = chat.messages[step.editIndex];
        if (edited === undefined) throw new UsageError(`editIndex ${step.editIndex}: there are ${chat.messages.length} messages`);
        message.messageId = edited.id;
      }
      const sendingChat = chat;
      const firstRequest = result.requests.length;
      const stops = [];
      const cleanups = [];
      if (step.stopAfterChunk !== undefined) {
        let fired = false;
        const watcher = (chunk, index) => {
          if (fired || chunk.type !== step.stopAfterChunk || index === undefined || index < firstRequest) return undefined;
          fired = true;
          // A timer turn lets the chat finish applying this chunk (all of that
          // runs in microtasks) before the abort.
          const stopped = sleep(0).then(() => sendingChat.stop());
          stops.push(stopped);
          return stopped;
        };
        chunkWatchers.add(watcher);
        cleanups.push(() => chunkWatchers.delete(watcher));
      }
      if (step.stopAfterMs !== undefined) {
        const timer = setTimeout(() => stops.push(sendingChat.stop()), step.stopAfterMs);
        cleanups.push(() => clearTimeout(timer));
      }
      const sent = track(chat.sendMessage(message));
      sent.finally(() => cleanups.forEach((cleanup) => cleanup())).catch(() => {});
      if (step.wait === false) return;
      await sent;
      await Promise.all(stops);
      await waitIdle(chat);
    },

    async continue() {
      await track(chat.sendMessage());
      await waitIdle(chat);
    },

    async regenerate(step) {
      let messageId;
      if (step.messageIndex !== undefined) {
        messageId = chat.messages[step.messageIndex]?.id;
        if (messageId === undefined) throw new UsageError(`messageIndex ${step.messageIndex}: there are ${chat.messages.length} messages`);
      }
      await track(chat.regenerate(messageId === undefined ? {} : { messageId }));
      await waitIdle(chat);
    },

    async approve(step) {
      const part = firstPart((p) => p.state === 'approval-requested');
      if (part === undefined) throw new Error('approve: no tool part in state approval-requested');
      await chat.addToolApprovalResponse({ id: part.approval.id, approved: step.approved, ...(step.reason === undefined ? {} : { reason: step.reason }) });
      // An automatic send (sendAutomaticallyWhen) is started, not awaited, by
      // the chat; it has set the status to submitted by now.
      await waitIdle(chat);
    },

    async toolOutput(step) {
      const part = firstPart((p) => ai.getToolName(p) === step.tool && p.state === 'input-available');
      if (part === undefined) throw new Error(`toolOutput: no part of tool ${step.tool} in state input-available`);
      const outcome = typeof step.errorText === 'string' && !('output' in step) ? { state: 'output-error', errorText: step.errorText } : { output: step.output };
      await chat.addToolOutput({ tool: step.tool, toolCallId: part.toolCallId, ...outcome });
      await waitIdle(chat);
    },

    async stop() {
      await chat.stop();
      await waitIdle(chat);
    },

    async wait(step) {
      if (step.untilChunk !== undefined) {
        // Until the latest request has delivered such a chunk, or the chat is idle.
        for (;;) {
          if (result.chunks.at(-1)?.includes(step.untilChunk)) return;
          if (!isBusy(chat.status) && pending.get(chat).size === 0) break;
          await sleep(POLL_MS);
        }
      }
      await Promise.allSettled([...pending.get(chat)]);
      await waitIdle(chat);
    },

    async sleep(step) {
      await sleep(step.ms);
    },

    async reload(step, record) {
      // What a client persisted. While a response streams that is the
      // messages up to and including the last user message (the reply is
      // saved when it finishes); when the chat is idle it is all of them.
      // "persist": "lastUser" | "all" overrides. The old chat is left
      // alone: its request is not aborted and keeps going.
      // "server": the page loads the chat from the server's
      // GET /api/chats/{id} (next to --api) and checks the messages with the
      // SDK's own validateUIMessages, as a page would before useChat.
      const persist = step.persist ?? (isBusy(chat.status) ? 'lastUser' : 'all');
      const lastUser = chat.messages.findLastIndex((message) => message.role === 'user');
      const persisted =
        persist === 'server'
          ? await loadFromServer(ai, args.api, headers, chatId)
          : structuredClone(persist === 'all' ? chat.messages : chat.messages.slice(0, lastUser + 1));
      record.persisted = persisted.length;
      chat = createChat(persisted);
      current = chat;
      pending.set(chat, new Set());
      const firstRequest = result.requests.length;
      await track(chat.resumeStream());
      await waitIdle(chat);
      const reconnect = result.requests.slice(firstRequest).find((request) => request.method === 'GET');
      record.reconnectStatus = reconnect?.status ?? null;
    },
  };
}

/** The chat's messages from the server, validated by the SDK. */
async function loadFromServer(ai, api, headers, chatId) {
  const url = new URL(api);
  url.pathname = url.pathname.replace(/\/chat\/?$/, `/chats/${encodeURIComponent(chatId)}`);
  url.search = '';
  const response = await recordingFetch((r) => r)(url.href, { method: 'GET', headers });
  if (!response.ok) throw new Error(`GET ${url.pathname}: ${response.status}`);
  const { messages } = await response.json();
  return ai.validateUIMessages({ messages });
}

// ------------------------------------------------------------------ ai4

/**
 * AI SDK 4's useChat (in @ai-sdk/react 1.2.x) without React: the same
 * state transitions around `callChatApi`, written out here.
 *
 * The body v4 useChat POSTs by default is `{ id, messages }` (plus `data`
 * when given, which this driver never does). Without `sendExtraMessageFields`
 * each message is cut down to `role`, `content`, and only when present
 * `experimental_attachments`, `data`, `annotations`, `toolInvocations` and
 * `parts`: no `id`, no `createdAt`. Script option `"sendExtraMessageFields":
 * true` sends the messages whole, as that useChat option does. useChat
 * fills `parts` on every message first (fillMessageParts), so `parts` is
 * always there; an assistant message with tool calls carries both
 * `toolInvocations` and `tool-invocation` parts.
 */
async function ai4Driver(args, headers, script) {
  const ui = await import('@ai-sdk/ui-utils');
  const chatId = script.chatId ?? 'chat-1';
  const api = new URL(args.api);
  if (!api.searchParams.has('protocol')) api.searchParams.set('protocol', 'data');
  const sendExtraMessageFields = script.sendExtraMessageFields === true;
  // useChat's default is 1: no automatic resubmission after tool results.
  const maxSteps = Number.isInteger(script.maxSteps) ? script.maxSteps : 1;

  // The data stream's parts are recorded from the bytes on their way to
  // callChatApi (a pass-through around the response body).
  const fetch = recordingFetch((response, index) => {
    if (!response.ok || response.body === null) return response;
    const body = response.body.pipeThrough(recordDataStreamParts(ui, index));
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  });

  const chat = { status: 'ready', error: undefined, messages: [] };
  current = chat;
  let abortController = null;
  const pending = new Set();

  const stripped = (message) => {
    const { role, content, experimental_attachments, data, annotations, toolInvocations, parts } = message;
    const kept = { role, content };
    for (const [key, value] of Object.entries({ experimental_attachments, data, annotations, toolInvocations, parts })) {
      if (value !== undefined) kept[key] = value;
    }
    return kept;
  };

  async function triggerRequest(messages) {
    chat.status = 'submitted';
    chat.error = undefined;
    const chatMessages = ui.fillMessageParts(messages);
    const messageCount = chatMessages.length;
    const maxStep = ui.extractMaxToolInvocationStep(chatMessages.at(-1)?.toolInvocations);
    try {
      abortController = new AbortController();
      chat.messages = chatMessages;
      await ui.callChatApi({
        api: api.href,
        body: { id: chatId, messages: sendExtraMessageFields ? chatMessages : chatMessages.map(stripped) },
        streamProtocol: 'data',
        headers: { ...headers },
        abortController: () => abortController,
        restoreMessagesOnFailure() {}, // keepLastMessageOnError defaults to true
        onUpdate({ message, replaceLastMessage }) {
          chat.status = 'streaming';
          chat.messages = [...(replaceLastMessage ? chatMessages.slice(0, -1) : chatMessages), message];
        },
        generateId: ui.generateId,
        fetch,
        lastMessage: chatMessages.at(-1),
        requestType: 'generate',
      });
      abortController = null;
      chat.status = 'ready';
    } catch (error) {
      if (error?.name === 'AbortError') {
        abortController = null;
        chat.status = 'ready';
        return;
      }
      chat.error = error;
      chat.status = 'error';
    }
    if (
      ui.shouldResubmitMessages({ originalMaxToolInvocationStep: maxStep, originalMessageCount: messageCount, maxSteps, messages: chat.messages })
    ) {
      await triggerRequest(chat.messages);
    }
  }

  const track = (promise) => {
    pending.add(promise);
    promise.then(
      () => pending.delete(promise),
      (error) => {
        pending.delete(promise);
        fail(error);
        emit();
      },
    );
    return promise;
  };

  return {
    // useChat's append({ role: 'user', content }, { experimental_attachments }).
    async send(step) {
      const attachments = await ui.prepareAttachmentsForRequest(
        step.files?.map((file) => ({ name: file.filename, contentType: file.mediaType, url: file.url })),
      );
      const input = { role: 'user', content: step.text ?? '' };
      const message = {
        ...input,
        id: ui.generateId(),
        createdAt: new Date(),
        experimental_attachments: attachments.length > 0 ? attachments : undefined,
        parts: ui.getMessageParts(input),
      };
      const sent = track(triggerRequest([...chat.messages, message]));
      if (step.wait === false) return;
      await sent;
      await waitIdle(chat);
    },

    // useChat's addToolResult: set the result on the last message's tool
    // invocation, then resend when every tool call of its last step has one.
    async toolResult(step) {
      const lastMessage = chat.messages.at(-1);
      const invocation = lastMessage?.toolInvocations?.find((call) => call.toolName === step.tool && call.state === 'call');
      if (invocation === undefined) throw new Error(`toolResult: the last message has no call of tool ${step.tool} in state call`);
      const messages = chat.messages;
      ui.updateToolCallResult({ messages, toolCallId: invocation.toolCallId, toolResult: step.result });
      chat.messages = [...messages.slice(0, -1), { ...messages.at(-1) }];
      if (isBusy(chat.status)) return;
      if (ui.isAssistantMessageWithCompletedToolCalls(messages.at(-1))) {
        await track(triggerRequest(messages));
        await waitIdle(chat);
      }
    },

    async stop() {
      abortController?.abort();
      abortController = null;
      await Promise.allSettled([...pending]);
      await waitIdle(chat);
    },

    async wait() {
      await Promise.allSettled([...pending]);
      await waitIdle(chat);
    },

    async sleep(step) {
      await sleep(step.ms);
    },
  };
}

/** Pass-through for data stream bytes that records each part's type. */
function recordDataStreamParts(ui, index) {
  const decoder = new TextDecoder();
  let buffer = '';
  const onLine = (line) => {
    if (line === '') return;
    let type;
    try {
      type = ui.parseDataStreamPart(line).type;
    } catch {
      type = `invalid:${line.slice(0, 20)}`;
    }
    result.chunks[index].push(type);
  };
  return new TransformStream({
    transform(bytes, controller) {
      controller.enqueue(bytes);
      buffer += decoder.decode(bytes, { stream: true });
      const lines = buffer.split('\n');
      buffer = lines.pop();
      lines.forEach(onLine);
    },
    flush() {
      buffer += decoder.decode();
      onLine(buffer);
    },
  });
}

// ------------------------------------------------------------------ CLI

// Runs last, so every class and constant below is initialized.
const args = parseDriverCommandLine(['ai6', 'ai7', 'ai4'], undefined, (error) => {
  fail(`usage: ${describe(error)}`);
  emit(2);
});

if (args) {
  const timeoutMs = timeoutOf(args, DEFAULT_TIMEOUT_MS);
  setTimeout(() => {
    fail(`timed out after ${timeoutMs} ms${runningStep ? ` in step ${result.steps.length - 1} (${runningStep.do})` : ''}`);
    emit();
  }, timeoutMs).unref();
  await runMain(main, args, fail, emit);
}
