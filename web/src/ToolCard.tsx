import { useEffect, useLayoutEffect, useRef, useState } from 'react';
import type { DynamicToolUIPart, ToolUIPart } from 'ai';
import { getToolName } from 'ai';
import type { CardState, Timing, ToolInfo } from './types';
import { DECISION_LABEL, EFFECT_HINT, EFFECT_LABEL, formatDuration, pretty, splitToolId } from './format';
import { printable } from './printable';

export type ToolPart = ToolUIPart | DynamicToolUIPart;

/** Results longer than this (characters or lines) start collapsed. */
const LONG_CHARS = 600;
const LONG_LINES = 12;
/** Arguments longer than this (characters or lines) are collapsed, except on an approval card. */
const ARGS_CHARS = 1000;
const ARGS_LINES = 12;

/**
 * The card state of a tool part. `active`: its message is still streaming or about
 * to be continued (a call without a result is then running; otherwise it was
 * interrupted: stopped, failed or cut off by a reload).
 */
export function cardState(part: ToolPart, active: boolean): { state: CardState; interrupted: boolean } {
  switch (part.state) {
    case 'input-streaming':
      return active ? { state: 'input-streaming', interrupted: false } : { state: 'error', interrupted: true };
    case 'input-available':
      return active ? { state: 'running', interrupted: false } : { state: 'error', interrupted: true };
    case 'approval-requested':
      return { state: 'awaiting-approval', interrupted: false };
    case 'approval-responded':
      // Approved: runs once the continuation request is sent (right after the click).
      if (!part.approval.approved) return { state: 'denied', interrupted: false };
      return active ? { state: 'running', interrupted: false } : { state: 'error', interrupted: true };
    case 'output-available':
      return { state: 'done', interrupted: false };
    case 'output-error':
      return { state: 'error', interrupted: false };
    case 'output-denied':
      return { state: 'denied', interrupted: false };
  }
}

const STATE_LABEL: Record<CardState, string> = {
  'input-streaming': 'preparing',
  running: 'running',
  done: 'done',
  error: 'error',
  denied: 'denied',
  'awaiting-approval': 'needs approval',
};

function useNow(ticking: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!ticking) return;
    setNow(Date.now());
    const t = window.setInterval(() => setNow(Date.now()), 250);
    return () => window.clearInterval(t);
  }, [ticking]);
  return now;
}

/**
 * A result as readable blocks: multi-line string fields of an object result
 * (file contents, stdout, ...) are shown as text under their key, the other fields
 * as pretty JSON; a string result as text.
 */
function resultBlocks(output: unknown): { label: string; text: string }[] {
  if (typeof output === 'string') return [{ label: '', text: output }];
  if (typeof output !== 'object' || output === null || Array.isArray(output))
    return [{ label: '', text: pretty(output) }];
  const rest: Record<string, unknown> = {};
  const texts: { label: string; text: string }[] = [];
  for (const [k, v] of Object.entries(output)) {
    if (typeof v === 'string' && v.includes('\n')) texts.push({ label: k, text: v });
    else rest[k] = v;
  }
  const head = Object.keys(rest).length > 0 || texts.length === 0 ? [{ label: '', text: pretty(rest) }] : [];
  return [...head, ...texts];
}

function Result({ output, errorText }: { output?: unknown; errorText?: string }) {
  const error = errorText !== undefined;
  const blocks = (error ? [{ label: '', text: errorText }] : resultBlocks(output)).map((b) => ({
    label: printable(b.label),
    text: printable(b.text),
  }));
  const chars = blocks.reduce((n, b) => n + b.text.length, 0);
  const lines = blocks.reduce((n, b) => n + b.text.split('\n').length, 0);
  const long = chars > LONG_CHARS || lines > LONG_LINES;
  const cls = error ? 'tool-output tool-output-error' : 'tool-output';
  const body = (
    <div className="tool-result" data-testid="tool-result">
      {blocks.map((b, i) => (
        <div key={i}>
          {b.label && <div className="tool-field">{b.label}</div>}
          <pre className={cls} tabIndex={long ? 0 : undefined}>
            {b.text || '(empty)'}
          </pre>
        </div>
      ))}
    </div>
  );
  const label = error ? 'Error' : 'Result';
  if (!long) {
    return (
      <div className="tool-section">
        <div className="tool-section-label">{label}</div>
        {body}
      </div>
    );
  }
  return (
    <details className="tool-section tool-long">
      <summary>
        <span className="tool-section-label">{label}</span>{' '}
        <span className="muted">
          {lines.toLocaleString()} lines, {chars.toLocaleString()} characters — show
        </span>
      </summary>
      {body}
    </details>
  );
}

/**
 * A call's arguments. Long ones are collapsed (the latest lines in view while
 * they stream) behind a Show all toggle; `full` (an approval card) shows every
 * character, never cut or scrolled.
 */
