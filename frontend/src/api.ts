// The connection to the Spool server: where it is, the API key, JSON
// helpers, and the OpenAI chat stream reader.

export interface Connection {
  /** base is the server's origin, e.g. http://127.0.0.1:8484. */
  base: string;
  key: string;
  /** shell is true inside the desktop app, which can start and stop the engine. */
  shell: boolean;
}

const keyStorage = 'spool.apiKey';

export const conn: Connection = { base: '', key: '', shell: false };

/** connect finds the server: the desktop shell says where it is in
 * spool-ui.json; in a browser the page's own origin serves the API. */
export async function connect(): Promise<void> {
  conn.key = localStorage.getItem(keyStorage) ?? '';
  conn.base = location.protocol.startsWith('http') ? location.origin : 'http://127.0.0.1:8484';
  try {
    const r = await fetch('./spool-ui.json', { cache: 'no-store' });
    if (r.ok && (r.headers.get('content-type') ?? '').includes('json')) {
      const c = (await r.json()) as { api?: string; key?: string; shell?: boolean };
      if (c.api) conn.base = c.api.replace(/\/$/, '');
      if (c.key) conn.key = c.key;
      conn.shell = !!c.shell;
    }
  } catch {
    // Not in the desktop shell.
  }
}

export function setKey(key: string): void {
  conn.key = key;
  if (key) localStorage.setItem(keyStorage, key);
  else localStorage.removeItem(keyStorage);
}

export class APIError extends Error {
  constructor(
    message: string,
    readonly status: number,
    /** code is the answer's error.code, when it has one. */
    readonly code = '',
  ) {
    super(message);
  }

  /** offline reports that the server could not be reached at all. */
  get offline(): boolean {
    return this.status === 0;
  }
}

/** request is fetch with an unreachable server as an APIError (status 0)
 * instead of the browser's "Failed to fetch". */
async function request(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new APIError('The engine is not reachable.', 0);
  }
}

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = { ...extra };
  if (conn.key) h['Authorization'] = 'Bearer ' + conn.key;
  return h;
}

async function errorOf(r: Response): Promise<APIError> {
  let msg = `${r.status} ${r.statusText}`;
  let code = '';
  try {
    const j = await r.json();
    if (j?.error?.message) msg = j.error.message;
    if (typeof j?.error?.code === 'string') code = j.error.code;
  } catch {
    // Not JSON.
  }
  if (r.status === 401) msg = 'The server wants an API key: enter it in Settings. (' + msg + ')';
  return new APIError(msg, r.status, code);
}

export async function getJSON<T>(path: string, signal?: AbortSignal): Promise<T> {
  const r = await request(conn.base + path, { headers: headers(), signal, cache: 'no-store' });
  if (!r.ok) throw await errorOf(r);
  return (await r.json()) as T;
}

