import { memo, useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState, type FormEvent, type KeyboardEvent } from 'react';
import { useChat } from '@ai-sdk/react';
import {
  DefaultChatTransport,
  getToolName,
  isReasoningUIPart,
  isTextUIPart,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from 'ai';
import type { AppMessage, Timings, ToolInfo } from './types';
import { clearChat, loadCurrent, saveChat, type Saved } from './storage';
import { describeError, formatUsage } from './format';
import { Markdown } from './Markdown';
import { ToolCard, type ToolPart } from './ToolCard';
import { ToolsPanel, type ToolsState } from './ToolsPanel';
import { useTools } from './useTools';
import { timedFetch, toolClock } from './toolClock';
import { forServer } from './history';
import { authHeaders, setToken, token } from './auth';
import { LongText } from './LongText';

const WIDE = '(min-width: 960px)';

export function App() {
  const [session, setSession] = useState<Saved>(loadCurrent);
  const [panelOpen, setPanelOpen] = useState(() => window.matchMedia(WIDE).matches);
  useEffect(() => {
    // Crossing the breakpoint: open beside the chat when wide, closed (a sheet) when narrow.
    const mq = window.matchMedia(WIDE);
    const onChange = () => setPanelOpen(mq.matches);
    mq.addEventListener('change', onChange);
    return () => mq.removeEventListener('change', onChange);
  }, []);
  const tools = useTools();
  const [hasToken, setHasToken] = useState(() => token() !== null);
  const onNewChat = useCallback((id: string) => setSession({ id, messages: [], timings: {} }), []);
  const onToken = useCallback(
    (value: string) => {
      setToken(value);
      setHasToken(token() !== null);
      tools.retry();
    },
    [tools],
  );
  if (!hasToken || tools.state.status === 'unauthorized') {
    return <AccessGate refused={hasToken} onToken={onToken} />;
  }
  return (
    <ChatView
      key={session.id}
      session={session}
      toolsState={tools.state}
      toolsById={tools.byId}
      retryTools={tools.retry}
      panelOpen={panelOpen}
      setPanelOpen={setPanelOpen}
      onNewChat={onNewChat}
    />
  );
}

/**
 * Shown instead of the chat while the page has no token the server accepts: where
 * the token comes from, and a field to paste it.
 */
function AccessGate({ refused, onToken }: { refused: boolean; onToken: (value: string) => void }) {
  const [value, setValue] = useState('');
  return (
    <div className="app">
      <main className="access-gate" data-testid="access-gate" aria-labelledby="access-title">
        <h1 id="access-title">This page needs the server's token</h1>
        <p>
          {refused
            ? 'The server did not accept the token this page has (it may have restarted: each run of `agent serve` has its own).'
            : 'Every request to `agent serve` carries a secret it printed when it started, so that no other program or account on this machine can use it.'}{' '}
          Open the address it printed (<code>http://127.0.0.1:8787/#token=…</code>), or paste the token here.
        </p>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            if (value.trim()) onToken(value);
          }}
        >
          <label htmlFor="token">Token</label>
          <input
            id="token"
            data-testid="token-input"
            type="password"
            autoComplete="off"
            spellCheck={false}
            value={value}
            onChange={(e) => setValue(e.target.value)}
          />
          <button type="submit" className="btn btn-primary" data-testid="token-submit">
            Use token
          </button>
        </form>
      </main>
    </div>
  );
}

const SUGGESTIONS = [
  'What files are in this workspace?',
  'Summarise the README for me.',
  'What can you do with the tools you have?',
];

const TERMINAL = new Set(['output-available', 'output-error', 'output-denied']);

const MarkdownMemo = memo(Markdown);
const renderMarkdown = (text: string) => <MarkdownMemo text={text} />;