function Arguments({ id, text, streaming, full }: { id: string; text: string; streaming: boolean; full: boolean }) {
  const [expanded, setExpanded] = useState(false);
  const ref = useRef<HTMLPreElement>(null);
  const lines = text.split('\n').length;
  const long = !full && (text.length > ARGS_CHARS || lines > ARGS_LINES);
  const collapsed = long && !expanded;
  useLayoutEffect(() => {
    const el = ref.current;
    if (el && collapsed && streaming) el.scrollTop = el.scrollHeight;
  }, [collapsed, streaming, text]);
  return (
    <div className="tool-section">
      <div className="tool-section-label">Arguments</div>
      <pre
        ref={ref}
        id={id}
        className={`tool-args${collapsed ? ' tool-args-collapsed' : ''}`}
        data-testid="tool-args"
        data-collapsed={collapsed ? 'true' : undefined}
      >
        {text}
      </pre>
      {long && (
        <button
          type="button"
          className="btn btn-small btn-ghost tool-args-toggle"
          data-testid="tool-args-toggle"
          aria-expanded={expanded}
          aria-controls={id}
          onClick={() => setExpanded((x) => !x)}
        >
          {expanded
            ? 'Show less'
            : `Show all (${lines.toLocaleString()} ${lines === 1 ? 'line' : 'lines'}, ${text.length.toLocaleString()} characters)`}
        </button>
      )}
    </div>
  );
}

/** One tool call: its tool, effect, state, duration, arguments, result, and Approve / Deny when asked. */
export function ToolCard({
  part,
  active,
  info,
  timing,
  onDecide,
}: {
  part: ToolPart;
  active: boolean;
  info: ToolInfo | undefined;
  timing: Timing | undefined;
  onDecide: (approvalId: string, approved: boolean) => void;
}) {
  const toolId = getToolName(part);
  const { ns, name } = splitToolId(toolId);
  const { state, interrupted } = cardState(part, active);
  const ticking = state === 'running' || state === 'input-streaming' || state === 'awaiting-approval';
  const now = useNow(ticking && timing?.end == null);
  const elapsed = timing && !timing.unknown ? (timing.end ?? now) - timing.start : undefined;
  const raw = part.input === undefined ? '' : pretty(part.input);
  // Shown as the CLI shows them: hidden and direction-changing characters escaped.
  const args = printable(raw);
  const hidden = args !== raw;
  const headingId = `tool-${part.toolCallId}-title`;
  const [busy, setBusy] = useState(false);

  return (
    <section
      className={`tool-card state-${state}`}
      data-testid="tool-card"
      data-state={state}
      data-tool={toolId}
      data-tool-call-id={part.toolCallId}
      data-interrupted={interrupted ? 'true' : undefined}
      aria-labelledby={headingId}
    >
      <header className="tool-head">
        <span className={`tool-dot state-${state}`} aria-hidden="true" />
        <h3 className="tool-title" id={headingId}>
          <span className="tool-ns">{ns}</span>
          <span className="tool-name">{name}</span>
          <span className="sr-only"> tool call, {interrupted ? 'stopped' : STATE_LABEL[state]}</span>
        </h3>
        {info && (
          <span className={`badge effect-${info.effect}`} title={EFFECT_HINT[info.effect]}>
            {EFFECT_LABEL[info.effect]}
          </span>
        )}
        <span className={`tool-state state-${state}`} aria-hidden="true">
          {(state === 'running' || state === 'input-streaming') && <span className="spinner" />}
          {interrupted ? 'stopped' : STATE_LABEL[state]}
        </span>
        <span className="tool-duration" title="Measured in this browser from the call's first appearance to its result">
          {elapsed !== undefined ? formatDuration(elapsed) : ''}
        </span>
      </header>

      <Arguments
        id={`tool-${part.toolCallId}-args`}
        text={args || (state === 'input-streaming' ? '…' : '{}')}
        streaming={state === 'input-streaming'}
        full={part.state === 'approval-requested'}
      />

      {part.state === 'approval-requested' && hidden && (
        <p className="tool-warning" role="note" data-testid="hidden-warning">
          These arguments contain invisible or direction-changing characters, shown above as <code>\u{'{…}'}</code>.
          They can make text look different from what runs: read the arguments with care before approving.
        </p>
      )}
      {part.state === 'approval-requested' && (
        <div className="tool-approval" role="group" aria-label={`Approve or deny ${toolId}`}>
          <p>
            The agent wants to run <code>{toolId}</code>
            {info ? ` (${DECISION_LABEL[info.decision]})` : ''}. Allow it?
          </p>
          <p className="effect-words" data-testid="effect-words">
            {info ? EFFECT_HINT[info.effect] : 'Effect unknown: the server did not list this tool'}
          </p>
          <div className="tool-approval-buttons">
            <button
              type="button"
              className="btn btn-primary"
              data-testid="approve"
              disabled={busy}
              onClick={() => {
                setBusy(true);
                onDecide(part.approval.id, true);
              }}
            >
              Approve
            </button>
            <button
              type="button"
              className="btn btn-danger"
              data-testid="deny"
              disabled={busy}
              onClick={() => {
                setBusy(true);
                onDecide(part.approval.id, false);
              }}
            >
              Deny
            </button>
          </div>
        </div>
      )}

      {part.state === 'output-available' && <Result output={part.output} />}
      {part.state === 'output-error' && <Result errorText={part.errorText} />}
      {state === 'denied' && (
        <p className="tool-note" data-testid="tool-result">
          Denied{part.approval?.reason ? `: ${printable(part.approval.reason)}` : ''} — the call did not run.
        </p>
      )}
      {state === 'running' && (
        <p className="tool-note muted" aria-hidden="true">
          {part.state === 'approval-responded' ? 'Approved — running…' : 'Running…'}
        </p>
      )}
      {interrupted && (
        <p className="tool-note" data-testid="tool-result">
          Stopped before a result arrived.
        </p>
      )}
    </section>
  );
}
