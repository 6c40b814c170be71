import { useEffect, useState } from 'react';

/** The formatter (assets/highlight.js): the markdown parser and the highlighter. */
export type Formatter = typeof import('./highlight');

let loaded: Formatter | null = null;
let failed = false;
let loading: Promise<unknown> | null = null;

/** Imports the formatter on first use; it stays loaded. */
function load(): Promise<unknown> {
  loading ??= import('./highlight').then(
    (m) => (loaded = m),
    () => (failed = true), // blocks stay plain text
  );
  return loading;
}

/** Starts loading the formatter (an answer is on its way: it will be needed). */
export function preloadFormatter(): void {
  void load();
}

/**
 * The formatter on the main thread once it has loaded (`wanted` starts
 * loading it); null until then, 'failed' when it could not be loaded.
 */
export function useFormatter(wanted: boolean): Formatter | null | 'failed' {
  const [, setLoaded] = useState(0);
  useEffect(() => {
    if (!wanted || loaded || failed) return;
    let live = true;
    void load().then(() => live && setLoaded((n) => n + 1));
    return () => {
      live = false;
    };
  }, [wanted]);
  return loaded ?? (failed ? 'failed' : null);
}