export async function sendJSON<T>(method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<T> {
  const r = await request(conn.base + path, {
    method,
    headers: headers(body === undefined ? extra : { 'Content-Type': 'application/json', ...extra }),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw await errorOf(r);
  return (await r.json()) as T;
}

/** shell calls the desktop shell's own endpoints: engine status, start
 * and stop, opening a URL in the browser, choosing a folder. */
export async function shell<T>(action: 'status' | 'start' | 'stop' | 'open' | 'choose-folder', body?: unknown): Promise<T> {
  const r = await request('./shell/' + action, {
    method: action === 'status' ? 'GET' : 'POST',
    cache: 'no-store',
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw new APIError((await r.text()).trim() || `${r.status} ${r.statusText}`, r.status);
  return (await r.json()) as T;
}

/** shellStatus is the desktop shell's engine state; with wait, the
 * answer waits until the state has changed since that version. */
export async function shellStatus<T>(wait?: number): Promise<T> {
  const q = wait === undefined ? '' : `?wait=${wait}`;
  const r = await request('./shell/status' + q, { method: 'GET', cache: 'no-store' });
  if (!r.ok) throw new APIError((await r.text()).trim() || `${r.status} ${r.statusText}`, r.status);
  return (await r.json()) as T;
}

/** countTokens is the prompt length of messages with the model's chat
 * template (the Anthropic count_tokens endpoint; system turns aside). */
export async function countTokens(messages: ChatMessage[], signal?: AbortSignal): Promise<number> {
  const r = await request(conn.base + '/v1/messages/count_tokens', {
    method: 'POST',
    headers: headers({ 'Content-Type': 'application/json' }),
    body: JSON.stringify({ model: 'spool', messages: messages.map((m) => ({ role: m.role, content: m.content || ' ' })) }),
    signal,
  });
  if (!r.ok) throw await errorOf(r);
  return ((await r.json()) as { input_tokens: number }).input_tokens;
}

export function eventsURL(): string {
  const u = new URL(conn.base + '/v1/events');
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  if (conn.key) u.searchParams.set('api_key', conn.key);
  return u.toString();
}

// ---- Chat completions ------------------------------------------------

export interface ToolCall {
  id?: string;
  type?: string;
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  reasoning_content?: string;
  tool_calls?: ToolCall[];
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number };
  /** Spool's timing (absent from other servers). */
  prefill_ms?: number;
  decode_ms?: number;
}

/** ToolCallDelta is one streamed piece of a tool call. */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}

export interface StreamHandlers {
  /** onStart receives the request's id (the one its events carry). */
  onStart?(id: string): void;
  onContent(text: string): void;
  onReasoning(text: string): void;
  onToolCall(index: number, call: ToolCallDelta): void;
  onFinish(reason: string | null, usage?: Usage): void;
}

interface ChunkChoice {
  delta?: {
    content?: string | null;
    reasoning_content?: string | null;
    tool_calls?: ToolCallDelta[];
  };
  finish_reason?: string | null;
}

/** streamChat posts a streaming chat completion and feeds the deltas to
 * the handlers until the stream ends or signal aborts it. */
export async function streamChat(
  messages: ChatMessage[],
  opts: { thinking?: boolean; maxTokens?: number; signal: AbortSignal },
  on: StreamHandlers,
): Promise<void> {
  const body = {
    model: 'spool',
    stream: true,
    stream_options: { include_usage: true },
    messages,
    max_tokens: opts.maxTokens,
    chat_template_kwargs: opts.thinking === undefined ? undefined : { enable_thinking: opts.thinking },
  };
  const r = await request(conn.base + '/v1/chat/completions', {
    method: 'POST',
    headers: headers({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }),
    body: JSON.stringify(body),
    signal: opts.signal,
  });
  if (!r.ok || !r.body) throw await errorOf(r);
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let finish: string | null = null;
  let usage: Usage | undefined;
  let started = false;
  for (;;) {
    let value: string | undefined;
    let done: boolean;
    try {
      ({ value, done } = await reader.read());
    } catch (e) {
      if (opts.signal.aborted) throw e;
      throw new APIError('The connection to the engine was lost during the reply.', 0);
    }
    if (done) break;
    buf += value;
    let cut: number;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of frame.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') {
          on.onFinish(finish, usage);
          return;
        }
        const chunk = JSON.parse(data) as { id?: string; choices?: ChunkChoice[]; usage?: Usage; error?: { message: string } };
        if (chunk.error) throw new APIError(chunk.error.message, 500);
        if (!started && chunk.id) {
          started = true;
          on.onStart?.(chunk.id);
        }
        if (chunk.usage) usage = chunk.usage;
        for (const c of chunk.choices ?? []) {
          const d = c.delta;
          if (d?.reasoning_content) on.onReasoning(d.reasoning_content);
          if (d?.content) on.onContent(d.content);
          for (const tc of d?.tool_calls ?? []) on.onToolCall(tc.index, tc);
          if (c.finish_reason) finish = c.finish_reason;
        }
      }
    }
  }
  on.onFinish(finish, usage);
}
