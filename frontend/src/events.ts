// The live events websocket (/v1/events): engine state, tokens, expert
// maps and download progress. It reconnects with backoff while the page
// is open.

import { eventsURL } from './api';

export interface EngineEvent {
  type: string;
  data: any;
}

type Listener = (data: any) => void;

export class Events {
  private ws: WebSocket | null = null;
  private listeners = new Map<string, Set<Listener>>();
  private retry = 500;
  private timer: number | undefined;
  private stopped = false;
  private reportedDown = false;
  connected = false;

  start(): void {
    this.stopped = false;
    this.open();
  }

  /** reconnect drops the socket and opens a new one (new key, new server). */
  reconnect(): void {
    this.retry = 500;
    this.ws?.close();
    window.clearTimeout(this.timer);
    this.open();
  }

  on(type: string, fn: Listener): () => void {
    let set = this.listeners.get(type);
    if (!set) this.listeners.set(type, (set = new Set()));
    set.add(fn);
    return () => set!.delete(fn);
  }

  private emit(type: string, data: any): void {
    for (const fn of this.listeners.get(type) ?? []) fn(data);
  }

  private open(): void {
    if (this.stopped) return;
    let ws: WebSocket;
    try {
      ws = new WebSocket(eventsURL());
    } catch {
      this.schedule();
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      this.retry = 500;
      this.connected = true;
      this.reportedDown = false;
      this.emit('connection', true);
    };
    ws.onmessage = (m) => {
      try {
        const ev = JSON.parse(m.data as string) as EngineEvent;
        this.emit(ev.type, ev.data);
      } catch {
        // Ignore malformed frames.
      }
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      // Down is reported once: when a connection drops, or when the first
      // attempt fails.
      if (this.connected || !this.reportedDown) {
        this.connected = false;
        this.reportedDown = true;
        this.emit('connection', false);
      }
      this.schedule();
    };
  }

  private schedule(): void {
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => this.open(), this.retry);
    this.retry = Math.min(this.retry * 2, 10000);
  }
}

export const events = new Events();
