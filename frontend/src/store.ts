// Conversations, kept in localStorage so that they survive restarts (of
// the page, the server and the desktop app).

import type { ChatMessage, ToolCall, Usage } from './api';

export interface Turn {
  role: 'user' | 'assistant';
  content: string;
  reasoning?: string;
  toolCalls?: ToolCall[];
  /** finish of an assistant turn: stop, length, tool_calls, stopped, error. */
  finish?: string;
  /** usage is the reply's own figures (kept for stopped replies too). */
  usage?: Usage;
}

export interface Conversation {
  id: string;
  title: string;
  updated: number;
  turns: Turn[];
  /** contextFrom is the first turn still sent to the model: earlier ones
   * were left out when the conversation outgrew the context. */
  contextFrom?: number;
  /** contextTokens is what the latest reply left in the context. */
  contextTokens?: number;
}

const storageKey = 'spool.conversations.v1';

export function loadConversations(): Conversation[] {
  try {
    const raw = localStorage.getItem(storageKey);
    const list = raw ? (JSON.parse(raw) as Conversation[]) : [];
    return Array.isArray(list) ? list.sort((a, b) => b.updated - a.updated) : [];
  } catch {
    return [];
  }
}

/** saveConversations keeps list; it reports false when storage refused. */
export function saveConversations(list: Conversation[]): boolean {
  try {
    localStorage.setItem(storageKey, JSON.stringify(list.slice(0, 500)));
    return true;
  } catch {
    return false;
  }
}

export function newConversation(): Conversation {
  return { id: crypto.randomUUID(), title: 'New chat', updated: Date.now(), turns: [] };
}

/** titleFor is a conversation title from its first message. */
export function titleFor(text: string): string {
  const line = text.trim().split('\n')[0];
  return line.length > 48 ? line.slice(0, 47) + '…' : line || 'New chat';
}

/** toMessages turns the turns into API messages (finished content only). */
export function toMessages(turns: Turn[]): ChatMessage[] {
  return turns
    .filter((t) => t.finish !== 'error')
    .map((t) => {
      const m: ChatMessage = { role: t.role, content: t.content };
      if (t.role === 'assistant' && t.toolCalls?.length) m.tool_calls = t.toolCalls;
      return m;
    });
}

/** matches reports whether a conversation contains query (any case); it
 * returns a snippet around the first hit in the turns. */
export function search(c: Conversation, query: string): { hit: boolean; snippet?: string } {
  const q = query.trim().toLowerCase();
  if (!q) return { hit: true };
  if (c.title.toLowerCase().includes(q)) return { hit: true };
  for (const t of c.turns) {
    const i = t.content.toLowerCase().indexOf(q);
    if (i >= 0) {
      const from = Math.max(0, i - 24);
      return { hit: true, snippet: (from > 0 ? '…' : '') + t.content.slice(from, i + q.length + 40).replace(/\s+/g, ' ') + '…' };
    }
  }
  return { hit: false };
}
