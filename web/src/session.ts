// Which chat the page shows, and where its messages come from.
//
// The current chat's id is in the address (`?chat=ID`) and in this origin's
// storage (`agent-web:current`), so a reload, a second tab or a new browser
// session opens it again. Its messages come from the server (`GET
// /api/chats/{id}`) when the server keeps conversations, or from this browser
// (storage.ts) when it answers 404 `no_store`.
//
// Two small things are kept in this browser even with a server that keeps the
// conversation, because the server does not return them: what the page measured
// and was told while the answers streamed (tool call durations, each answer's
// usage and model: `agent-web:notes:<id>`), and, only while an answer streams,
// a copy of the conversation so far (`agent-web:live:<id>`), so that a reload in
// the middle of an answer shows the prompt it answers before the server has
// recorded it; the resumed stream then replaces the partial answer.
import type { AppMessage, Metadata, Timings } from './types';
import { api, ApiError } from './api';
import { loadLocalChat } from './storage';

const CURRENT = 'agent-web:current';
const notesKey = (id: string) => `agent-web:notes:${id}`;
const liveKey = (id: string) => `agent-web:live:${id}`;

/** This origin's localStorage, or null when the browser refuses it (privacy mode, sandboxed frame). */
export function browserStorage(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
}

/** Whether `value` looks like a UI message (id, role, typed parts). */
export function isMessage(value: unknown): value is AppMessage {
  if (typeof value !== 'object' || value === null) return false;
  const m = value as Record<string, unknown>;
  return (
    typeof m.id === 'string' &&
    (m.role === 'user' || m.role === 'assistant' || m.role === 'system') &&
    Array.isArray(m.parts) &&
    m.parts.every((p) => typeof p === 'object' && p !== null && typeof (p as { type?: unknown }).type === 'string')
  );
}

