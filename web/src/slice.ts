// The main thread's budget for formatting answers. Parsing markdown and turning
// a parsed or highlighted tree into elements is charged to the task that does
// it; once a task has spent `SLICE_MS`, whatever else wants formatting waits for
// a later task (shown as it was, or as plain text, meanwhile). However an
// answer is shaped, and however much of it arrives or is shown at once, no task
// of the page formats for long: the page keeps answering input while an answer
// streams, and a reload or "Show more" never freezes it.

/** Milliseconds of formatting one task may do. */
export const SLICE_MS = 30;

/**
 * What React and the browser then spend on each node of a tree made into
 * elements (fibers, DOM nodes, style and layout), charged when it is made: about
 * 10 µs a node (a highlighted block of 20,000 characters is 5,400 nodes).
 */
export const NODE_MS = 0.01;

let spent = 0;
let resetting = false;

/** Whether the current task may still format something. */
export function hasBudget(): boolean {
  return spent < SLICE_MS;
}

/** Charges `ms` to the current task. */
export function charge(ms: number): void {
  spent += ms;
  if (!resetting) {
    resetting = true;
    // Runs in a task of its own, after this one: the next task has the whole budget.
    window.setTimeout(() => {
      spent = 0;
      resetting = false;
    }, 0);
  }
}

/** Runs `work`, charging its time to the current task. */
export function charged<T>(work: () => T): T {
  const start = performance.now();
  try {
    return work();
  } finally {
    charge(performance.now() - start);
  }
}

/** How many nodes `tree` has (iterative: trees can be deep). */
export function size(tree: { children?: unknown[] }): number {
  let n = 0;
  const stack: { children?: unknown[] }[] = [tree];
  while (stack.length) {
    const node = stack.pop()!;
    n += 1;
    if (Array.isArray(node.children)) for (const c of node.children) stack.push(c as { children?: unknown[] });
  }
  return n;
}

/** Calls `fn` in a later task, which starts with a fresh budget. */
export function nextSlice(fn: () => void): () => void {
  const t = window.setTimeout(fn, 0);
  return () => window.clearTimeout(t);
}

/** A map that forgets its least recently used entries beyond `max`. */
export class Lru<V> {
  private readonly map = new Map<string, V>();

  constructor(private readonly max: number) {}

  get(key: string): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  set(key: string, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.max) {
      const oldest = this.map.keys().next();
      if (oldest.done) break;
      this.map.delete(oldest.value);
    }
  }
}
