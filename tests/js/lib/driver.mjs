// What the command-line scripts of tests/js (check-stream.mjs, chat-driver.mjs,
// tabs-driver.mjs) share: ONE JSON line of output, with errors and everything
// the libraries print kept in it; their command-line and script checks; and,
// for the two chat drivers, the in-memory chat state and waiting for a chat
// to go idle.

import { readFile } from 'node:fs/promises';
import { format, parseArgs } from 'node:util';

const MAX_TEXT = 4000;
// How long a chat has to stay idle before a wait ends. AbstractChat starts an
// automatic follow-up request (sendAutomaticallyWhen) a few microtasks after
// the previous one set the status to ready; this bridges that gap.
const SETTLE_MS = 15;
export const POLL_MS = 5;

export const AUTO_SEND = ['none', 'approvals', 'toolCalls'];

/** A bad command line or script: the script exits with code 2. */
export class UsageError extends Error {}

export function clip(text) {
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text;
}

/** `error` (an Error, a string or any value) as one short line of text. */
export function describe(error) {
  if (error instanceof Error) {
    let text = error.message || error.name;
    // The AI SDK appends the whole zod union report (every chunk type it
    // tried); the first line already names the offending value.
    if (error.name === 'AI_TypeValidationError') text = text.split('\n')[0];
    // fetch() says only "fetch failed"; the reason is in `cause`.
    if (error.cause instanceof Error && !error.name.startsWith('AI_')) text += ` (${error.cause.message})`;
    return clip(text);
  }
  if (typeof error === 'string') return clip(error);
  try {
    return clip(JSON.stringify(error) ?? String(error));
  } catch {
    return clip(String(error));
  }
}

/**
 * Keeps everything the libraries print in `result.warnings`, so stdout
 * carries only the script's line. Returns `fail(error)`: the first error
 * becomes `result.error`, later ones are kept as warnings.
 */
export function captureOutput(result) {
  for (const level of ['log', 'info', 'debug', 'warn', 'error', 'trace']) {
    console[level] = (...args) => result.warnings.push(clip(`console.${level}: ${format(...args)}`));
  }
  return (error) => {
    const text = describe(error);
    if (result.error === null) result.error = text;
    else result.warnings.push(`error: ${text}`);
  };
}

/**
 * The command line parsed with `options` (no positionals), then checked:
 * the options named in `wholeNumbers` must be whole numbers, every --header
 * must look like 'Name: value', and `check(args)` throws on anything else it
 * refuses. On a usage error `onError(error)` runs and the result is undefined.
 */
export function parseCommandLine(options, { wholeNumbers = [], check = () => {} }, onError) {
  try {
    const args = parseArgs({ options, strict: true, allowPositionals: false }).values;
    check(args);
    for (const name of wholeNumbers) {
      if (args[name] !== undefined && !/^\d+$/.test(args[name])) throw new Error(`--${name} must be a whole number`);
    }
    for (const header of args.header ?? []) {
      if (!/^[^:\s]+:/.test(header)) throw new Error(`--header must look like 'Name: value', got ${JSON.stringify(header)}`);
    }
    return args;
  } catch (error) {
    onError(error);
    return undefined;
  }
}

/**
 * The command line of a chat driver: --client (one of `clients`, by default
 * `defaultClient`), --api and --script, which it needs, --header... and
 * --timeout-ms. On a usage error `onError(error)` runs and the result is
 * undefined.
 */
export function parseDriverCommandLine(clients, defaultClient, onError) {
  const options = {
    client: defaultClient === undefined ? { type: 'string' } : { type: 'string', default: defaultClient },
    api: { type: 'string' },
    header: { type: 'string', multiple: true, default: [] },
    script: { type: 'string' },
    'timeout-ms': { type: 'string' },
  };
  const named = `${clients.slice(0, -1).join(', ')} or ${clients.at(-1)}`;
  const check = (args) => {
    if (!clients.includes(args.client)) throw new Error(`--client must be ${named}`);
    if (!args.api) throw new Error('--api is required');
    if (!args.script) throw new Error('--script is required');
  };
  return parseCommandLine(options, { wholeNumbers: ['timeout-ms'], check }, onError);
}

