import { useEffect, useSyncExternalStore } from 'react';

/** The formatter (assets/highlight.js): the markdown parser and the highlighter. */
export type Formatter = typeof import('./highlight');

let loaded: Formatter | null = null;
let failed = false;
let loading: Promise<unknown> | null = null;
/** Components waiting for the formatter: told once it has loaded or failed. */
const waiting = new Set<() => void>();

function settled(): void {
  for (const tell of [...waiting]) tell();
}

/** Imports the formatter on first use; it stays loaded. */
function load(): Promise<unknown> {
  loading ??= import('./highlight').then(
    (m) => {
      loaded = m;
      settled();
    },
    () => {
      failed = true; // blocks stay plain text
      settled();
    },
  );
  return loading;
}

/** Starts loading the formatter (an answer is on its way: it will be needed). */
export function preloadFormatter(): void {
  void load();
}

function subscribe(tell: () => void): () => void {
  waiting.add(tell);
  return () => waiting.delete(tell);
}

function current(): Formatter | null | 'failed' {
  return loaded ?? (failed ? 'failed' : null);
}

/**
 * The formatter on the main thread once it has loaded (`wanted` starts
 * loading it); null until then, 'failed' when it could not be loaded.
 *
 * Read as an external store: React checks it again when it subscribes, so a
 * load that ends between a render and its effects still renders the block
 * again. (Reading `loaded` in the render and skipping the wait in an effect
 * that found it set left such a block unformatted for good: nothing rendered
 * it again once its text was whole.)
 */
export function useFormatter(wanted: boolean): Formatter | null | 'failed' {
  useEffect(() => {
    if (wanted) void load();
  }, [wanted]);
  return useSyncExternalStore(subscribe, current);
}
