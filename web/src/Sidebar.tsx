import { useEffect, useRef, useState, type KeyboardEvent, type RefObject } from 'react';
import type { ChatSummary } from './useChats';
import { errorText } from './api';
import { printable } from './printable';
import { usePage } from './page-context';

const MAX_TITLE = 200;

function when(ms: number): { short: string; full: string } {
  if (!ms) return { short: '', full: '' };
  const d = new Date(ms);
  const today = new Date();
  const sameDay = d.toDateString() === today.toDateString();
  return {
    short: sameDay
      ? d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })
      : d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' }),
    full: d.toLocaleString(),
  };
}

type Mode = 'view' | 'rename' | 'delete';

/** One conversation: open it, rename it inline, or delete it (after a confirmation). */
function ChatItem({
  chat,
  current,
  onOpen,
  onRename,
  onDelete,
}: {
  chat: ChatSummary;
  current: boolean;
  onOpen: (id: string) => void;
  onRename: (id: string, title: string) => Promise<void>;
  onDelete: (id: string) => Promise<void>;
}) {
  const [mode, setMode] = useState<Mode>('view');
  const [draft, setDraft] = useState(chat.title);
  const [problem, setProblem] = useState('');
  const [working, setWorking] = useState(false);
  const openRef = useRef<HTMLButtonElement>(null);
  const renameRef = useRef<HTMLButtonElement>(null);
  const inputRef = useRef<HTMLInputElement>(null);
  const cancelRef = useRef<HTMLButtonElement>(null);
  // Shown as every text a model or a user chose: hidden characters escaped.
  const title = printable(chat.title.trim()) || 'Untitled chat';
  const time = when(chat.updated_ms);

  useEffect(() => {
    if (mode === 'rename') inputRef.current?.select();
    if (mode === 'delete') cancelRef.current?.focus();
  }, [mode]);

  const back = (focus: 'open' | 'rename' = 'open') => {
    setMode('view');
    setProblem('');
    // After React has put the buttons back.
    window.setTimeout(() => (focus === 'open' ? openRef : renameRef).current?.focus(), 0);
  };

  const save = async () => {
    const t = draft.trim();
    if (t === chat.title.trim()) return back();
    if (!t || [...t].length > MAX_TITLE) {
      setProblem(`A title has 1 to ${MAX_TITLE} characters.`);
      return;
    }
    setWorking(true);
    try {
      await onRename(chat.id, t);
      back();
    } catch (e) {
      setProblem(`Not renamed: ${errorText(e)}`);
    } finally {
      setWorking(false);
    }
  };

  const onKey = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key === 'Enter' && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void save();
    } else if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      setDraft(chat.title);
      back('rename');
    }
  };

  const confirmDelete = async () => {
    setWorking(true);
    try {
      await onDelete(chat.id);
    } catch (e) {
      setProblem(`Not deleted: ${errorText(e)}`);
      setWorking(false);
    }
  };

  return (
    <li
      className={`chat-item${current ? ' current' : ''}`}
      data-testid="chat-item"
      data-chat-id={chat.id}
      data-current={current ? 'true' : undefined}
    >
      {mode === 'rename' ? (
        <div className="chat-rename">
          <label className="sr-only" htmlFor={`rename-${chat.id}`}>
            New title for “{title}”
          </label>
          <input
            id={`rename-${chat.id}`}
            ref={inputRef}
            data-testid="chat-rename-input"
            value={draft}
            maxLength={MAX_TITLE * 2}
            disabled={working}
            aria-describedby={problem ? `rename-problem-${chat.id}` : undefined}
            onChange={(e) => setDraft(e.target.value)}
            onKeyDown={onKey}
          />
          <p className="chat-hint" id={`rename-hint-${chat.id}`}>
            <kbd>Enter</kbd> saves · <kbd>Esc</kbd> cancels
          </p>
        </div>
      ) : (
        <>
          <button
            ref={openRef}
            type="button"
            className="chat-open"
            data-testid="chat-open"
            aria-current={current ? 'page' : undefined}
            onClick={() => onOpen(chat.id)}
          >
            <span className="chat-title">{title}</span>
            {time.short && (
              <span className="chat-time" title={time.full}>
                {time.short}
              </span>
            )}
          </button>
          {mode === 'view' && (
            <span className="chat-actions">
              <button
                ref={renameRef}
                type="button"
                className="btn btn-ghost btn-icon-small"
                data-testid="chat-rename"
                aria-label={`Rename “${title}”`}
                title="Rename"
                onClick={() => {
                  setDraft(chat.title);
                  setMode('rename');
                }}
              >
                <svg viewBox="0 0 20 20" width="16" height="16" aria-hidden="true" focusable="false">
                  <path d="M3 14.5V17h2.5l8.8-8.8-2.5-2.5L3 14.5Zm12.7-7.6a.7.7 0 0 0 0-1L14.1 4.3a.7.7 0 0 0-1 0l-1.2 1.2 2.5 2.5 1.3-1.1Z" fill="currentColor" />
                </svg>
              </button>
              <button
                type="button"
                className="btn btn-ghost btn-icon-small"
                data-testid="chat-delete"
                aria-label={`Delete “${title}”`}
                title="Delete"
                onClick={() => setMode('delete')}
              >
                <svg viewBox="0 0 20 20" width="16" height="16" aria-hidden="true" focusable="false">
                  <path d="M7 3h6l.6 1.5H17V6H3V4.5h3.4L7 3Zm-2.5 4h11l-.8 10H5.3l-.8-10Z" fill="currentColor" />
                </svg>
              </button>
            </span>
          )}
        </>
      )}
      {mode === 'delete' && (
        <div className="chat-confirm" role="group" aria-label={`Delete “${title}”?`}>
          <span>Delete this conversation?</span>
          <button
            type="button"
            className="btn btn-small btn-danger"
            data-testid="chat-delete-confirm"
            disabled={working}
            onClick={() => void confirmDelete()}
          >
            Delete
          </button>
          <button
            ref={cancelRef}
            type="button"
            className="btn btn-small"
            disabled={working}
            onClick={() => back()}
            onKeyDown={(e) => {
              if (e.key === 'Escape') back();
            }}
          >
            Cancel
          </button>
        </div>
      )}
      {problem && (
        <p className="chat-problem" id={`rename-problem-${chat.id}`} role="alert">
          {problem}
        </p>
      )}
    </li>
  );
}

