import { memo } from 'react';
import { getToolName, isFileUIPart, isReasoningUIPart, isTextUIPart, isToolUIPart } from 'ai';
import type { AppMessage, Timings, ToolInfo } from './types';
import { formatUsage } from './format';
import { Markdown } from './Markdown';
import { ToolCard, type ToolPart } from './ToolCard';
import { LongText } from './LongText';
import { MessageFiles } from './Attachments';

const MarkdownMemo = memo(Markdown);
const renderMarkdown = (text: string) => <MarkdownMemo text={text} />;
const renderPlain = (text: string) => <p>{text}</p>;
const renderRaw = (text: string) => text;

/** A message of the user: its files (previews), then its text. */
export function UserMessage({ message }: { message: AppMessage }) {
  const files = message.parts.filter(isFileUIPart);
  const texts = message.parts.filter(isTextUIPart);
  return (
    <article className="msg msg-user" data-testid="message-user" aria-label="You">
      <div className="bubble">
        <MessageFiles parts={files} />
        {texts.map((p, j) => (
          <LongText key={j} text={p.text} render={renderPlain} />
        ))}
      </div>
    </article>
  );
}

function Dots() {
  return (
    <span className="dots" aria-hidden="true">
      <span />
      <span />
      <span />
    </span>
  );
}

/** The placeholder before the first chunk of an answer. */
export function PendingMessage() {
  return (
    <article className="msg msg-assistant msg-pending" data-testid="message-pending" aria-label="Agent">
      <div className="msg-foot">
        <Dots />
        <span className="muted">Waiting for the agent…</span>
      </div>
    </article>
  );
}

/** An answer: text (markdown), reasoning (collapsed), tool cards, and its usage line. */
export function AssistantMessage({
  message,
  live,
  streaming,
  stopped,
  failed,
  toolsById,
  timings,
  onDecide,
}: {
  message: AppMessage;
  live: boolean;
  streaming: boolean;
  stopped: boolean;
  failed: boolean;
  toolsById: Map<string, ToolInfo>;
  timings: Timings;
  onDecide: (approvalId: string, approved: boolean) => void;
}) {
  const usage = message.metadata?.usage;
  const parts = message.parts;
  const lastPart = parts[parts.length - 1];
  let activity = 'Thinking…';
  if (lastPart && isToolUIPart(lastPart)) activity = `Running ${getToolName(lastPart)}…`;
  else if (lastPart && isTextUIPart(lastPart)) activity = 'Writing…';
  const waiting = !live && parts.some((p) => isToolUIPart(p) && p.state === 'approval-requested');

  return (
    <article className="msg msg-assistant" data-testid="message-assistant" aria-label="Agent">
      {parts.map((p, j) => {
        if (isTextUIPart(p)) {
          return (
            <div key={j} className="md" data-testid="assistant-text">
              <LongText text={p.text} render={renderMarkdown} />
            </div>
          );
        }
        if (isReasoningUIPart(p)) {
          if (!p.text.trim()) return null;
          const thinking = streaming && p.state === 'streaming';
          return (
            <details key={j} className="reasoning">
              <summary>{thinking ? 'Reasoning…' : 'Reasoning'}</summary>
              <div className="reasoning-text">
                <LongText text={p.text} render={renderRaw} />
              </div>
            </details>
          );
        }
        if (isToolUIPart(p)) {
          const part = p as ToolPart;
          return (
            <ToolCard
              key={part.toolCallId}
              part={part}
              active={live}
              info={toolsById.get(getToolName(part))}
              timing={timings[part.toolCallId]}
              onDecide={onDecide}
            />
          );
        }
        return null;
      })}
      <div className="msg-foot">
        {live ? (
          <>
            <Dots />
            <span className="muted">{activity}</span>
          </>
        ) : (
          <>
            {stopped && <span className="tag">stopped</span>}
            {failed && !stopped && <span className="tag tag-error">failed</span>}
            {waiting && <span className="tag tag-wait">waiting for approval</span>}
            {usage && (
              <span className="usage" data-testid="usage" title="Tokens used by this answer (reported by the server)">
                {formatUsage(usage)}
                {message.metadata?.model ? ` · ${message.metadata.model}` : ''}
              </span>
            )}
          </>
        )}
      </div>
    </article>
  );
}