/** The run's time limit: --timeout-ms, or `defaultMs`. */
export function timeoutOf(args, defaultMs) {
  return args['timeout-ms'] === undefined ? defaultMs : Number(args['timeout-ms']);
}

/**
 * Runs `main(args)`, then `emit()`s the output line; a failure is recorded
 * with `fail` first (a UsageError as a script error, exit code 2).
 */
export async function runMain(main, args, fail, emit) {
  try {
    await main(args);
    emit();
  } catch (error) {
    fail(error instanceof UsageError ? `script: ${error.message}` : error);
    emit(error instanceof UsageError ? 2 : 1);
  }
}

/** The `--header 'Name: value'` arguments as an object of headers. */
export function headersOf(list) {
  const headers = {};
  for (const header of list) {
    const at = header.indexOf(':');
    headers[header.slice(0, at).trim()] = header.slice(at + 1).trim();
  }
  return headers;
}

/** The script in the JSON file `path`; a file that is not JSON is a usage error. */
export async function readScript(path) {
  try {
    return JSON.parse(await readFile(path, 'utf8'));
  } catch (error) {
    throw new UsageError(describe(error));
  }
}

/** `check(cond, what)`: a usage error saying `what` unless `cond` holds. */
export function check(cond, what) {
  if (!cond) throw new UsageError(what);
}

/** The checks of the script keys both chat drivers read. */
export function checkScriptKeys(script) {
  check(script !== null && typeof script === 'object' && !Array.isArray(script), 'must be a JSON object');
  check(script.chatId === undefined || typeof script.chatId === 'string', '"chatId" must be a string');
  check(script.sendAutomaticallyWhen === undefined || AUTO_SEND.includes(script.sendAutomaticallyWhen), `"sendAutomaticallyWhen" must be one of ${AUTO_SEND.join(', ')}`);
  check(script.lastMessageOnly === undefined || typeof script.lastMessageOnly === 'boolean', '"lastMessageOnly" must be a boolean');
}

/** The checks of the steps both chat drivers know: approve, toolOutput, sleep. */
export function checkSharedStep(step, where) {
  if (step.do === 'approve') check(typeof step.approved === 'boolean', `${where}: approve needs "approved": true|false`);
  if (step.do === 'toolOutput') check(typeof step.tool === 'string' && ('output' in step || typeof step.errorText === 'string'), `${where}: toolOutput needs "tool" and "output" (or "errorText")`);
  if (step.do === 'sleep') check(Number.isInteger(step.ms) && step.ms >= 0, `${where}: sleep needs "ms"`);
}

/** A request body as the output records it: parsed JSON, the text, or a placeholder. */
export function parseBody(body) {
  if (body === undefined || body === null) return null;
  if (typeof body !== 'string') return `<${Object.prototype.toString.call(body)}>`;
  try {
    return JSON.parse(body);
  } catch {
    return body;
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export const isBusy = (status) => status === 'submitted' || status === 'streaming';

/** Waits until `chat` is idle (ready or error) and still so SETTLE_MS later. */
export async function waitIdle(chat) {
  for (;;) {
    if (!isBusy(chat.status)) {
      await sleep(SETTLE_MS);
      if (!isBusy(chat.status)) return;
    }
    await sleep(POLL_MS);
  }
}

/**
 * The ChatState AbstractChat keeps its status, error and messages in. Like
 * the React one it replaces the messages array on every change and stores
 * snapshots (structuredClone) of messages, since the chat keeps mutating the
 * message it is streaming into. Unlike the React one it also snapshots on
 * push, so a message is never shared with the chat's in-flight state.
 */
export class MemoryChatState {
  status = 'ready';
  error = undefined;
  messages;

  constructor(messages = []) {
    this.messages = messages;
  }

  pushMessage = (message) => {
    this.messages = [...this.messages, this.snapshot(message)];
  };

  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };

  replaceMessage = (index, message) => {
    const messages = [...this.messages];
    messages[index] = this.snapshot(message);
    this.messages = messages;
  };

  snapshot = (value) => structuredClone(value);
}