/**
 * The conversations (a `nav` landmark): New chat, then the server's threads,
 * most recent first. Without a store it says the conversation is kept in this
 * browser only. On narrow screens it is a sheet (`open`).
 */
export function Sidebar({
  open,
  newChatRef,
  onClose,
}: {
  open: boolean;
  newChatRef: RefObject<HTMLButtonElement | null>;
  onClose: () => void;
}) {
  const { chats: state, currentId, onNewChat, onOpenChat, onRenameChat, onDeleteChat, onRetryChats } = usePage();
  return (
    <nav
      id="sidebar"
      className={`sidebar${open ? ' open' : ''}`}
      aria-label="Conversations"
      data-testid="sidebar"
      onKeyDown={(e) => {
        if (e.key === 'Escape' && open) onClose();
      }}
    >
      <div className="sidebar-head">
        <h2 className="sidebar-title">Conversations</h2>
        <button type="button" className="btn btn-ghost btn-icon sidebar-close" onClick={onClose} aria-label="Close conversations">
          ×
        </button>
      </div>
      <button ref={newChatRef} type="button" className="btn new-chat" data-testid="new-chat" onClick={onNewChat}>
        <span aria-hidden="true">+</span> New chat
      </button>
      {state.status === 'loading' && <p className="muted small sidebar-note">Loading conversations…</p>}
      {state.status === 'no_store' && (
        <p className="muted small sidebar-note" data-testid="no-store">
          This server keeps no conversations. The current one is kept in this browser only, and New chat forgets it.
        </p>
      )}
      {state.status === 'error' && (
        <div className="sidebar-note">
          <p className="small">Could not load the conversations: {state.message}</p>
          <button type="button" className="btn btn-small" onClick={onRetryChats}>
            Try again
          </button>
        </div>
      )}
      {state.status === 'ready' && state.chats.length === 0 && (
        <p className="muted small sidebar-note">No conversations yet: the first answer starts one.</p>
      )}
      {state.status === 'ready' && state.chats.length > 0 && (
        <ul className="chat-list">
          {state.chats.map((c) => (
            <ChatItem
              key={c.id}
              chat={c}
              current={c.id === currentId}
              onOpen={onOpenChat}
              onRename={onRenameChat}
              onDelete={onDeleteChat}
            />
          ))}
        </ul>
      )}
    </nav>
  );
}
