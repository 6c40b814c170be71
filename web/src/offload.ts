// The formatting worker: markdown blocks too long to parse on the main thread
// within its budget (slice.ts) are parsed, and code is highlighted, in a Web
// Worker with the formatter (assets/highlight.js), so that no answer can stall
// the page however slow it is to format. The worker runs this page's own
// script (`/assets/app.js` as a module worker: allowed by the page's
// `script-src 'self'`, and no other file to serve); in it, only `serve` below
// runs (main.tsx renders nothing without a document). It answers one job at a
// time with a hast tree (plain data) that the page turns into elements. A job
// that runs longer than `JOB_MS` is abandoned: the worker is ended (a new one
// starts for the next job) and the block stays plain text, as does every
// longer version of it while it streams.
import type { Root } from 'hast';

export type Job = { kind: 'markdown'; text: string } | { kind: 'highlight'; code: string; lang: string };

type Request = { id: number; job: Job };
type Reply = { id: number; tree: Root | null } | { ready: true };

/** How long one job may run before the worker is ended. */
const JOB_MS = 2_000;
/** How long a new worker may take to load the script. */
const BOOT_MS = 15_000;
/** Texts whose jobs ran out of time (newest last): a text that extends one is not tried. */
const SLOW_KEPT = 16;

/** A job's outcome: its tree, null when it has none, undefined when it was given up before it ran. */
type Outcome = Root | null | undefined;

type Pending = { id: number; job: Job; resolve: (tree: Outcome) => void; signal: AbortSignal | undefined };

let worker: Worker | null = null;
let ready = false;
/** The worker could not run here (no module workers, or the script failed in it): nothing is offloaded. */
let broken = false;
let running: Pending | null = null;
let timer = 0;
let nextId = 1;
const queue: Pending[] = [];
const slow: string[] = [];

/** What a job works on, to recognise a longer version of a job that was too slow. */
function subject(job: Job): string {
  return job.kind === 'markdown' ? `m\n${job.text}` : `h${job.lang}\n${job.code}`;
}

function settle(p: Pending, tree: Outcome): void {
  p.resolve(tree);
}

function endWorker(): void {
  worker?.terminate();
  worker = null;
  ready = false;
}

function fail(): void {
  broken = true;
  window.clearTimeout(timer);
  endWorker();
  if (running) settle(running, null);
  running = null;
  for (const p of queue.splice(0)) settle(p, null);
}

function start(): Worker {
  // This very script, as a module worker (see the top of this file).
  const w = new Worker(import.meta.url, { type: 'module', name: 'formatting' });
  w.onmessage = (e: MessageEvent<Reply>) => {
    const data = e.data;
    if ('ready' in data) {
      ready = true;
      pump();
      return;
    }
    if (!running || data.id !== running.id) return;
    window.clearTimeout(timer);
    const done = running;
    running = null;
    settle(done, data.tree);
    pump();
  };
  w.onerror = () => fail();
  w.onmessageerror = () => fail();
  timer = window.setTimeout(() => {
    if (!ready) fail(); // the script never loaded in the worker
  }, BOOT_MS);
  return w;
}

/** Sends the next job that is still wanted, starting a worker when there is none. */
function pump(): void {
  if (broken || running) return;
  while (queue.length && queue[0]!.signal?.aborted) settle(queue.shift()!, undefined);
  if (!queue.length) return;
  try {
    worker ??= start();
  } catch {
    fail(); // no workers here (or not from this script)
    return;
  }
  if (!ready) return; // `ready` pumps again
  const p = queue.shift()!;
  running = p;
  window.clearTimeout(timer);
  timer = window.setTimeout(() => {
    // Too slow: end the worker (the job cannot be interrupted otherwise).
    slow.push(subject(p.job));
    if (slow.length > SLOW_KEPT) slow.shift();
    running = null;
    endWorker();
    settle(p, null);
    pump();
  }, JOB_MS);
  worker.postMessage({ id: p.id, job: p.job } satisfies Request);
}

/**
 * The hast tree of `job`, made in the worker; null when it cannot be had (no
 * grammar for the language, too slow, no worker here). Aborting `signal`
 * withdraws a job that has not started (undefined); one that runs still
 * answers (a streaming block shows it until its newer text is ready).
 */
export function offload(job: Job, signal?: AbortSignal): Promise<Outcome> {
  const s = subject(job);
  if (broken || slow.some((t) => s.startsWith(t))) return Promise.resolve(null);
  return new Promise((resolve) => {
    const p: Pending = { id: nextId++, job, resolve, signal };
    queue.push(p);
    // A job given up before it started leaves the queue at once.
    signal?.addEventListener('abort', () => {
      const i = queue.indexOf(p);
      if (i !== -1) {
        queue.splice(i, 1);
        settle(p, undefined);
      }
    });
    pump();
  });
}

// ---- in the worker ---------------------------------------------------------------

type Scope = {
  onmessage: ((e: MessageEvent<Request>) => void) | null;
  postMessage: (message: Reply) => void;
};

async function answer(job: Job): Promise<Root | null> {
  const formatter = await import('./highlight');
  return job.kind === 'markdown' ? formatter.toHast(job.text) : formatter.highlight(job.code, job.lang);
}

function serve(scope: Scope): void {
  scope.onmessage = (e) => {
    const { id, job } = e.data;
    answer(job).then(
      (tree) => scope.postMessage({ id, tree }),
      () => scope.postMessage({ id, tree: null }),
    );
  };
  scope.postMessage({ ready: true });
}

// Only in a worker: a document means the page itself.
if (typeof document === 'undefined' && 'WorkerGlobalScope' in globalThis) serve(globalThis as unknown as Scope);
