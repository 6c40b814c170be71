// Calls to the server's JSON endpoints (`/api/...`), each with the token
// (see auth.ts). A refusal becomes an `ApiError` carrying the server's error
// code (`{"error": "...", "message": "..."}`), so callers can tell `no_store`
// from `not_found` and show the server's own words.
import { authHeaders } from './auth';

/** A refused or failed API call: HTTP status, the server's error code and message. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly path: string | undefined;

  constructor(status: number, code: string, message: string, path?: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.path = path;
  }
}

/** The `ApiError` of a response that is not ok (its JSON body read when there is one). */
export async function responseError(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: unknown; message?: unknown; path?: unknown };
    const code = typeof body.error === 'string' ? body.error : '';
    const message = typeof body.message === 'string' ? body.message : code || `HTTP ${res.status}`;
    return new ApiError(res.status, code, message, typeof body.path === 'string' ? body.path : undefined);
  } catch {
    return new ApiError(res.status, '', text.trim().slice(0, 200) || `HTTP ${res.status}`);
  }
}

/**
 * `fetch` of an API path with the token; resolves to the parsed JSON body (or
 * `null` for 204), rejects with an `ApiError` when the server refuses.
 */
export async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', ...authHeaders() };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { ...init, headers: { ...headers, ...(init.headers as Record<string, string>) } });
  if (!res.ok) throw await responseError(res);
  if (res.status === 204) return null as T;
  return (await res.json()) as T;
}

/** A readable sentence for any error thrown by `api`. */
export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.status ? `${e.message} (HTTP ${e.status})` : e.message;
  if (e instanceof TypeError) return 'Could not reach the agent server. Is `agent serve` still running?';
  return e instanceof Error ? e.message : String(e);
}

/**
 * Asks the server to cancel the chat's running answer (`POST
 * /api/chat/{id}/stop`). The server keeps a run going for a while after its
 * client goes away, so that a reload can reattach: aborting the request alone
 * does not stop it. Best effort: a failure leaves the server's grace to end it.
 */
export async function stopRun(chatId: string): Promise<void> {
  try {
    await api<null>(`/api/chat/${encodeURIComponent(chatId)}/stop`, { method: 'POST' });
  } catch {
    // the run ends anyway once its grace is over
  }
}
