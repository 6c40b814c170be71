import type { AppMessage, Timings } from './types';

const PREFIX = 'agent-web:';
const CURRENT = `${PREFIX}current`;
const chatKey = (id: string) => `${PREFIX}chat:${id}`;

/** A chat id the server accepts (1 to 128 characters); works outside secure contexts too. */
export function newChatId(): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return `chat-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

function storage(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    return null; // disabled (privacy mode, sandboxed frame)
  }
}

export type Saved = { id: string; messages: AppMessage[]; timings: Timings };

function isMessage(value: unknown): value is AppMessage {
  if (typeof value !== 'object' || value === null) return false;
  const m = value as Record<string, unknown>;
  return (
    typeof m.id === 'string' &&
    (m.role === 'user' || m.role === 'assistant' || m.role === 'system') &&
    Array.isArray(m.parts) &&
    m.parts.every((p) => typeof p === 'object' && p !== null && typeof (p as { type?: unknown }).type === 'string')
  );
}

/** The chat to show on load: the last one used in this browser, or a new one. */
export function loadCurrent(): Saved {
  const store = storage();
  const id = store?.getItem(CURRENT);
  if (id && /^[\w-]{1,128}$/.test(id)) {
    const raw = store?.getItem(chatKey(id));
    if (raw) {
      try {
        const data = JSON.parse(raw) as { v?: number; messages?: unknown; timings?: unknown };
        if (data.v === 1 && Array.isArray(data.messages) && data.messages.every(isMessage)) {
          const timings = typeof data.timings === 'object' && data.timings !== null ? (data.timings as Timings) : {};
          return { id, messages: data.messages, timings };
        }
      } catch {
        // unreadable: start over
      }
    }
    return { id, messages: [], timings: {} };
  }
  const fresh = newChatId();
  store?.setItem(CURRENT, fresh);
  return { id: fresh, messages: [], timings: {} };
}

/** Stores a chat's messages (and makes it the current chat). False when storage refused. */
export function saveChat(id: string, messages: AppMessage[], timings: Timings): boolean {
  const store = storage();
  if (!store) return false;
  try {
    store.setItem(CURRENT, id);
    if (messages.length === 0) {
      store.removeItem(chatKey(id));
    } else {
      const ids = new Set<string>();
      for (const m of messages) for (const p of m.parts) if ('toolCallId' in p) ids.add(p.toolCallId);
      const kept: Timings = {};
      for (const [k, t] of Object.entries(timings)) if (ids.has(k)) kept[k] = t;
      store.setItem(chatKey(id), JSON.stringify({ v: 1, messages, timings: kept }));
    }
    return true;
  } catch {
    return false; // quota exceeded
  }
}

/** Forgets a chat and starts a new current one; returns the new id. */
export function clearChat(id: string): string {
  const store = storage();
  const fresh = newChatId();
  try {
    store?.removeItem(chatKey(id));
    store?.setItem(CURRENT, fresh);
  } catch {
    // nothing to do
  }
  return fresh;
}
