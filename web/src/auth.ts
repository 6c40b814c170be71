// The server's token: `agent serve` prints the page's address with it in the
// fragment (`/#token=...`), which the browser never sends to any server. On load
// the page moves it into this origin's storage (an origin includes the port, so
// no other local server can read it), removes it from the address bar, and sends
// it as `Authorization: Bearer` with every API call. No cookie: nothing is sent
// to the server on its own, so another page cannot borrow the credential.
//
// A link never replaces the stored token on its own: a token names an account,
// and a link carrying someone else's would send the user's next messages into
// that account (and show its history). A token in the address that differs
// from the stored one is only offered (`offeredToken`) until the user says which
// to use (`chooseToken`; App.tsx asks before anything is sent).

const KEY = 'agent-web:token';
let remembered: string | null = null; // when storage is unavailable
/** A token from the address that differs from the stored one, until the user chooses. */
let offered: string | null = null;

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
 * Takes `#token=...` out of the address: the fragment is always dropped with
 * `history.replaceState` (no reload, nothing left in history to copy). The
 * token is stored when the page has none; one that differs from the stored
 * token is only offered (see the top of this file); an empty one changes
 * nothing.
 */
export function adoptToken(): void {
  const match = /^#(?:.*&)?token=([^&]*)/.exec(window.location.hash);
  if (!match) return;
  window.history.replaceState(window.history.state, '', window.location.pathname + window.location.search);
  let value = match[1] ?? '';
  try {
    value = decodeURIComponent(value);
  } catch {
    // used as written
  }
  value = value.trim();
  const current = token();
  if (!value || value === current) return;
  if (current === null) setToken(value);
  else offered = value;
}

/** The token the address carried that differs from the stored one, while the user has not chosen. */
export function offeredToken(): string | null {
  return offered;
}

/** The user's choice: the offered token (`useOffered`, now stored) or the current one; the offer is gone. */
export function chooseToken(useOffered: boolean): void {
  if (useOffered && offered) setToken(offered);
  offered = null;
}

/** Whether a `storage` event says another tab changed the token. */
export function isTokenChange(e: StorageEvent): boolean {
  return e.key === KEY && e.storageArea === storage();
}

/** The `Authorization` header of API calls (none without a token). */
export function authHeaders(): Record<string, string> {
  const t = token();
  return t ? { authorization: `Bearer ${t}` } : {};
}
