import { useEffect, useState } from 'react';
import { api } from './api';

/** What a request may attach (`GET /api/limits` → `attachments`). */
export type Limits = {
  /** Largest file, in bytes. */
  maxFileBytes: number;
  /** Largest sum of the files of one request (the whole conversation's), in bytes. */
  maxRequestFileBytes: number;
  /** The image types the server accepts. */
  imageTypes: string[];
};

/** The server's defaults, used until (or when) `/api/limits` answers. */
export const DEFAULT_LIMITS: Limits = {
  maxFileBytes: 4 * 1024 * 1024,
  maxRequestFileBytes: 5 * 1024 * 1024,
  imageTypes: ['image/png', 'image/jpeg', 'image/webp', 'image/gif'],
};

const positive = (v: unknown, fallback: number) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : fallback);

function parse(body: unknown): Limits {
  const a = ((body ?? {}) as { attachments?: Record<string, unknown> }).attachments ?? {};
  const types = Array.isArray(a.imageTypes) ? a.imageTypes.filter((t): t is string => typeof t === 'string') : null;
  return {
    maxFileBytes: positive(a.maxFileBytes, DEFAULT_LIMITS.maxFileBytes),
    maxRequestFileBytes: positive(a.maxRequestFileBytes, DEFAULT_LIMITS.maxRequestFileBytes),
    imageTypes: types && types.length ? types : DEFAULT_LIMITS.imageTypes,
  };
}

/** `GET /api/limits`, with the defaults until it answers (or if it fails). */
export function useLimits(epoch: number): Limits {
  const [limits, setLimits] = useState<Limits>(DEFAULT_LIMITS);
  useEffect(() => {
    const ctrl = new AbortController();
    api<unknown>('/api/limits', { signal: ctrl.signal })
      .then((body) => setLimits(parse(body)))
      .catch(() => {
        // the defaults stand; the server still checks every request
      });
    return () => ctrl.abort();
  }, [epoch]);
  return limits;
}
