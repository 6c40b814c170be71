import { createContext, useContext, type ReactNode } from 'react';
import type { LoadedChat } from './session';
import type { ChatsState } from './useChats';
import type { GraphsState } from './useGraphs';
import type { Limits } from './useLimits';
import type { ToolInfo } from './types';

/**
 * What is the same for the whole page once it has a token: what the server
 * offers (tools, graphs, limits), the conversations, and what the page does
 * when a chat reports something. `Shell` (App.tsx) provides it; the chat, the
 * conversation list and the composer read it with `usePage`.
 */
export type Page = {
  /** Where the conversation is kept (a chat made before the server said it keeps none is `local` too). */
  mode: LoadedChat['mode'];
  toolsById: Map<string, ToolInfo>;
  graphs: GraphsState;
  /** The graph picked for a new chat (the server's default at first). */
  pickedGraph: string | undefined;
  onPickGraph: (name: string) => void;
  limits: Limits;
  /** An answer started streaming or ended (the conversation list may have changed). */
  onActivity: () => void;
  onModel: (model: string | null) => void;
  /** The graph in effect (filters the tools panel). */
  onGraph: (graph: string | undefined) => void;

  /** The server's conversations. */
  chats: ChatsState;
  /** The chat on screen. */
  currentId: string;
  onNewChat: () => void;
  onOpenChat: (id: string) => void;
  onRenameChat: (id: string, title: string) => Promise<void>;
  onDeleteChat: (id: string) => Promise<void>;
  /** Load the conversations again (after a failed load). */
  onRetryChats: () => void;
};

const PageContext = createContext<Page | null>(null);

export function PageProvider({ value, children }: { value: Page; children: ReactNode }) {
  return <PageContext.Provider value={value}>{children}</PageContext.Provider>;
}

/** The page's shared values; only below a `PageProvider`. */
export function usePage(): Page {
  const page = useContext(PageContext);
  if (page === null) throw new Error('usePage() is called outside a <PageProvider> (App.tsx provides it around the page)');
  return page;
}
