import { useMemo, type FormEvent, type KeyboardEvent, type RefObject } from 'react';
import type { PendingFile } from './attachments';
import { AttachButton, AttachErrors, PendingChips, useFileDrop } from './Attachments';
import { usePage } from './page-context';

/** Text files the file picker offers besides the images (any UTF-8 text is accepted). */
const TEXT_ACCEPT = 'text/*,.md,.txt,.json,.csv,.tsv,.log,.yaml,.yml,.toml,.xml,.rs,.py,.js,.ts,.tsx,.go,.c,.h,.sh';

/**
 * The message form: attach errors and the files waiting to be sent, the
 * paperclip, the prompt, Send or Stop, and the keyboard hint. Files dropped on
 * it are attached; the picker offers the types the server's limits accept.
 */
export function Composer({
  inputRef,
  input,
  setInput,
  onSubmit,
  onKeyDown,
  busy,
  holding,
  pendingApproval,
  storageFailed,
  files,
  onRemoveFile,
  attachErrors,
  onDismissErrors,
  onFiles,
  onStop,
}: {
  inputRef: RefObject<HTMLTextAreaElement | null>;
  input: string;
  setInput: (value: string) => void;
  onSubmit: (e: FormEvent) => void;
  onKeyDown: (e: KeyboardEvent<HTMLTextAreaElement>) => void;
  /** A response is streaming: Stop instead of Send. */
  busy: boolean;
  /** The prompt waits (the server is asked whether an answer still runs). */
  holding: boolean;
  pendingApproval: boolean;
  storageFailed: boolean;
  files: PendingFile[];
  onRemoveFile: (key: string) => void;
  attachErrors: string[];
  onDismissErrors: () => void;
  onFiles: (files: File[]) => void;
  onStop: () => void;
}) {
  const { limits } = usePage();
  const accept = useMemo(() => [...limits.imageTypes, TEXT_ACCEPT].join(','), [limits.imageTypes]);
  const drop = useFileDrop(onFiles);
  return (
    <form
      className={`composer${drop.dragging ? ' dragging' : ''}`}
      onSubmit={onSubmit}
      aria-label="Message the agent"
      {...drop.handlers}
    >
      <AttachErrors errors={attachErrors} onDismiss={onDismissErrors} />
      <PendingChips files={files} onRemove={onRemoveFile} />
      <div className="composer-row">
        <AttachButton accept={accept} onFiles={onFiles} />
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
          disabled={holding}
          autoComplete="off"
          spellCheck
        />
        <div className="composer-actions">
          {busy ? (
            <button type="button" className="btn btn-stop" data-testid="stop" onClick={onStop}>
              <span className="stop-square" aria-hidden="true" />
              Stop
            </button>
          ) : (
            <button type="submit" className="btn btn-primary" data-testid="send">
              Send
            </button>
          )}
        </div>
      </div>
      <p id="prompt-hint" className="hint">
        <kbd>Enter</kbd> to send · <kbd>Shift</kbd>+<kbd>Enter</kbd> for a new line
        {busy ? (
          <>
            {' '}
            · <kbd>Esc</kbd> stops
          </>
        ) : (
          ' · drop files here to attach them'
        )}
        {storageFailed && <span className="warn"> · this browser refused to save the conversation</span>}
      </p>
      {drop.dragging && (
        <div className="drop-overlay" aria-hidden="true">
          Drop to attach
        </div>
      )}
    </form>
  );
}
