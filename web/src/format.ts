import type { Effect, Decision, Usage } from './types';

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60_000);
  const s = Math.floor((ms % 60_000) / 1000);
  return `${m} m ${String(s).padStart(2, '0')} s`;
}

const nf = new Intl.NumberFormat();
export const num = (n: number) => nf.format(n);

export function formatUsage(u: Usage): string {
  const parts: string[] = [];
  if (u.inputTokens != null) {
    const cached = u.inputTokenDetails?.cacheReadTokens;
    parts.push(`${num(u.inputTokens)} in${cached ? ` (${num(cached)} cached)` : ''}`);
  }
  if (u.outputTokens != null) {
    const reasoning = u.outputTokenDetails?.reasoningTokens;
    parts.push(`${num(u.outputTokens)} out${reasoning ? ` (${num(reasoning)} reasoning)` : ''}`);
  }
  const total = u.totalTokens ?? (u.inputTokens ?? 0) + (u.outputTokens ?? 0);
  parts.push(`${num(total)} tokens`);
  return parts.join(' · ');
}

export const EFFECT_LABEL: Record<Effect, string> = {
  read_only: 'read-only',
  state_change: 'changes state',
  external_side_effect: 'external effect',
};

/** What a tool's effect level means, in words (badge titles, approval cards). */
export const EFFECT_HINT: Record<Effect, string> = {
  read_only: 'Reads only; changes nothing',
  state_change: 'Changes files or state',
  external_side_effect: 'Acts outside this machine (network, processes, messages)',
};

export const DECISION_LABEL: Record<Decision, string> = {
  allow: 'runs automatically',
  approval: 'asks you first',
  deny: 'blocked',
};

/** Tool results and arguments as readable text. */
export function pretty(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

/** `core__read_file` → {ns: 'core__', name: 'read_file'}; `mcp__notes__search` → {ns: 'mcp__notes__', name: 'search'} (ns + name is the id). */
export function splitToolId(id: string): { ns: string; name: string } {
  const at = id.lastIndexOf('__');
  if (at <= 0) return { ns: '', name: id };
  return { ns: id.slice(0, at + 2), name: id.slice(at + 2) };
}

/** What some of the server's refusals mean for the person at the page. */
const REFUSALS: Record<string, string> = {
  unknown_graph: 'The server has no graph of that name: start a new chat and pick one it lists.',
  graph_forbidden: 'Your token may not use this graph: start a new chat and pick another.',
};

/** A readable sentence for an error of `useChat` (HTTP refusals carry the server's JSON). */
export function describeError(error: Error): string {
  const e = error as Error & { statusCode?: number; responseBody?: string };
  const body = e.responseBody ?? e.message;
  if (body && body.trim().startsWith('{')) {
    try {
      const j = JSON.parse(body) as { error?: string; message?: string; path?: string };
      if (j.message || j.error) {
        const where = j.path ? ` (${j.path})` : '';
        const status = e.statusCode ? `HTTP ${e.statusCode}: ` : '';
        const known = j.error ? REFUSALS[j.error] : undefined;
        return `${status}${known ? `${known} ` : ''}${j.message ?? j.error}${where}`;
      }
    } catch {
      // not JSON after all
    }
  }
  if (error.name === 'TypeError' && /fetch|network/i.test(error.message)) {
    return 'Could not reach the agent server. Is `agent serve` still running?';
  }
  return error.message || 'Something went wrong.';
}
