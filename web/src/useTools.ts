import { useCallback, useEffect, useMemo, useState } from 'react';
import type { ToolInfo } from './types';
import type { ToolsState } from './ToolsPanel';
import { authHeaders } from './auth';

const EFFECTS = new Set(['read_only', 'state_change', 'external_side_effect']);
const DECISIONS = new Set(['allow', 'approval', 'deny']);

function parse(body: unknown): ToolInfo[] {
  const list = (body as { tools?: unknown } | null)?.tools;
  if (!Array.isArray(list)) throw new Error('unexpected response');
  return list
    .filter(
      (t): t is ToolInfo =>
        typeof t === 'object' &&
        t !== null &&
        typeof t.id === 'string' &&
        EFFECTS.has(t.effect) &&
        DECISIONS.has(t.decision),
    )
    .map((t) => ({ ...t, description: typeof t.description === 'string' ? t.description : '' }))
    .sort((a, b) => a.id.localeCompare(b.id));
}

/** A 401: the page has no token, or the server no longer accepts it. */
class Unauthorized extends Error {}

/** `GET /api/tools`, loaded once per page (and on retry). */
export function useTools(): { state: ToolsState; byId: Map<string, ToolInfo>; retry: () => void } {
  const [state, setState] = useState<ToolsState>({ status: 'loading' });
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    const ctrl = new AbortController();
    setState({ status: 'loading' });
    fetch('/api/tools', { headers: { accept: 'application/json', ...authHeaders() }, signal: ctrl.signal })
      .then(async (res) => {
        if (res.status === 401) throw new Unauthorized(await res.text());
        if (!res.ok) {
          const text = await res.text();
          let message = `HTTP ${res.status}`;
          try {
            message += `: ${(JSON.parse(text) as { message?: string }).message ?? text}`;
          } catch {
            if (text) message += `: ${text.slice(0, 200)}`;
          }
          throw new Error(message);
        }
        return parse(await res.json());
      })
      .then((tools) => setState({ status: 'ready', tools }))
      .catch((e: unknown) => {
        if (ctrl.signal.aborted) return;
        const message = e instanceof Error ? e.message : String(e);
        setState(e instanceof Unauthorized ? { status: 'unauthorized', message } : { status: 'error', message });
      });
    return () => ctrl.abort();
  }, [attempt]);
  const byId = useMemo(
    () => new Map(state.status === 'ready' ? state.tools.map((t) => [t.id, t] as const) : []),
    [state],
  );
  const retry = useCallback(() => setAttempt((n) => n + 1), []);
  return { state, byId, retry };
}
