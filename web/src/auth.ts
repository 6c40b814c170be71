// The server's token: `agent serve` prints the page's address with it in the
// fragment (`/#token=...`), which the browser never sends to any server. On load
// the page moves it into this origin's storage (an origin includes the port, so
// no other local server can read it), removes it from the address bar, and sends
// it as `Authorization: Bearer` with every API call. No cookie: nothing is sent
// to the server on its own, so another page cannot borrow the credential.

const KEY = 'agent-web:token';
let remembered: string | null = null; // when storage is unavailable

function storage(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
}

/** The stored token, if any. */
export function token(): string | null {
  try {
    return storage()?.getItem(KEY) ?? remembered;
  } catch {
    return remembered;
  }
}

/** Stores `value` as the token (trimmed; empty clears it). */
export function setToken(value: string): void {
  const t = value.trim();
  remembered = t || null;
  try {
    if (t) storage()?.setItem(KEY, t);
    else storage()?.removeItem(KEY);
  } catch {
    // kept in memory for this page
  }
}

/**
 * Takes `#token=...` out of the address: stored, then the fragment is dropped
 * with `history.replaceState` (no reload, nothing left in history to copy).
 */
export function adoptToken(): void {
  const match = /^#(?:.*&)?token=([^&]*)/.exec(window.location.hash);
  if (!match) return;
  let value = match[1] ?? '';
  try {
    value = decodeURIComponent(value);
  } catch {
    // used as written
  }
  setToken(value);
  window.history.replaceState(window.history.state, '', window.location.pathname + window.location.search);
}

/** The `Authorization` header of API calls (none without a token). */
export function authHeaders(): Record<string, string> {
  const t = token();
  return t ? { authorization: `Bearer ${t}` } : {};
}
