import { useEffect, useRef, useState, type ReactNode } from 'react';
import type { Root } from 'hast';
import { offload, type Job } from './offload';
import { charge, charged, hasBudget, NODE_MS, nextSlice, size, type Lru } from './slice';

/** How a piece of an answer is to be formatted (see `useFormatted`). */
export type Formatting = {
  /** What the elements are cached under (null: not formatted at all). */
  key: string | null;
  /** Makes the tree on the main thread, when that is cheap enough (else the worker does). */
  make: (() => Root) | null;
  /** The worker's job, when `make` is null. */
  job: () => Job;
  /** The tree as elements. */
  convert: (tree: Root) => ReactNode;
  cache: Lru<ReactNode | null>;
};

/**
 * `convert(tree())` charged to the task, with what React will spend on its
 * nodes; null when it fails (a tree too deep to walk).
 */
function elements(convert: (tree: Root) => ReactNode, tree: () => Root): ReactNode | null {
  return charged(() => {
    try {
      const t = tree();
      charge(size(t) * NODE_MS);
      return convert(t);
    } catch {
      return null;
    }
  });
}

/**
 * The formatted elements of a piece of an answer: `undefined` while they are
 * not ready (the caller shows `last`, or plain text), `null` when it stays
 * plain (no grammar, too slow, no worker). Taken from the cache, else made on
 * the main thread (`make`) or by the worker, and turned into elements only
 * while the task has budget (slice.ts), else in a later task.
 */
export function useFormatted({ key, make, job, convert, cache }: Formatting): {
  node: ReactNode | null | undefined;
  /** The latest elements this component made, maybe of an earlier text (shown while newer ones are not ready). */
  last: ReactNode | null;
  /** The key `last` was made for. */
  lastKey: string | null;
} {
  // The worker's latest answer, until it is made into elements (a ref: the tree
  // is dropped once it has been, and `tick` renders again).
  const arrived = useRef<{ key: string; tree: Root | null } | null>(null);
  const [tick, setTick] = useState(0);
  const last = useRef<{ key: string; node: ReactNode } | null>(null);
  const mounted = useRef(true);
  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
    };
  }, []);

  let node: ReactNode | null | undefined = key === null ? null : cache.get(key);
  const answer = arrived.current;
  if (key !== null && node === undefined) {
    const tree = answer?.key === key ? answer.tree : undefined;
    if (tree === null) node = null;
    else if (tree) {
      if (hasBudget()) node = elements(convert, () => tree);
    } else if (make && hasBudget()) node = elements(convert, make);
    if (node !== undefined) cache.set(key, node);
  }
  // The worker answered for an earlier text of this piece (it grew meanwhile):
  // shown until the newest is ready.
  if (node === undefined && answer?.tree && answer.key !== key && hasBudget()) {
    const tree = answer.tree;
    const stale = cache.get(answer.key) ?? elements(convert, () => tree);
    cache.set(answer.key, stale);
    if (stale) last.current = { key: answer.key, node: stale };
    arrived.current = null;
  }
  if (node !== undefined && answer?.key === key) arrived.current = null;
  if (node && key !== null) last.current = { key, node };

  const pending = key !== null && node === undefined;
  // Made here, or already answered: only the budget was missing.
  const waiting = pending && (make !== null || arrived.current?.key === key);
  useEffect(() => {
    if (!pending || key === null) return;
    if (waiting) return nextSlice(() => setTick((n) => n + 1));
    const ctrl = new AbortController();
    void offload(job(), ctrl.signal).then((tree) => {
      if (tree === undefined || !mounted.current) return;
      arrived.current = { key, tree };
      setTick((n) => n + 1);
    });
    return () => ctrl.abort();
    // `job` and `make` follow `key`; `tick` retries for budget.
  }, [pending, waiting, key, tick]);

  return { node, last: last.current?.node ?? null, lastKey: last.current?.key ?? null };
}
