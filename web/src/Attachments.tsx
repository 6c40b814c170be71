import { useCallback, useRef, useState, type DragEvent } from 'react';
import type { FileUIPart } from 'ai';
import { dataUrlBytes, formatBytes, type PendingFile } from './attachments';

/** The paperclip: a labelled button that opens the (hidden) file input. */
export function AttachButton({
  accept,
  disabled,
  onFiles,
}: {
  accept: string;
  disabled?: boolean;
  onFiles: (files: File[]) => void;
}) {
  const input = useRef<HTMLInputElement>(null);
  return (
    <>
      <button
        type="button"
        className="btn btn-ghost btn-icon attach"
        data-testid="attach"
        aria-label="Attach files"
        title="Attach images or text files"
        disabled={disabled}
        onClick={() => input.current?.click()}
      >
        <svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true" focusable="false">
          <path
            d="M16.5 6.5 8.4 14.6a2 2 0 0 0 2.8 2.8l8.1-8.1a4 4 0 0 0-5.7-5.7l-8.4 8.4a6 6 0 0 0 8.5 8.5l7.4-7.4"
            fill="none"
            stroke="currentColor"
            strokeWidth="1.8"
            strokeLinecap="round"
            strokeLinejoin="round"
          />
        </svg>
      </button>
      <input
        ref={input}
        type="file"
        multiple
        hidden
        accept={accept}
        data-testid="attach-input"
        tabIndex={-1}
        aria-hidden="true"
        onChange={(e) => {
          const files = Array.from(e.target.files ?? []);
          e.target.value = ''; // the same file can be picked again
          if (files.length) onFiles(files);
        }}
      />
    </>
  );
}

/** The files waiting to be sent: a chip each (thumbnail or name and size), each removable. */
export function PendingChips({ files, onRemove }: { files: PendingFile[]; onRemove: (key: string) => void }) {
  if (files.length === 0) return null;
  return (
    <ul className="chips" aria-label="Attached files">
      {files.map((f) => (
        <li key={f.key} className={`chip chip-${f.kind}`} data-testid="attachment-chip" data-kind={f.kind}>
          {f.kind === 'image' ? (
            <img className="chip-thumb" src={f.part.url} alt="" />
          ) : (
            <span className="chip-icon" aria-hidden="true">
              TXT
            </span>
          )}
          <span className="chip-name" title={f.name}>
            {f.name}
          </span>
          <span className="chip-size">{formatBytes(f.size)}</span>
          <button
            type="button"
            className="btn btn-ghost chip-remove"
            aria-label={`Remove ${f.name}`}
            onClick={() => onRemove(f.key)}
          >
            ×
          </button>
        </li>
      ))}
    </ul>
  );
}

/** Why files were not attached (each names its file and the limit). */
export function AttachErrors({ errors, onDismiss }: { errors: string[]; onDismiss: () => void }) {
  if (errors.length === 0) return null;
  return (
    <div className="attach-error" role="alert" data-testid="attach-error">
      <div>
        {errors.map((e, i) => (
          <p key={i}>{e}</p>
        ))}
      </div>
      <button type="button" className="btn btn-small btn-ghost" onClick={onDismiss}>
        Dismiss
      </button>
    </div>
  );
}

/** The files of a sent message: images as previews, text files as chips. */
export function MessageFiles({ parts }: { parts: FileUIPart[] }) {
  if (parts.length === 0) return null;
  return (
    <div className="msg-files">
      {parts.map((p, i) => {
        const name = p.filename || `file ${i + 1}`;
        if (p.mediaType.startsWith('image/') && p.url.startsWith('data:')) {
          return <img key={i} className="msg-image" src={p.url} alt={name} data-testid="attachment" data-kind="image" />;
        }
        return (
          <span key={i} className="chip chip-text" data-testid="attachment" data-kind="text" title={p.mediaType}>
            <span className="chip-icon" aria-hidden="true">
              TXT
            </span>
            <span className="chip-name">{name}</span>
            {p.url.startsWith('data:') && <span className="chip-size">{formatBytes(dataUrlBytes(p.url))}</span>}
          </span>
        );
      })}
    </div>
  );
}

/** Drag and drop of files onto an element: its handlers, and whether files are over it. */
export function useFileDrop(onFiles: (files: File[]) => void): {
  dragging: boolean;
  handlers: {
    onDragEnter: (e: DragEvent) => void;
    onDragOver: (e: DragEvent) => void;
    onDragLeave: (e: DragEvent) => void;
    onDrop: (e: DragEvent) => void;
  };
} {
  const [dragging, setDragging] = useState(false);
  const depth = useRef(0);
  const hasFiles = (e: DragEvent) => Array.from(e.dataTransfer?.types ?? []).includes('Files');
  const onDragEnter = useCallback((e: DragEvent) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    depth.current += 1;
    setDragging(true);
  }, []);
  const onDragOver = useCallback((e: DragEvent) => {
    if (!hasFiles(e)) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = 'copy';
  }, []);
  const onDragLeave = useCallback((e: DragEvent) => {
    if (!hasFiles(e)) return;
    depth.current = Math.max(0, depth.current - 1);
    if (depth.current === 0) setDragging(false);
  }, []);
  const onDrop = useCallback(
    (e: DragEvent) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      depth.current = 0;
      setDragging(false);
      const files = Array.from(e.dataTransfer.files ?? []);
      if (files.length) onFiles(files);
    },
    [onFiles],
  );
  return { dragging, handlers: { onDragEnter, onDragOver, onDragLeave, onDrop } };
}
