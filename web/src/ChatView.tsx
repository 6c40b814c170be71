import {
  useCallback,
  useEffect,
  useLayoutEffect,
  useMemo,
  useRef,
  useState,
  type FormEvent,
  type KeyboardEvent,
} from 'react';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport, isToolUIPart, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import type { AppMessage, Timings } from './types';
import type { LoadedChat } from './session';
import { dropLive, saveLive, saveNotes } from './session';
import { saveChat } from './storage';
import { describeError } from './format';
import { timedFetch, toolClock } from './toolClock';
import { forServer } from './history';
import { authHeaders } from './auth';
import { stopRun } from './api';
import { AssistantMessage, PendingMessage, UserMessage } from './Messages';
import { GraphPicker } from './GraphPicker';
import { usePage } from './page-context';
import { conversationFileBytes, prepareFiles, type PendingFile } from './attachments';
import { Composer } from './Composer';
import { LiveRegion } from './LiveRegion';
import { preloadFormatter } from './formatter';

const SUGGESTIONS = [
  'What files are in this workspace?',
  'Summarise the README for me.',
  'What can you do with the tools you have?',
];

const TERMINAL = new Set(['output-available', 'output-error', 'output-denied']);

/** The effective model of a conversation: the latest answer's (none before the first). */
export function latestModel(messages: AppMessage[]): string | null {
  for (let i = messages.length - 1; i >= 0; i--) {
    const model = messages[i]?.metadata?.model;
    if (model) return model;
  }
  return null;
}

/**
 * One conversation: the graph it runs, its messages (streamed through
 * `useChat`, reattached on load with `resume`), the composer with attachments,
 * and the live region. Keyed by chat: opening another chat mounts a new one.
 * What the whole page shares (mode, tools, graphs, limits, …) comes from `usePage`.
 */