function ChatView({
  session,
  toolsState,
  toolsById,
  retryTools,
  panelOpen,
  setPanelOpen,
  onNewChat,
}: {
  session: Saved;
  toolsState: ToolsState;
  toolsById: Map<string, ToolInfo>;
  retryTools: () => void;
  panelOpen: boolean;
  setPanelOpen: (open: boolean | ((open: boolean) => boolean)) => void;
  onNewChat: (id: string) => void;
}) {
  const transport = useMemo(
    () =>
      new DefaultChatTransport<AppMessage>({
        api: '/api/chat',
        fetch: timedFetch,
        headers: () => authHeaders(),
        // The default body, with stale approval decisions settled (see forServer).
        prepareSendMessagesRequest: ({ id, messages, trigger, messageId, body }) => ({
          body: { ...body, id, messages: forServer(messages), trigger, messageId },
        }),
      }),
    [],
  );
  const { messages, sendMessage, status, error, stop, addToolApprovalResponse, clearError, regenerate } =
    useChat<AppMessage>({
      id: session.id,
      messages: session.messages,
      transport,
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      throttle: 32,
    });
  const busy = status === 'submitted' || status === 'streaming';

  // An approval was answered and its continuation is about to be sent.
  const [awaitingSend, setAwaitingSend] = useState(false);
  useEffect(() => {
    if (busy || status === 'error') setAwaitingSend(false);
  }, [busy, status]);
  const [stoppedIds, setStoppedIds] = useState<ReadonlySet<string>>(() => new Set());

  // --- tool call timings: first seen → result, measured here ---------------------
  const [timings, setTimings] = useState<Timings>(() => {
    const t: Timings = { ...session.timings };
    for (const m of session.messages)
      for (const p of m.parts)
        if (isToolUIPart(p) && !t[p.toolCallId]) t[p.toolCallId] = { start: 0, unknown: true };
    return t;
  });
  useEffect(() => {
    const now = Date.now();
    let next: Timings | null = null;
    for (const m of messages) {
      for (const p of m.parts) {
        if (!isToolUIPart(p)) continue;
        const t = (next ?? timings)[p.toolCallId];
        const done = TERMINAL.has(p.state);
        const clock = toolClock.get(p.toolCallId); // times from the stream, when it had them
        if (!t) {
          next ??= { ...timings };
          const start = clock?.start ?? now;
          next[p.toolCallId] = done ? { start, end: clock?.end ?? now } : { start };
        } else if (done && t.end == null && !t.unknown) {
          next ??= { ...timings };
          next[p.toolCallId] = { ...t, end: clock?.end ?? now };
        }
      }
    }
    if (next) setTimings(next);
  }, [messages, timings]);

  // --- persistence (localStorage, keyed by chat id) --------------------------------
  const latest = useRef({ messages, timings });
  latest.current = { messages, timings };
  const [storageFailed, setStorageFailed] = useState(false);
  const save = useCallback(() => {
    const ok = saveChat(session.id, latest.current.messages, latest.current.timings);
    setStorageFailed(!ok);
  }, [session.id]);
  useEffect(() => {
    if (!busy) {
      save();
      return;
    }
    const t = window.setTimeout(save, 500); // while streaming: at most every half second
    return () => window.clearTimeout(t);
  }, [messages, timings, busy, save]);
  useEffect(() => {
    window.addEventListener('pagehide', save);
    return () => window.removeEventListener('pagehide', save);
  }, [save]);

  // --- scrolling: stick to the bottom only while the reader is there ----------------
  const scrollRef = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const [showJump, setShowJump] = useState(false);
  const onScroll = useCallback(() => {
    const el = scrollRef.current;
    if (!el) return;
    const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 48;
    stick.current = atBottom;
    setShowJump(!atBottom);
  }, []);
  useLayoutEffect(() => {
    const el = scrollRef.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [messages, status, error]);
  useEffect(() => {
    // The viewport changed size (rotation, window resize, the composer grew): stay pinned.
    const el = scrollRef.current;
    if (!el || typeof ResizeObserver === 'undefined') return;
    const ro = new ResizeObserver(() => {
      if (stick.current) el.scrollTop = el.scrollHeight;
    });
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  const jump = useCallback(() => {
    const el = scrollRef.current;
    if (!el) return;
    stick.current = true;
    setShowJump(false);
    el.scrollTo({ top: el.scrollHeight, behavior: 'smooth' });
  }, []);

  // --- composer ----------------------------------------------------------------------
  const inputRef = useRef<HTMLTextAreaElement>(null);
  const [input, setInput] = useState('');
  const focusInput = useCallback(() => inputRef.current?.focus({ preventScroll: true }), []);
  useEffect(() => {
    focusInput();
  }, [focusInput]);
  useLayoutEffect(() => {
    const el = inputRef.current;
    if (!el) return;
    el.style.height = 'auto';
    el.style.height = `${Math.min(el.scrollHeight, 200)}px`;
  }, [input]);

  const send = useCallback(
    (text: string) => {
      const trimmed = text.trim();
      if (!trimmed || busy) return;
      if (error) clearError();
      stick.current = true;
      setShowJump(false);
      setInput('');
      void sendMessage({ text: trimmed });
      focusInput();
    },
    [busy, error, clearError, sendMessage, focusInput],
  );
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    send(input);
  };
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      send(input);
    }
  };

  const onStop = useCallback(async () => {
    const last = messages[messages.length - 1];
    if (last?.role === 'assistant') setStoppedIds((s) => new Set(s).add(last.id));
    setAwaitingSend(false);
    await stop();
    focusInput();
  }, [messages, stop, focusInput]);

  const onClear = useCallback(async () => {
    await stop();
    onNewChat(clearChat(session.id));
  }, [stop, onNewChat, session.id]);

  const onDecide = useCallback(
    (approvalId: string, approved: boolean) => {
      setAwaitingSend(true);
      void addToolApprovalResponse({ id: approvalId, approved });
      focusInput();
    },
    [addToolApprovalResponse, focusInput],
  );

  // --- derived --------------------------------------------------------------------------
  const last = messages[messages.length - 1];
  const pendingApproval =
    !busy &&
    last?.role === 'assistant' &&
    last.parts.some((p) => isToolUIPart(p) && p.state === 'approval-requested');
  const model = [...messages].reverse().find((m) => m.metadata?.model)?.metadata?.model;
  const statusText = busy
    ? status === 'submitted'
      ? 'Sending to the agent…'
      : 'The agent is responding…'
    : pendingApproval
      ? 'A tool call is waiting for your approval.'
      : error
        ? ''
        : last?.role === 'assistant'
          ? 'Answer complete.'
          : '';
  const toolCount = toolsState.status === 'ready' ? toolsState.tools.length : undefined;

  return (
    <div className={`app${panelOpen ? ' panel-open' : ''}`}>
      <header className="topbar">
        <div className="brand">
          <span className="logo" aria-hidden="true" />
          <h1>agent</h1>
          {model && (
            <span className="model" title="Model of the latest answer">
              {model}
            </span>
          )}
        </div>
        <div className="topbar-actions">
          <button
            type="button"
            className="btn btn-ghost"
            aria-expanded={panelOpen}
            aria-controls="tools-panel"
            onClick={() => setPanelOpen((o) => !o)}
          >
            Tools{toolCount !== undefined ? ` (${toolCount})` : ''}
          </button>
          <button
            type="button"
            className="btn btn-ghost"
            data-testid="clear"
            onClick={() => void onClear()}
            disabled={messages.length === 0 && !busy}
            aria-label="New chat (clears this conversation)"
          >
            New chat
          </button>
        </div>
      </header>

      <div className="layout">
        <main className="chat" aria-label="Conversation">
          <div className="messages" ref={scrollRef} onScroll={onScroll} aria-busy={busy}>
            <div className="messages-inner">
              {messages.length === 0 && (
                <div className="empty">
                  <h2>What should the agent do?</h2>
                  <p>
                    It answers in text and may call the tools listed under <strong>Tools</strong>. Calls that change
                    something ask for your approval first; you can stop a response at any time.
                  </p>
                  <ul className="suggestions" aria-label="Suggestions">
                    {SUGGESTIONS.map((s) => (
                      <li key={s}>
                        <button
                          type="button"
                          className="btn btn-suggestion"
                          onClick={() => {
                            setInput(s);
                            focusInput();
                          }}
                        >
                          {s}
                        </button>
                      </li>
                    ))}
                  </ul>
                </div>
              )}
              {messages.map((m, i) => {
                const isLast = i === messages.length - 1;
                if (m.role === 'user') {
                  return (
                    <article key={m.id} className="msg msg-user" data-testid="message-user" aria-label="You">
                      <div className="bubble">
                        {m.parts.filter(isTextUIPart).map((p, j) => (
                          <LongText key={j} text={p.text} render={(t) => <p>{t}</p>} />
                        ))}
                      </div>
                    </article>
                  );
                }
                if (m.role !== 'assistant') return null;
                const live = isLast && (busy || awaitingSend);
                return (
                  <AssistantMessage
                    key={m.id}
                    message={m}
                    live={live}
                    streaming={isLast && busy}
                    stopped={stoppedIds.has(m.id) && !live}
                    failed={isLast && status === 'error'}
                    toolsById={toolsById}
                    timings={timings}
                    onDecide={onDecide}
                  />
                );
              })}
              {busy && last?.role === 'user' && (
                <article className="msg msg-assistant msg-pending" data-testid="message-pending" aria-label="Agent">
                  <div className="msg-foot">
                    <span className="dots" aria-hidden="true">
                      <span />
                      <span />
                      <span />
                    </span>
                    <span className="muted">Waiting for the agent…</span>
                  </div>
                </article>
              )}
              {error && (
                <div className="error-banner" role="alert" data-testid="error-banner">
                  <div>
                    <strong>The request failed.</strong> <span className="error-text">{describeError(error)}</span>
                  </div>
                  <div className="error-actions">
                    <button
                      type="button"
                      className="btn btn-small"
                      onClick={() => {
                        void regenerate();
                        focusInput();
                      }}
                    >
                      Retry
                    </button>
                    <button type="button" className="btn btn-small btn-ghost" onClick={clearError}>
                      Dismiss
                    </button>
                  </div>
                </div>
              )}
            </div>
          </div>
          {showJump && (
            <button type="button" className="btn jump" onClick={jump}>
              ↓ Latest
            </button>
          )}

          <form className="composer" onSubmit={onSubmit} aria-label="Message the agent">
            <label htmlFor="prompt" className="sr-only">
              Message
            </label>
            <textarea
              id="prompt"
              ref={inputRef}
              data-testid="prompt"
              rows={1}
              value={input}
              onChange={(e) => setInput(e.target.value)}
              onKeyDown={onKeyDown}
              placeholder={pendingApproval ? 'Approve or deny the call above, or write a new message…' : 'Message the agent…'}
              aria-describedby="prompt-hint"
              enterKeyHint="send"
              autoComplete="off"
              spellCheck
            />
            <div className="composer-actions">
              {busy ? (
                <button type="button" className="btn btn-stop" data-testid="stop" onClick={() => void onStop()}>
                  <span className="stop-square" aria-hidden="true" />
                  Stop
                </button>
              ) : (
                <button type="submit" className="btn btn-primary" data-testid="send">
                  Send
                </button>
              )}
            </div>
            <p id="prompt-hint" className="hint">
              <kbd>Enter</kbd> to send · <kbd>Shift</kbd>+<kbd>Enter</kbd> for a new line
              {storageFailed && <span className="warn"> · this browser refused to save the conversation</span>}
            </p>
          </form>
          <p className="sr-only" role="status" aria-live="polite">
            {statusText}
          </p>
        </main>

        <ToolsPanel state={toolsState} open={panelOpen} onClose={() => setPanelOpen(false)} onRetry={retryTools} />
      </div>
    </div>
  );
}

function AssistantMessage({
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
                <LongText text={p.text} render={(t) => t} />
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
            <span className="dots" aria-hidden="true">
              <span />
              <span />
              <span />
            </span>
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