/** A chat id the server accepts (1 to 128 characters); works outside secure contexts too. */
export function newChatId(): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return `chat-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** Ids taken from the address or storage: 1 to 128 printable characters. */
const ID = /^[^\s\u0000-\u001f\u007f/?#]{1,128}$/u;

/**
 * The chat to open on load: `?chat=ID`, else the last one of this browser, else
 * a new one (`fresh`: nothing to load or reattach to).
 */
export function initialChatId(): { id: string; fresh: boolean } {
  const fromUrl = new URLSearchParams(window.location.search).get('chat');
  if (fromUrl && ID.test(fromUrl)) return { id: fromUrl, fresh: false };
  let stored: string | null = null;
  try {
    stored = browserStorage()?.getItem(CURRENT) ?? null;
  } catch {
    // none
  }
  return stored && ID.test(stored) ? { id: stored, fresh: false } : { id: newChatId(), fresh: true };
}

/** Makes `id` the current chat: in the address (`?chat=`, no history entry) and in storage. */
export function showChatId(id: string): void {
  try {
    browserStorage()?.setItem(CURRENT, id);
  } catch {
    // the address still has it
  }
  const params = new URLSearchParams(window.location.search);
  if (params.get('chat') === id) return;
  params.set('chat', id);
  window.history.replaceState(window.history.state, '', `${window.location.pathname}?${params.toString()}`);
}

/**
 * Forgets which chat is open (storage and address), so the page opens a new
 * one: used when the token changes to another account's, whose conversations
 * this one is not (nor should its messages be sent with that token).
 */
export function forgetCurrentChat(): void {
  try {
    browserStorage()?.removeItem(CURRENT);
  } catch {
    // the address is what counts here
  }
  const params = new URLSearchParams(window.location.search);
  if (!params.has('chat')) return;
  params.delete('chat');
  const query = params.toString();
  window.history.replaceState(window.history.state, '', `${window.location.pathname}${query ? `?${query}` : ''}`);
}

/** A chat ready to show. `mode`: where it is kept (`server`, or `local` without a store). */
export type LoadedChat = {
  mode: 'server' | 'local';
  id: string;
  messages: AppMessage[];
  timings: Timings;
  /** The graph the chat runs, when known (the thread's, or the one this browser sent). */
  graph?: string;
  /** Made here by New chat: nothing of it can be running on the server. */
  fresh?: boolean;
};

type Notes = { timings: Timings; meta: (Metadata | null)[] };

function readJson(key: string): unknown {
  try {
    const raw = browserStorage()?.getItem(key);
    return raw ? (JSON.parse(raw) as unknown) : null;
  } catch {
    return null;
  }
}

function readNotes(id: string): Notes {
  const data = readJson(notesKey(id)) as { v?: number; timings?: unknown; meta?: unknown } | null;
  if (data?.v !== 1) return { timings: {}, meta: [] };
  return {
    timings: typeof data.timings === 'object' && data.timings !== null ? (data.timings as Timings) : {},
    meta: Array.isArray(data.meta) ? (data.meta as (Metadata | null)[]) : [],
  };
}

/**
 * Remembers what the server does not keep of a chat: tool call durations, and
 * each answer's metadata (by its position among the answers, since the server
 * gives its stored messages ids of its own).
 */
export function saveNotes(id: string, messages: AppMessage[], timings: Timings): void {
  const calls = new Set<string>();
  const meta: (Metadata | null)[] = [];
  for (const m of messages) {
    if (m.role === 'assistant') meta.push(m.metadata ?? null);
    for (const p of m.parts) if ('toolCallId' in p) calls.add(p.toolCallId);
  }
  const kept: Timings = {};
  for (const [k, t] of Object.entries(timings)) if (calls.has(k)) kept[k] = t;
  try {
    if (meta.every((x) => x === null) && Object.keys(kept).length === 0) browserStorage()?.removeItem(notesKey(id));
    else browserStorage()?.setItem(notesKey(id), JSON.stringify({ v: 1, timings: kept, meta }));
  } catch {
    // notes are a nicety
  }
}

/** Keeps the conversation so far while an answer streams (see the top of this file). */
export function saveLive(id: string, messages: AppMessage[]): boolean {
  try {
    browserStorage()?.setItem(liveKey(id), JSON.stringify({ v: 1, messages }));
    return true;
  } catch {
    return false;
  }
}

/** Drops the copy kept while an answer streamed. */
export function dropLive(id: string): void {
  try {
    browserStorage()?.removeItem(liveKey(id));
  } catch {
    // nothing to do
  }
}

/** Forgets everything this browser kept of chat `id` with a store (after a delete). */
export function forgetNotes(id: string): void {
  dropLive(id);
  try {
    browserStorage()?.removeItem(notesKey(id));
  } catch {
    // nothing to do
  }
}

function readLive(id: string): AppMessage[] | null {
  const data = readJson(liveKey(id)) as { v?: number; messages?: unknown } | null;
  if (data?.v !== 1 || !Array.isArray(data.messages) || !data.messages.every(isMessage)) return null;
  return data.messages;
}

/**
 * Loads chat `id`: from the server when it keeps conversations (an unknown id is
 * a new, empty chat), else from this browser. Rejects when the server cannot be
 * asked (the caller offers to try again).
 */
export async function loadChat(id: string): Promise<LoadedChat> {
  let body: { messages?: unknown; graph?: unknown } | null = null;
  try {
    body = await api<{ messages?: unknown; graph?: unknown }>(`/api/chats/${encodeURIComponent(id)}`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404 && e.code === 'no_store') {
      const local = loadLocalChat(id);
      return { mode: 'local', ...local };
    }
    if (!(e instanceof ApiError && e.status === 404)) throw e;
    // not_found: a new chat (or one deleted elsewhere)
  }
  const notes = readNotes(id);
  let messages = (Array.isArray(body?.messages) ? body.messages : []).filter(isMessage);
  const live = readLive(id);
  if (live && live.length > messages.length) {
    messages = live; // an answer was streaming when the page went away; the server has not recorded it yet
  } else {
    if (live) dropLive(id);
    let n = 0;
    messages = messages.map((m) => {
      if (m.role !== 'assistant') return m;
      const meta = notes.meta[n++];
      return m.metadata || !meta ? m : { ...m, metadata: meta };
    });
  }
  const graph = typeof body?.graph === 'string' && body.graph ? body.graph : undefined;
  return { mode: 'server', id, messages, timings: notes.timings, graph };
}