export function ChatView({ chat }: { chat: LoadedChat }) {
  const { mode, toolsById, pickedGraph, limits, onActivity, onModel, onGraph } = usePage();
  // --- the graph: picked while the chat is new, then the chat's -------------------------
  const [sentGraph, setSentGraph] = useState<string | undefined>(undefined);
  const knownGraph = chat.graph ?? sentGraph;
  const graphRef = useRef<string | undefined>(undefined);

  // Until the server said whether an answer of this chat is still streaming
  // (`resume`), sending is held back: a 204 arriving after a send would end it.
  const [resuming, setResuming] = useState(!chat.fresh);
  const transport = useMemo(() => {
    const t = new DefaultChatTransport<AppMessage>({
      api: '/api/chat',
      fetch: timedFetch,
      headers: () => authHeaders(),
      // The default body, with stale approval decisions settled (see forServer),
      // and the graph that runs the chat.
      prepareSendMessagesRequest: ({ id, messages, trigger, messageId, body }) => ({
        body: {
          ...body,
          id,
          messages: forServer(messages),
          trigger,
          messageId,
          ...(graphRef.current ? { graph: graphRef.current } : {}),
        },
      }),
    });
    const reconnect = t.reconnectToStream.bind(t);
    let checking = 0;
    t.reconnectToStream = async (options) => {
      checking += 1;
      setResuming(true);
      try {
        return await reconnect(options);
      } finally {
        checking -= 1;
        if (checking === 0) setResuming(false);
      }
    };
    return t;
  }, []);
  useEffect(() => {
    const t = window.setTimeout(() => setResuming(false), 3000); // a server that does not answer holds nothing back
    return () => window.clearTimeout(t);
  }, []);
  const { messages, sendMessage, status, error, stop, addToolApprovalResponse, clearError, regenerate } =
    useChat<AppMessage>({
      id: chat.id,
      messages: chat.messages,
      transport,
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      throttle: 32,
      resume: !chat.fresh,
      onFinish: () => onActivity(),
    });
  const busy = status === 'submitted' || status === 'streaming';
  const isNew = messages.length === 0;
  const effectiveGraph = isNew ? pickedGraph : (knownGraph ?? pickedGraph);
  graphRef.current = effectiveGraph;
  useEffect(() => onGraph(isNew ? pickedGraph : knownGraph), [onGraph, isNew, pickedGraph, knownGraph]);

  // The list learns of a new chat as soon as its first answer streams.
  const streamedOnce = useRef(false);
  useEffect(() => {
    if (status === 'streaming' && !streamedOnce.current) {
      streamedOnce.current = true;
      onActivity();
    }
    if (!busy) streamedOnce.current = false;
  }, [status, busy, onActivity]);

  const model = latestModel(messages);
  useEffect(() => onModel(model), [model, onModel]);

  // An approval was answered and its continuation is about to be sent.
  const [awaitingSend, setAwaitingSend] = useState(false);
  useEffect(() => {
    if (busy || status === 'error') setAwaitingSend(false);
  }, [busy, status]);
  const [stoppedIds, setStoppedIds] = useState<ReadonlySet<string>>(() => new Set());

  // --- tool call timings: first seen → result, measured here ---------------------
  const [timings, setTimings] = useState<Timings>(() => {
    const t: Timings = { ...chat.timings };
    for (const m of chat.messages)
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

  // --- persistence -----------------------------------------------------------------------
  // Without a store: the whole chat in this browser. With one: notes the server
  // does not keep, and a copy of the conversation only while an answer streams.
  const latest = useRef({ messages, timings, busy, graph: effectiveGraph, mode });
  latest.current = { messages, timings, busy, graph: effectiveGraph, mode };
  const [storageFailed, setStorageFailed] = useState(false);
  const save = useCallback(() => {
    const { messages: m, timings: t, busy: streaming, graph, mode: kept } = latest.current;
    if (kept === 'local') {
      setStorageFailed(!saveChat(chat.id, m, t, m.length ? graph : undefined));
      return;
    }
    if (streaming) saveLive(chat.id, m);
    else dropLive(chat.id);
    if (m.length) saveNotes(chat.id, m, t);
  }, [chat.id]);
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
  // A prompt is being written: its answer will be markdown, so the formatter loads now.
  const typing = input !== '';
  useEffect(() => {
    if (typing) preloadFormatter();
  }, [typing]);
  const focusInput = useCallback(() => inputRef.current?.focus({ preventScroll: true }), []);
  useEffect(() => {
    if (!resuming) focusInput();
  }, [focusInput, resuming]);
  useLayoutEffect(() => {
    const el = inputRef.current;
    if (!el) return;
    el.style.height = 'auto';
    el.style.height = `${Math.min(el.scrollHeight, 200)}px`;
  }, [input]);

  // --- attachments -----------------------------------------------------------------------
  const [pending, setPending] = useState<PendingFile[]>([]);
  const [attachErrors, setAttachErrors] = useState<string[]>([]);
  const pendingRef = useRef(pending);
  pendingRef.current = pending;
  const addFiles = useCallback(
    async (files: File[]) => {
      const used =
        conversationFileBytes(latest.current.messages) + pendingRef.current.reduce((n, f) => n + f.size, 0);
      const { added, errors } = await prepareFiles(files, limits, used);
      setAttachErrors(errors);
      if (added.length) setPending((p) => [...p, ...added]);
    },
    [limits],
  );
  const onFiles = useCallback((files: File[]) => void addFiles(files), [addFiles]);

  const send = useCallback(
    (text: string) => {
      const trimmed = text.trim();
      const files = pendingRef.current.map((f) => f.part);
      if ((!trimmed && files.length === 0) || busy || resuming) return;
      if (error) clearError();
      stick.current = true;
      setShowJump(false);
      setInput('');
      setPending([]);
      setAttachErrors([]);
      if (latest.current.messages.length === 0) setSentGraph(graphRef.current);
      void sendMessage(trimmed ? { text: trimmed, files } : { files });
      focusInput();
    },
    [busy, resuming, error, clearError, sendMessage, focusInput],
  );
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    send(input);
  };

  const onStop = useCallback(async () => {
    const last = messages[messages.length - 1];
    if (last?.role === 'assistant') setStoppedIds((s) => new Set(s).add(last.id));
    setAwaitingSend(false);
    // The request first (so the run's cancellation never reaches this page as
    // an error), then the server: a run outlives its request for a reload, so
    // the abort alone would leave it running until its grace ends.
    await stop();
    await stopRun(chat.id);
    focusInput();
  }, [messages, stop, focusInput, chat.id]);

  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      send(input);
    } else if (e.key === 'Escape' && busy) {
      e.preventDefault();
      void onStop();
    }
  };

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

  return (
    <>
      <GraphPicker locked={isNew ? null : knownGraph} />
      <div
        className="messages"
        ref={scrollRef}
        onScroll={onScroll}
        aria-busy={busy}
        tabIndex={0}
        role="region"
        aria-label="Messages"
      >
        <div className="messages-inner">
          {isNew && (
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
            if (m.role === 'user') return <UserMessage key={m.id} message={m} />;
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
          {busy && last?.role !== 'assistant' && <PendingMessage />}
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

      <Composer
        inputRef={inputRef}
        input={input}
        setInput={setInput}
        onSubmit={onSubmit}
        onKeyDown={onKeyDown}
        busy={busy}
        holding={resuming}
        pendingApproval={pendingApproval}
        storageFailed={storageFailed}
        files={pending}
        onRemoveFile={(key) => setPending((p) => p.filter((f) => f.key !== key))}
        attachErrors={attachErrors}
        onDismissErrors={() => setAttachErrors([])}
        onFiles={onFiles}
        onStop={() => void onStop()}
      />
      <LiveRegion
        messages={messages}
        busy={busy}
        waitingForApproval={pendingApproval}
        stopped={last?.role === 'assistant' && stoppedIds.has(last.id)}
      />
    </>
  );
}
