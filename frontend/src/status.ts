// What the engine says about itself, from the events websocket: the served
// model (hello), the state of the requests in flight (state), each
// request's prompt progress (prefill) and figures when it ends (request).
// The sidebar, the chat and the desktop shell's bar all read it from here,
// so that they show the same state and the same tok/s figure.

import { remoteLine } from './engine';
import { events } from './events';
import { Observable } from './util';

export interface ModelHello {
  id: string;
  context_length: number;
  max_output_tokens: number;
  /** thinking: the chat template has a thinking switch. */
  thinking: boolean;
}

export interface PrefillEvent {
  id: string;
  prompt_tokens: number;
  cached_tokens: number;
  done: number;
}

export interface RequestSummary {
  id: string;
  finish: string;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  prefill_ms: number;
  decode_ms: number;
  prefill_tokens_per_second: number;
  decode_tokens_per_second: number;
}

export interface ServerState {
  state: 'ready' | 'queued' | 'prefilling' | 'generating';
  tokens_per_second: number;
  model: string;
  requests: Array<{ id: string; phase: string; prompt_tokens: number; prefill_done: number; cached_tokens: number }>;
  last?: RequestSummary;
}

/** decodeRate is the one tok/s figure of a reply: tokens after the first
 * over the time since the first (the server computes it the same way). */
export function decodeRate(tokens: number, decodeMS: number | undefined): number {
  return tokens > 1 && decodeMS && decodeMS > 0 ? (tokens - 1) / (decodeMS / 1000) : 0;
}

export function rate(x: number): string {
  return x >= 100 ? x.toFixed(0) : x.toFixed(1);
}

class EngineStatus extends Observable {
  connected = false;
  /** settled turns true once the first connection attempt has an answer. */
  settled = false;
  hello: ModelHello | null = null;
  state: ServerState | null = null;
  private prefills = new Map<string, PrefillEvent>();
  private summaries = new Map<string, RequestSummary>();
  private waiters = new Map<string, Array<(s: RequestSummary) => void>>();

  constructor() {
    super();
    events.on('connection', (up: boolean) => {
      this.connected = up;
      this.settled = true;
      if (!up) this.state = null;
      this.emit();
    });
    events.on('hello', (h: ModelHello) => {
      this.hello = h;
      this.emit();
    });
    events.on('state', (s: ServerState) => {
      this.connected = true;
      this.state = s;
      this.emit();
    });
    events.on('prefill', (p: PrefillEvent) => {
      this.prefills.set(p.id, p);
      this.trim(this.prefills);
      this.emit();
    });
    events.on('request', (r: RequestSummary) => {
      this.summaries.set(r.id, r);
      this.trim(this.summaries);
      for (const w of this.waiters.get(r.id) ?? []) w(r);
      this.waiters.delete(r.id);
      this.emit();
    });
  }

  private trim<V>(m: Map<string, V>): void {
    while (m.size > 32) m.delete(m.keys().next().value!);
  }

  /** prefill is the latest prompt progress of request id. */
  prefill(id: string): PrefillEvent | undefined {
    return this.prefills.get(id);
  }

  /** summary waits up to ms for the figures of request id. */
  summary(id: string, ms: number): Promise<RequestSummary | undefined> {
    const have = this.summaries.get(id);
    if (have) return Promise.resolve(have);
    return new Promise((done) => {
      const t = window.setTimeout(() => done(undefined), ms);
      const list = this.waiters.get(id) ?? [];
      list.push((s) => (window.clearTimeout(t), done(s)));
      this.waiters.set(id, list);
    });
  }

  /** line is the status shown in the sidebar and the menu bar. */
  line(): { state: string; text: string } {
    const s = this.state;
    if (!this.settled) return { state: 'loading', text: 'Connecting…' };
    if (!this.connected || !s) return { state: 'offline', text: 'Engine not reachable' };
    const remote = remoteLine(s);
    if (remote) return remote;
    const model = this.hello?.id ?? s.model;
    switch (s.state) {
      case 'queued':
        return { state: 'generating', text: 'Waiting for a free slot' };
      case 'prefilling': {
        const r = s.requests.find((x) => x.phase === 'prefilling');
        const pct = r && r.prompt_tokens > 0 ? Math.floor((100 * r.prefill_done) / r.prompt_tokens) : 0;
        return { state: 'generating', text: `Reading prompt · ${pct}%` };
      }
      case 'generating':
        return { state: 'generating', text: `Generating · ${rate(s.tokens_per_second)} tok/s` };
    }
    const last = s.last && s.last.decode_tokens_per_second > 0 ? ` · last reply ${rate(s.last.decode_tokens_per_second)} tok/s` : '';
    return { state: 'ready', text: `Ready · ${model}${last}` };
  }
}

export const engine = new EngineStatus();
