import { useCallback, useEffect, useRef, useState } from 'react';
import { api, ApiError, errorText } from './api';

/** One conversation of `GET /api/chats`. */
export type ChatSummary = {
  id: string;
  title: string;
  graph: string;
  created_ms: number;
  updated_ms: number;
};

export type ChatsState =
  | { status: 'loading' }
  | { status: 'ready'; chats: ChatSummary[] }
  /** The server keeps no conversations (404 `no_store`): the page keeps them in this browser. */
  | { status: 'no_store' }
  | { status: 'error'; message: string };

/** A thread's fields as the chats endpoints give them (anything else is dropped). */
export function parseSummary(value: unknown): ChatSummary | null {
  if (typeof value !== 'object' || value === null) return null;
  const c = value as Record<string, unknown>;
  if (typeof c.id !== 'string' || !c.id) return null;
  return {
    id: c.id,
    title: typeof c.title === 'string' ? c.title : '',
    graph: typeof c.graph === 'string' ? c.graph : '',
    created_ms: typeof c.created_ms === 'number' ? c.created_ms : 0,
    updated_ms: typeof c.updated_ms === 'number' ? c.updated_ms : 0,
  };
}

const chatPath = (id: string) => `/api/chats/${encodeURIComponent(id)}`;

/**
 * The server's conversations (`GET /api/chats`, most recent first), with rename
 * (`PATCH`) and delete (`DELETE`). `epoch` changes when the token does (load again).
 * A refresh keeps the list on screen until the new one arrives.
 */
export function useChats(epoch: number): {
  state: ChatsState;
  refresh: () => void;
  rename: (id: string, title: string) => Promise<void>;
  remove: (id: string) => Promise<void>;
} {
  const [state, setState] = useState<ChatsState>({ status: 'loading' });
  const [attempt, setAttempt] = useState(0);
  const latest = useRef(0);

  useEffect(() => {
    const ticket = ++latest.current;
    const ctrl = new AbortController();
    api<{ chats?: unknown }>('/api/chats', { signal: ctrl.signal })
      .then((body) => {
        if (ticket !== latest.current) return;
        const chats = (Array.isArray(body?.chats) ? body.chats : [])
          .map(parseSummary)
          .filter((c): c is ChatSummary => c !== null)
          .sort((a, b) => b.updated_ms - a.updated_ms);
        setState({ status: 'ready', chats });
      })
      .catch((e: unknown) => {
        if (ctrl.signal.aborted || ticket !== latest.current) return;
        if (e instanceof ApiError && e.status === 404 && e.code === 'no_store') setState({ status: 'no_store' });
        else setState((s) => (s.status === 'ready' ? s : { status: 'error', message: errorText(e) }));
      });
    return () => ctrl.abort();
  }, [epoch, attempt]);

  const refresh = useCallback(() => setAttempt((n) => n + 1), []);

  const rename = useCallback(async (id: string, title: string) => {
    const body = await api<unknown>(chatPath(id), { method: 'PATCH', body: JSON.stringify({ title }) });
    const saved = parseSummary(body);
    setState((s) =>
      s.status === 'ready'
        ? { ...s, chats: s.chats.map((c) => (c.id === id ? { ...c, title: saved?.title ?? title.trim() } : c)) }
        : s,
    );
  }, []);

  const remove = useCallback(
    async (id: string) => {
      try {
        await api<null>(chatPath(id), { method: 'DELETE' });
      } catch (e) {
        // Gone already (another tab deleted it): the list is what matters.
        if (!(e instanceof ApiError && e.status === 404 && e.code === 'not_found')) throw e;
      }
      setState((s) => (s.status === 'ready' ? { ...s, chats: s.chats.filter((c) => c.id !== id) } : s));
      refresh();
    },
    [refresh],
  );

  return { state, refresh, rename, remove };
}
