import { useCallback, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { useTools } from './useTools';
import { ToolsPanel, type ToolsState } from './ToolsPanel';
import { chooseToken, isTokenChange, offeredToken, setToken, token } from './auth';
import { useChats } from './useChats';
import { useGraphs } from './useGraphs';
import { useLimits } from './useLimits';
import { Sidebar } from './Sidebar';
import { ChatView } from './ChatView';
import { ModelLabel } from './ModelLabel';
import { PageProvider, type Page } from './page-context';
import { forgetCurrentChat, forgetNotes, initialChatId, loadChat, newChatId, showChatId, type LoadedChat } from './session';
import { forgetLocalChat } from './storage';
import { errorText } from './api';
import type { ToolInfo } from './types';

/** From this width the tools panel sits beside the chat (below it is a sheet, see styles.css). */
const WIDE = '(min-width: 1200px)';

/** Whether `query` matches, following changes. */
function useMedia(query: string): [boolean, (v: boolean | ((v: boolean) => boolean)) => void] {
  const [open, setOpen] = useState(() => window.matchMedia(query).matches);
  useEffect(() => {
    // Crossing the breakpoint: open beside the chat when wide, closed (a sheet) when narrow.
    const mq = window.matchMedia(query);
    const onChange = () => setOpen(mq.matches);
    mq.addEventListener('change', onChange);
    return () => mq.removeEventListener('change', onChange);
  }, [query]);
  return [open, setOpen];
}

export function App() {
  // The address carried a token other than the stored one (auth.ts): the page
  // asks which to use before anything else of it runs, so that nothing is sent
  // with either token until the user has chosen.
  const [offer, setOffer] = useState(offeredToken);
  if (offer !== null) {
    return (
      <TokenChoice
        onChoose={(useLink) => {
          chooseToken(useLink);
          if (useLink) forgetCurrentChat(); // the open chat is the other account's
          setOffer(null);
        }}
      />
    );
  }
  return <Authorized />;
}

/** The page with the token it has: the chat, or the access gate while it has none the server accepts. */
function Authorized() {
  const tools = useTools();
  const retryTools = tools.retry;
  const [hasToken, setHasToken] = useState(() => token() !== null);
  // Bumped when the token changes: everything loaded with the old one loads again.
  const [epoch, setEpoch] = useState(0);
  const onToken = useCallback(
    (value: string) => {
      setToken(value);
      setHasToken(token() !== null);
      setEpoch((n) => n + 1);
      tools.retry();
    },
    [tools],
  );
  useEffect(() => {
    // Another tab switched to another token: this tab's conversation is not
    // that account's, so it opens a new chat rather than send it with that token.
    const onStorage = (e: StorageEvent) => {
      if (!isTokenChange(e)) return;
      forgetCurrentChat();
      setHasToken(token() !== null);
      setEpoch((n) => n + 1);
      retryTools();
    };
    window.addEventListener('storage', onStorage);
    return () => window.removeEventListener('storage', onStorage);
  }, [retryTools]);
  if (!hasToken || tools.state.status === 'unauthorized') {
    return <AccessGate refused={hasToken} onToken={onToken} />;
  }
  return <Shell key={epoch} epoch={epoch} toolsState={tools.state} toolsById={tools.byId} retryTools={tools.retry} />;
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

/**
 * Shown instead of the page when the address carried a token other than the
 * one the page has: which to use. A modal dialog (Escape keeps the current
 * token, which has the focus); nothing is sent to the server until the user
 * has chosen.
 */
function TokenChoice({ onChoose }: { onChoose: (useLink: boolean) => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (d && !d.open) d.showModal();
  }, []);
  return (
    <div className="app">
      <main>
        <dialog
          ref={dialog}
          className="token-choice"
          data-testid="token-choice"
          aria-labelledby="token-choice-title"
          aria-describedby="token-choice-why"
          onCancel={(e) => {
            e.preventDefault();
            onChoose(false);
          }}
        >
          <h1 id="token-choice-title">Use the token from this link?</h1>
          <p id="token-choice-why">
            This page already has a token for this server, and the link you opened carries a different one. The token
            decides which account your messages go to and whose conversations you see: with a token someone else sent
            you, what you write would land in their account.
          </p>
          <p>
            Switch only if you expected to: you started <code>agent serve</code> again (each start prints a new token), or
            you meant to use another account. Switching opens a new chat.
          </p>
          <div className="token-choice-actions">
            <button type="button" className="btn btn-primary" data-testid="token-keep" autoFocus onClick={() => onChoose(false)}>
              Keep the current token
            </button>
            <button type="button" className="btn" data-testid="token-use-link" onClick={() => onChoose(true)}>
              Use the link's token
            </button>
          </div>
        </dialog>
      </main>
    </div>
  );
}

/** The chat on screen: loading, ready (a `ChatView` per `key`), or not loadable. */
type Current =
  | { key: number; id: string; status: 'loading' }
  | { key: number; id: string; status: 'ready'; chat: LoadedChat }
  | { key: number; id: string; status: 'error'; message: string };

/** The page once it has a token: header, conversations, the chat, the tools panel. */
/** A top bar button that shows or hides the region `controls` names. */
function Disclosure({
  open,
  controls,
  label,
  className,
  onToggle,
  children,
}: {
  open: boolean;
  controls: string;
  /** The accessible name, when the content does not give one. */
  label?: string;
  className?: string;
  onToggle: () => void;
  children: ReactNode;
}) {
  return (
    <button
      type="button"
      className={`btn btn-ghost${className ? ` ${className}` : ''}`}
      aria-expanded={open}
      aria-controls={controls}
      aria-label={label}
      onClick={onToggle}
    >
      {children}
    </button>
  );
}

function Shell({
  epoch,
  toolsState,
  toolsById,
  retryTools,
}: {
  epoch: number;
  toolsState: ToolsState;
  toolsById: Map<string, ToolInfo>;
  retryTools: () => void;
}) {
  const chats = useChats(epoch);
  const graphs = useGraphs(epoch);
  const limits = useLimits(epoch);
  const [panelOpen, setPanelOpen] = useMedia(WIDE);
  const [sidebarOpen, setSidebarOpen] = useState(false); // the sheet on narrow screens
  const newChatRef = useRef<HTMLButtonElement>(null);

  const [current, setCurrent] = useState<Current>(() => {
    const { id, fresh } = initialChatId();
    return fresh
      ? { key: 0, id, status: 'ready', chat: { mode: 'server', id, messages: [], timings: {}, fresh } }
      : { key: 0, id, status: 'loading' };
  });
  const [picked, setPicked] = useState<string | undefined>(undefined);
  const pickedGraph =
    graphs.status === 'ready'
      ? (graphs.graphs.find((g) => g.name === picked)?.name ?? graphs.defaultGraph)
      : undefined;
  const [model, setModel] = useState<string | null>(null);
  const [activeGraph, setActiveGraph] = useState<string | undefined>(undefined);

  useEffect(() => showChatId(current.id), [current.id]);
  useEffect(() => {
    if (sidebarOpen) newChatRef.current?.focus(); // the sheet opened: the keyboard is in it
  }, [sidebarOpen]);

  useEffect(() => {
    if (current.status !== 'loading') return;
    let live = true;
    const { key, id } = current;
    loadChat(id).then(
      (chat) => live && setCurrent((c) => (c.key === key ? { key, id, status: 'ready', chat } : c)),
      (e: unknown) => live && setCurrent((c) => (c.key === key ? { key, id, status: 'error', message: errorText(e) } : c)),
    );
    return () => {
      live = false;
    };
  }, [current]);

  const mode: LoadedChat['mode'] =
    chats.state.status === 'no_store' ? 'local' : current.status === 'ready' ? current.chat.mode : 'server';

  const newChat = useCallback(() => {
    if (mode === 'local') forgetLocalChat(current.id); // without a store, New chat forgets the conversation
    const id = newChatId();
    setPicked(undefined);
    setModel(null);
    setSidebarOpen(false);
    setCurrent((c) => ({ key: c.key + 1, id, status: 'ready', chat: { mode, id, messages: [], timings: {}, fresh: true } }));
  }, [mode, current.id]);

  const openChat = useCallback((id: string) => {
    setSidebarOpen(false);
    setModel(null);
    setCurrent((c) => ({ key: c.key + 1, id, status: 'loading' }));
  }, []);

  const deleteChat = useCallback(
    async (id: string) => {
      await chats.remove(id);
      forgetNotes(id);
      if (id === current.id) newChat();
      window.setTimeout(() => newChatRef.current?.focus(), 0);
    },
    [chats, current.id, newChat],
  );

  // The tools panel shows the tools of the graph in effect.
  const graphTools = useMemo(() => {
    if (graphs.status !== 'ready' || !activeGraph) return null;
    const g = graphs.graphs.find((x) => x.name === activeGraph);
    return g ? new Set(g.tools) : null;
  }, [graphs, activeGraph]);
  const shownTools: ToolsState = useMemo(
    () =>
      toolsState.status === 'ready' && graphTools
        ? { status: 'ready', tools: toolsState.tools.filter((t) => graphTools.has(t.id)) }
        : toolsState,
    [toolsState, graphTools],
  );
  const toolCount = shownTools.status === 'ready' ? shownTools.tools.length : undefined;

  const page: Page = useMemo(
    () => ({
      mode,
      toolsById,
      graphs,
      pickedGraph,
      onPickGraph: setPicked,
      limits,
      onActivity: chats.refresh,
      onModel: setModel,
      onGraph: setActiveGraph,
      chats: chats.state,
      currentId: current.id,
      onNewChat: newChat,
      onOpenChat: openChat,
      onRenameChat: chats.rename,
      onDeleteChat: deleteChat,
      onRetryChats: chats.refresh,
    }),
    [mode, toolsById, graphs, pickedGraph, limits, chats.state, chats.refresh, chats.rename, current.id, newChat, openChat, deleteChat],
  );

  return (
    <PageProvider value={page}>
      <div className={`app${panelOpen ? ' panel-open' : ''}${sidebarOpen ? ' sidebar-open' : ''}`}>
        <header className="topbar">
          <div className="brand">
            <Disclosure
              className="btn-icon sidebar-toggle"
              open={sidebarOpen}
              controls="sidebar"
              label="Conversations"
              onToggle={() => setSidebarOpen((o) => !o)}
            >
              <svg viewBox="0 0 20 20" width="18" height="18" aria-hidden="true" focusable="false">
                <path d="M3 5h14M3 10h14M3 15h14" stroke="currentColor" strokeWidth="1.8" strokeLinecap="round" />
              </svg>
            </Disclosure>
            <span className="logo" aria-hidden="true" />
            <h1>agent</h1>
            <ModelLabel model={model} />
          </div>
          <div className="topbar-actions">
            <Disclosure open={panelOpen} controls="tools-panel" onToggle={() => setPanelOpen((o) => !o)}>
              Tools{toolCount !== undefined ? ` (${toolCount})` : ''}
            </Disclosure>
            <button type="button" className="btn btn-ghost" data-testid="clear" onClick={newChat} aria-label="New chat">
              <span aria-hidden="true">+</span>
              <span className="topbar-new-label">New chat</span>
            </button>
          </div>
        </header>

        <div className="layout">
          <Sidebar open={sidebarOpen} newChatRef={newChatRef} onClose={() => setSidebarOpen(false)} />
          <main className="chat" aria-label="Conversation">
            {current.status === 'loading' && (
              <p className="chat-loading muted" role="status">
                Loading the conversation…
              </p>
            )}
            {current.status === 'error' && (
              <div className="error-banner chat-load-error" role="alert" data-testid="error-banner">
                <div>
                  <strong>Could not load this conversation.</strong> <span className="error-text">{current.message}</span>
                </div>
                <div className="error-actions">
                  <button type="button" className="btn btn-small" onClick={() => openChat(current.id)}>
                    Try again
                  </button>
                  <button type="button" className="btn btn-small btn-ghost" onClick={newChat}>
                    New chat
                  </button>
                </div>
              </div>
            )}
            {current.status === 'ready' && <ChatView key={current.key} chat={current.chat} />}
          </main>

          <ToolsPanel
            state={shownTools}
            graph={graphTools ? activeGraph : undefined}
            open={panelOpen}
            onClose={() => setPanelOpen(false)}
            onRetry={retryTools}
          />
        </div>
        {sidebarOpen && <div className="scrim" aria-hidden="true" onClick={() => setSidebarOpen(false)} />}
      </div>
    </PageProvider>
  );
}
