// Keeping a conversation inside the model's context: before a turn is
// sent, the prompt is counted with the model's own template; when it would
// leave too little room for the reply, the oldest turns are left out (the
// thread says so) until it fits.

import { APIError, countTokens, type ChatMessage } from './api';

/** replyRoom is the context kept free for the reply: a quarter of it, at
 * most 4,096 tokens. */
export function replyRoom(context: number): number {
  return Math.min(4096, Math.floor(context / 4));
}

/** ContextError is a message that cannot fit the context on its own. */
export class ContextError extends APIError {}

export interface Fit {
  /** from is the first message sent (0: all of them). */
  from: number;
  /** tokens is the prompt length of the messages sent. */
  tokens: number;
}

/** fitContext finds the first message from which messages fit context
 * with room for a reply, starting no earlier than from. The last message
 * (the new one) is always sent; when it alone is too long, it fails. */
export async function fitContext(messages: ChatMessage[], context: number, from = 0, signal?: AbortSignal): Promise<Fit> {
  const budget = context - replyRoom(context);
  let start = Math.min(from, messages.length - 1);
  for (;;) {
    const tokens = await count(messages.slice(start), context, signal);
    if (tokens <= budget) return { from: start, tokens };
    if (start >= messages.length - 1) {
      if (tokens < context) return { from: start, tokens };
      throw new ContextError(`This message is ${tokens > context ? tokens.toLocaleString() + ' tokens' : 'too'} long; the model's context holds ${context.toLocaleString()} tokens. Shorten it, or start the engine with a longer context (Settings).`, 400);
    }
    // Drop a user turn and the reply to it.
    start++;
    while (start < messages.length - 1 && messages[start].role !== 'user') start++;
  }
}

/** count is the prompt length of messages; a prompt the server refuses
 * to count (400: longer than the context) counts as more than context. */
async function count(messages: ChatMessage[], context: number, signal?: AbortSignal): Promise<number> {
  try {
    return await countTokens(messages, signal);
  } catch (e) {
    if (!(e instanceof APIError) || e.status !== 400) throw e;
    const n = Number(/prompt has (\d+) tokens/.exec(e.message)?.[1]);
    return n > context ? n : context + 1;
  }
}
