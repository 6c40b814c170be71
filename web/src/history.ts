import { isToolUIPart } from 'ai';
import type { AppMessage } from './types';

/**
 * The messages as sent to the server. The server takes approval decisions
 * (`approval-responded`) only in the last message; one left in an earlier message
 * (its continuation failed, was stopped or was cut off by a reload) would make
 * every later request fail. Such a call is sent as what it is now: denied, or (if
 * approved) without a result. The chat on screen is left as it is.
 */
export function forServer(messages: AppMessage[]): AppMessage[] {
  const last = messages.length - 1;
  let changed = false;
  const out = messages.map((m, i) => {
    if (i === last || m.role !== 'assistant') return m;
    if (!m.parts.some((p) => isToolUIPart(p) && p.state === 'approval-responded')) return m;
    changed = true;
    return {
      ...m,
      parts: m.parts.map((p) => {
        if (!isToolUIPart(p) || p.state !== 'approval-responded') return p;
        const { approval, ...rest } = p;
        return approval.approved
          ? {
              ...rest,
              state: 'output-error' as const,
              errorText: 'The call was approved, but its result never arrived (the request was interrupted).',
              approval: { ...approval, approved: true as const },
            }
          : { ...rest, state: 'output-denied' as const, approval: { ...approval, approved: false as const } };
      }),
    } as AppMessage;
  });
  return changed ? out : messages;
}
