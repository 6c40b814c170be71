// Files attached to a message: checked against the server's limits (see
// useLimits.ts) before they are read, then sent as `file` parts with a data URL,
// as the server expects them.
import type { FileUIPart } from 'ai';
import type { AppMessage } from './types';
import type { Limits } from './useLimits';

/** A file waiting to be sent with the next message. */
export type PendingFile = {
  key: string;
  kind: 'image' | 'text';
  name: string;
  /** Bytes, decoded. */
  size: number;
  part: FileUIPart;
};

/** Media types the server reads as text besides `text/*`. */
const TEXT_TYPES = new Set(['application/json', 'application/xml', 'application/x-yaml', 'application/toml']);

/** `4194304` → `4 MB`; `1536` → `1.5 KB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const [value, unit] = n < 1024 * 1024 ? [n / 1024, 'KB'] : [n / (1024 * 1024), 'MB'];
  const shown = value >= 10 || Number.isInteger(value) ? Math.round(value).toString() : value.toFixed(1);
  return `${shown} ${unit}`;
}

/** The decoded size of a data URL's payload. */
export function dataUrlBytes(url: string): number {
  const comma = url.indexOf(',');
  if (comma === -1) return 0;
  const data = url.slice(comma + 1);
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding);
}

/** Bytes of the files already in a conversation (they are sent again with every request). */
export function conversationFileBytes(messages: AppMessage[]): number {
  let n = 0;
  for (const m of messages) for (const p of m.parts) if (p.type === 'file') n += dataUrlBytes(p.url);
  return n;
}

function typeNames(types: string[]): string {
  return types.map((t) => t.replace(/^image\//, '').toUpperCase()).join(', ');
}

function readDataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error ?? new Error('could not read the file'));
    reader.readAsDataURL(file);
  });
}

/** Whether the file's bytes are UTF-8 text (no NUL), as the server requires of a text file. */
async function isText(file: File): Promise<boolean> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  if (bytes.includes(0)) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

let counter = 0;

/**
 * Checks and reads `files` for the next message. `usedBytes`: what the
 * conversation and the files already attached take of the request's budget.
 * Files over a limit or of another type are not added; each gives a sentence
 * naming it and the limit.
 */
export async function prepareFiles(
  files: File[],
  limits: Limits,
  usedBytes: number,
): Promise<{ added: PendingFile[]; errors: string[] }> {
  const added: PendingFile[] = [];
  const errors: string[] = [];
  let used = usedBytes;
  for (const file of files) {
    const name = file.name || 'file';
    if (file.size > limits.maxFileBytes) {
      errors.push(`“${name}” is ${formatBytes(file.size)}; a file may be at most ${formatBytes(limits.maxFileBytes)}.`);
      continue;
    }
    if (used + file.size > limits.maxRequestFileBytes) {
      errors.push(
        `“${name}” would bring the files of this conversation to ${formatBytes(used + file.size)}; together they may be at most ${formatBytes(limits.maxRequestFileBytes)}.`,
      );
      continue;
    }
    const declared = file.type.toLowerCase();
    let kind: PendingFile['kind'];
    let mediaType: string;
    if (limits.imageTypes.includes(declared)) {
      kind = 'image';
      mediaType = declared;
    } else if (declared.startsWith('image/')) {
      errors.push(`“${name}” is a ${declared} image; images may be ${typeNames(limits.imageTypes)}.`);
      continue;
    } else if (declared === '' || declared.startsWith('text/') || TEXT_TYPES.has(declared)) {
      if (!(await isText(file))) {
        errors.push(`“${name}” is not a text file (UTF-8) or a ${typeNames(limits.imageTypes)} image.`);
        continue;
      }
      kind = 'text';
      mediaType = declared || 'text/plain';
    } else {
      errors.push(`“${name}” (${declared}) is neither a text file nor a ${typeNames(limits.imageTypes)} image.`);
      continue;
    }
    const url = await readDataUrl(file);
    const data = url.slice(url.indexOf(',') + 1);
    used += file.size;
    added.push({
      key: `f${++counter}`,
      kind,
      name,
      size: file.size,
      part: { type: 'file', mediaType, filename: name, url: `data:${mediaType};base64,${data}` },
    });
  }
  return { added, errors };
}
