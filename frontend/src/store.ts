// Conversations, kept in localStorage so that they survive restarts (of
// the page, the server and the desktop app).

import type { ChatMessage, ToolCall } from './api';

export interface Turn {
  role: 'user' | 'assistant';
  content: string;
  reasoning?: string;
  toolCalls?: ToolCall[];
  /** status of an assistant turn: why it ended. */
  finish?: string;
  stats?: string;
}

export interface Conversation {
  id: string;
  title: string;
  updated: number;
  turns: Turn[];
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

export function saveConversations(list: Conversation[]): void {
  try {
    localStorage.setItem(storageKey, JSON.stringify(list.slice(0, 200)));
  } catch {
    // Storage full or disabled: conversations stay in memory.
  }
}

export function newConversation(): Conversation {
  return { id: crypto.randomUUID(), title: 'New chat', updated: Date.now(), turns: [] };
}

/** toMessages turns the turns into API messages (finished content only). */
export function toMessages(turns: Turn[]): ChatMessage[] {
  return turns.map((t) => {
    const m: ChatMessage = { role: t.role, content: t.content };
    if (t.role === 'assistant' && t.toolCalls?.length) m.tool_calls = t.toolCalls;
    return m;
  });
}
