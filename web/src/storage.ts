// The conversation kept in this browser, for a server that keeps none (its
// `/api/chats` answers 404 `no_store`): each chat's messages under
// `agent-web:chat:<chat id>`. With a server that keeps conversations nothing is
// stored here (see session.ts).
import type { AppMessage, Timings } from './types';
import { browserStorage, isMessage } from './session';

const chatKey = (id: string) => `agent-web:chat:${id}`;

export type Saved = { id: string; messages: AppMessage[]; timings: Timings; graph?: string };

/** The chat `id` as this browser stored it (empty when it has none). */
export function loadLocalChat(id: string): Saved {
  const raw = browserStorage()?.getItem(chatKey(id));
  if (raw) {
    try {
      const data = JSON.parse(raw) as { v?: number; messages?: unknown; timings?: unknown; graph?: unknown };
      if (data.v === 1 && Array.isArray(data.messages) && data.messages.every(isMessage)) {
        const timings = typeof data.timings === 'object' && data.timings !== null ? (data.timings as Timings) : {};
        const graph = typeof data.graph === 'string' && data.graph ? data.graph : undefined;
        return { id, messages: data.messages, timings, graph };
      }
    } catch {
      // unreadable: start over
    }
  }
  return { id, messages: [], timings: {} };
}

/** Stores a chat's messages (and the graph it runs). False when storage refused. */
export function saveChat(id: string, messages: AppMessage[], timings: Timings, graph?: string): boolean {
  const store = browserStorage();
  if (!store) return false;
  try {
    if (messages.length === 0) {
      store.removeItem(chatKey(id));
    } else {
      const ids = new Set<string>();
      for (const m of messages) for (const p of m.parts) if ('toolCallId' in p) ids.add(p.toolCallId);
      const kept: Timings = {};
      for (const [k, t] of Object.entries(timings)) if (ids.has(k)) kept[k] = t;
      store.setItem(chatKey(id), JSON.stringify({ v: 1, messages, timings: kept, graph }));
    }
    return true;
  } catch {
    return false; // quota exceeded
  }
}

/** Forgets a chat kept in this browser. */
export function forgetLocalChat(id: string): void {
  try {
    browserStorage()?.removeItem(chatKey(id));
  } catch {
    // nothing to do
  }
}
