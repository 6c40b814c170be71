import { useEffect, useState } from 'react';
import { api, errorText } from './api';

/** One graph of `GET /api/graphs`: what it is and the tools it offers. */
export type GraphInfo = { name: string; description: string; tools: string[] };

export type GraphsState =
  | { status: 'loading' }
  | { status: 'ready'; defaultGraph: string; graphs: GraphInfo[] }
  /** The server did not list its graphs: no picker, and requests name none. */
  | { status: 'unavailable'; message: string };

function parse(body: unknown): { defaultGraph: string; graphs: GraphInfo[] } {
  const b = (body ?? {}) as { default?: unknown; graphs?: unknown };
  if (!Array.isArray(b.graphs)) throw new Error('unexpected response');
  const graphs = b.graphs
    .filter((g): g is Record<string, unknown> => typeof g === 'object' && g !== null && typeof g.name === 'string' && g.name !== '')
    .map((g) => ({
      name: g.name as string,
      description: typeof g.description === 'string' ? g.description : '',
      tools: Array.isArray(g.tools) ? g.tools.filter((t): t is string => typeof t === 'string') : [],
    }));
  if (graphs.length === 0) throw new Error('no graph is offered');
  const named = typeof b.default === 'string' && graphs.some((g) => g.name === b.default);
  return { defaultGraph: named ? (b.default as string) : graphs[0]!.name, graphs };
}

/** `GET /api/graphs`: the graphs this token's account may run, and the default. */
export function useGraphs(epoch: number): GraphsState {
  const [state, setState] = useState<GraphsState>({ status: 'loading' });
  useEffect(() => {
    const ctrl = new AbortController();
    api<unknown>('/api/graphs', { signal: ctrl.signal })
      .then((body) => setState({ status: 'ready', ...parse(body) }))
      .catch((e: unknown) => {
        if (!ctrl.signal.aborted) setState({ status: 'unavailable', message: errorText(e) });
      });
    return () => ctrl.abort();
  }, [epoch]);
  return state;
}
