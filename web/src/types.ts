import type { UIMessage } from 'ai';

/** Token usage as the server reports it in `message-metadata`. */
export type Usage = {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  inputTokenDetails?: { cacheReadTokens?: number };
  outputTokenDetails?: { reasoningTokens?: number };
};

/** `message.metadata` of an assistant message. */
export type Metadata = {
  usage?: Usage;
  model?: string;
};

export type AppMessage = UIMessage<Metadata>;

export type Effect = 'read_only' | 'state_change' | 'external_side_effect';
export type Decision = 'allow' | 'approval' | 'deny';

/** One entry of `GET /api/tools`. */
export type ToolInfo = {
  id: string;
  description: string;
  effect: Effect;
  decision: Decision;
};

/** When the page first saw a tool call and when its result arrived (epoch ms). */
export type Timing = { start: number; end?: number; unknown?: boolean };
export type Timings = Record<string, Timing>;

/** The card states exposed as `data-state`. */
export type CardState =
  | 'input-streaming'
  | 'running'
  | 'done'
  | 'error'
  | 'denied'
  | 'awaiting-approval';
