// The chat page: the conversation list (a drawer in narrow windows), the
// header (conversation, model, context meter), the transcript with streamed
// replies, and the composer with the thinking switch and the stop button.

import { APIError, conn, shell, streamChat, type ChatMessage, type StreamHandlers, type ToolCall, type Usage } from './api';
import { ContextError, fitContext, replyRoom, type Fit } from './context';
import { ConversationList } from './conversations';
import { events } from './events';
import { wireCopy } from './markdown';
import { toast } from './notice';
import { simulateChat } from './simulate';
import { engine } from './status';
import { loadConversations, newConversation, saveConversations, titleFor, toMessages, type Conversation, type Turn } from './store';
import { TurnView, type TurnActions } from './turnview';
import { h, replace, type Page } from './util';

/** followSlack is how close to the bottom (px) counts as following. */
const followSlack = 48;

export class ChatPage implements Page, TurnActions {
  title = 'Chat';
  private list: Conversation[] = loadConversations();
  private current!: Conversation;
  private abort: AbortController | null = null;
  private chat!: HTMLElement;
  private transcript!: HTMLElement;
  private convs!: ConversationList;
  private input!: HTMLTextAreaElement;
  private sendBtn!: HTMLButtonElement;
  private thinking!: HTMLInputElement;
  private thinkingLabel!: HTMLElement;
  private heading!: HTMLElement;
  private modelName!: HTMLElement;
  private meter!: HTMLElement;
  private banner!: HTMLElement;
  private jump!: HTMLButtonElement;
  private drawerBtn!: HTMLButtonElement;
  private announce!: HTMLElement;
  private following = true;
  private offs: Array<() => void> = [];
  private simulate = Number(new URLSearchParams(location.hash.split('?')[1] ?? '').get('simulate')) || 0;
  private sendError: APIError | null = null;

  mount(root: HTMLElement): void {
    this.current = this.list[0] ?? newConversation();
    this.convs = new ConversationList({
      conversations: () => this.list,
      current: () => this.current,
      busy: () => this.busy(),
      select: (c) => this.select(c),
      startNew: () => this.startNew(),
      rename: (c, title) => this.rename(c, title),
      remove: (c) => this.remove(c),
    });
    this.convs.onClose = () => this.setDrawer(false);
    this.transcript = h('div', { class: 'transcript', role: 'log', 'aria-label': 'Conversation', tabindex: 0, 'data-testid': 'transcript' });
    this.transcript.addEventListener('scroll', () => this.onScroll(), { passive: true });
    wireCopy(this.transcript);
    this.input = h('textarea', {
      id: 'prompt',
      rows: 2,
      placeholder: 'Ask Spool…  (Enter to send, Shift+Enter for a new line)',
      'aria-label': 'Message',
      onkeydown: (e: Event) => this.onKey(e as KeyboardEvent),
      oninput: () => this.autosize(),
    });
    this.thinking = h('input', { type: 'checkbox', id: 'think', role: 'switch' });
    this.thinking.checked = localStorage.getItem('spool.thinking') === '1';
    this.thinking.addEventListener('change', () => localStorage.setItem('spool.thinking', this.thinking.checked ? '1' : '0'));
    this.thinkingLabel = h('label', { class: 'switch', for: 'think', hidden: true }, this.thinking, h('span', { class: 'track', 'aria-hidden': 'true' }), 'Thinking');
    this.sendBtn = h('button', { type: 'submit', class: 'primary send', 'data-testid': 'send' }, 'Send');
    this.announce = h('p', { class: 'sr-only', 'aria-live': 'polite' });
    this.heading = h('h1', { class: 'chat-title' });
    this.modelName = h('span', { class: 'model-chip', 'data-testid': 'chat-model', title: 'The model answering' });
    this.meter = h('div', { class: 'context-meter', role: 'meter', 'aria-label': 'Context used', 'aria-valuemin': 0, 'data-testid': 'context-meter' });
    this.banner = h('div', { class: 'chat-banner', 'data-testid': 'chat-banner' });
    this.jump = h('button', { type: 'button', class: 'jump', hidden: true, onclick: () => this.jumpToLatest() }, 'Jump to latest ↓');
    this.drawerBtn = h('button', { type: 'button', class: 'drawer-toggle', 'aria-expanded': 'false', 'aria-controls': 'conversations', onclick: () => this.setDrawer(!this.chat.classList.contains('drawer-open')) }, h('span', { 'aria-hidden': 'true' }, '☰'), h('span', { class: 'sr-only' }, 'Conversations'));
    const form = h(
      'form',
      { class: 'composer', onsubmit: (e: Event) => (e.preventDefault(), this.onSend()) },
      this.input,
      h('div', { class: 'composer-bar' }, this.thinkingLabel, h('span', { class: 'spacer' }), this.sendBtn),
    );
    this.chat = h(
      'div',
      { class: 'chat' },
      this.convs.el,
      h('div', { class: 'drawer-backdrop', onclick: () => this.setDrawer(false) }),
      h(
        'section',
        { class: 'chat-main', 'aria-label': 'Chat' },
        h('header', { class: 'chat-head' }, this.drawerBtn, h('div', { class: 'chat-head-text' }, this.heading, this.modelName), this.meter),
        this.banner,
        h('div', { class: 'transcript-wrap' }, this.transcript, this.jump),
        form,
        this.announce,
      ),
    );
    this.chat.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && this.chat.classList.contains('drawer-open')) {
        this.setDrawer(false);
        this.drawerBtn.focus();
      }
    });
    replace(root, this.chat);
    this.offs.push(engine.on(() => this.onEngine()));
    this.convs.render();
    this.renderTranscript();
    this.onEngine();
    this.input.focus();
  }

  unmount(): void {
    this.abort?.abort();
    this.offs.forEach((f) => f());
  }

  busy(): boolean {
    return this.abort !== null;
  }

  // ---- engine state: model, thinking, offline ------------------------

  private offline(): boolean {
    return !this.simulate && ((engine.settled && !engine.connected) || !!this.sendError?.offline);
  }

  private onEngine(): void {
    const hello = engine.hello;
    this.modelName.textContent = hello ? hello.id : '';
    this.modelName.hidden = !hello;
    this.thinkingLabel.hidden = !hello?.thinking;
    if (engine.connected && this.sendError?.offline) this.sendError = null;
    this.renderBanner();
    this.renderMeter();
    this.updateSend();
  }

  private renderBanner(): void {
    if (this.offline()) {
      replace(
        this.banner,
        h(
          'div',
          { class: 'error-card', role: 'alert', 'data-testid': 'offline-card' },
          h('strong', {}, 'The engine is not reachable.'),
          h('p', {}, conn.shell ? 'The model may be stopped or still loading.' : `Spool is not answering at ${conn.base || location.origin}. Start it (spool serve or the app), then retry.`),
          h(
            'div',
            { class: 'actions' },
            h('button', { type: 'button', class: 'primary small', onclick: () => this.retry() }, 'Retry'),
            conn.shell ? h('button', { type: 'button', class: 'small', onclick: () => shell('start').then(() => this.retry(), () => this.retry()) }, 'Start model') : null,
          ),
        ),
      );
      return;
    }
    const c = this.current;
    const limit = engine.hello?.context_length ?? 0;
    const used = c.contextTokens ?? 0;
    const trimmed = (c.contextFrom ?? 0) > 0;
    if (limit > 0 && (trimmed || used >= limit - replyRoom(limit))) {
      replace(
        this.banner,
        h(
          'div',
          { class: 'notice-card', 'data-testid': 'context-limit' },
          h('span', {}, trimmed ? `This conversation outgrew the ${limit.toLocaleString()}-token context: its oldest turns are no longer sent to the model.` : `This conversation is near the ${limit.toLocaleString()}-token context: the oldest turns will be left out.`),
          h('button', { type: 'button', class: 'small primary', onclick: () => this.startNew() }, 'New chat'),
        ),
      );
      return;
    }
    replace(this.banner);
  }

  private renderMeter(): void {
    const limit = engine.hello?.context_length ?? 0;
    const used = this.current.contextTokens ?? 0;
    this.meter.hidden = limit <= 0;
    if (limit <= 0) return;
    const frac = Math.min(1, used / limit);
    this.meter.setAttribute('aria-valuemax', String(limit));
    this.meter.setAttribute('aria-valuenow', String(used));
    this.meter.setAttribute('aria-valuetext', `${used.toLocaleString()} of ${limit.toLocaleString()} tokens`);
    this.meter.className = 'context-meter' + (used >= limit - replyRoom(limit) ? ' full' : frac > 0.6 ? ' high' : '');
    replace(
      this.meter,
      h('span', { class: 'meter-bar', 'aria-hidden': 'true' }, h('span', { style: `width:${(frac * 100).toFixed(1)}%` })),
      h('span', { class: 'meter-text' }, `${used.toLocaleString()} / ${limit.toLocaleString()} tokens`),
    );
  }

  private retry(): void {
    this.sendError = null;
    events.reconnect();
    this.onEngine();
  }

  private updateSend(): void {
    const off = this.offline() && !this.abort;
    this.sendBtn.disabled = off;
    this.sendBtn.title = off ? 'The engine is not reachable' : '';
  }

  // ---- conversations -------------------------------------------------

  private setDrawer(open: boolean): void {
    this.chat.classList.toggle('drawer-open', open);
    this.drawerBtn.setAttribute('aria-expanded', String(open));
    if (open) this.convs.focusFirst();
  }

  private save(): void {
    if (!saveConversations(this.list)) toast('Could not save the conversations: the browser storage is full.');
  }

  private startNew(): void {
    this.setDrawer(false);
    if (this.busy()) return;
    if (this.current.turns.length > 0) {
      this.current = newConversation();
      this.convs.render();
      this.renderTranscript();
    }
    this.input.focus();
  }

  private select(c: Conversation): void {
    if (this.busy()) return;
    this.current = c;
    this.convs.render();
    this.renderTranscript();
  }

  private rename(c: Conversation, title: string): void {
    c.title = title;
    this.save();
    if (c === this.current) this.heading.textContent = title;
  }

  private remove(c: Conversation): void {
    if (this.busy() && c === this.current) return;
    const at = this.list.indexOf(c);
    if (at < 0) return;
    this.list.splice(at, 1);
    this.save();
    if (c === this.current) {
      this.current = this.list[0] ?? newConversation();
      this.renderTranscript();
    }
    this.convs.render();
    toast(`Deleted “${c.title}”.`, {
      label: 'Undo',
      run: () => {
        if (this.list.includes(c)) return;
        this.list.splice(Math.min(at, this.list.length), 0, c);
        this.save();
        if (!this.busy()) {
          this.current = c;
          this.renderTranscript();
        }
        this.convs.render();
      },
    });
  }

  // ---- transcript ----------------------------------------------------

  /** renderTranscript shows the current conversation; streaming, when
   * given, is the view of its last turn (a reply being written). */
  private renderTranscript(streaming?: TurnView): void {
    const c = this.current;
    this.heading.textContent = c.turns.length ? c.title : 'New chat';
    this.renderBanner();
    this.renderMeter();
    if (c.turns.length === 0) {
      replace(
        this.transcript,
        h(
          'div',
          { class: 'welcome' },
          h('h2', {}, 'Ask something'),
          h('p', { class: 'muted' }, 'The demo model knows Python’s standard library. Try one of these:'),
          h(
            'div',
            { class: 'suggestions' },
            ...['What does the function re.compile do?', 'What does the function os.path.join do?', 'What does the class collections.Counter do?'].map((q) =>
              h('button', { type: 'button', class: 'suggestion', onclick: () => ((this.input.value = q), this.onSend()) }, q),
            ),
          ),
        ),
      );
      return;
    }
    const lastReply = c.turns.map((t) => t.role).lastIndexOf('assistant');
    const nodes: Node[] = [];
    c.turns.forEach((t, i) => {
      if (i === c.contextFrom && i > 0) nodes.push(h('div', { class: 'context-divider', role: 'note', 'data-testid': 'context-divider' }, 'Turns above are no longer sent to the model: the conversation outgrew its context.'));
      nodes.push(streaming && i === c.turns.length - 1 ? streaming.el : new TurnView(t, i, this, { last: i === lastReply }).el);
    });
    replace(this.transcript, ...nodes);
    this.scrollToEnd();
  }

  private onScroll(): void {
    const t = this.transcript;
    this.following = t.scrollHeight - t.scrollTop - t.clientHeight <= followSlack;
    if (this.following) this.jump.hidden = true;
  }

  private scrollToEnd(): void {
    this.transcript.scrollTop = this.transcript.scrollHeight;
    this.following = true;
    this.jump.hidden = true;
  }

  private jumpToLatest(): void {
    this.scrollToEnd();
    this.transcript.focus({ preventScroll: true });
  }

  /** grew follows new content when following, else offers the jump. */
  private grew(): void {
    if (this.following) this.transcript.scrollTop = this.transcript.scrollHeight;
    else this.jump.hidden = false;
  }

  // ---- sending -------------------------------------------------------

  private onKey(e: KeyboardEvent): void {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (!this.abort) this.onSend();
    } else if (e.key === 'Escape' && this.abort) {
      this.abort.abort();
    }
  }

  private autosize(): void {
    this.input.style.height = 'auto';
    this.input.style.height = Math.min(this.input.scrollHeight, 240) + 'px';
  }

  private onSend(): void {
    if (this.abort) {
      this.abort.abort();
      return;
    }
    if (this.sendBtn.disabled) return;
    const text = this.input.value.trim();
    if (!text) return;
    this.input.value = '';
    this.autosize();
    const conv = this.current;
    if (!this.list.includes(conv)) this.list.unshift(conv);
    if (conv.turns.length === 0) conv.title = titleFor(text);
    conv.turns.push({ role: 'user', content: text });
    this.reply(conv);
  }

  edit(index: number, text: string): void {
    const conv = this.current;
    if (this.busy() || conv.turns[index]?.role !== 'user') return;
    conv.turns.splice(index + 1);
    conv.turns[index].content = text;
    if (index === 0) conv.title = titleFor(text);
    if ((conv.contextFrom ?? 0) > index) conv.contextFrom = 0;
    this.reply(conv);
  }

  regenerate(index: number): void {
    const conv = this.current;
    if (this.busy() || conv.turns[index]?.role !== 'assistant') return;
    conv.turns.splice(index);
    this.reply(conv);
  }

  /** reply streams the model's answer to the conversation's turns. */
  private async reply(conv: Conversation): Promise<void> {
    this.abort = new AbortController();
    const signal = this.abort.signal;
    this.setBusy(true);
    const reply: Turn = { role: 'assistant', content: '' };
    conv.updated = Date.now();
    this.list.sort((a, b) => b.updated - a.updated);
    this.save();
    this.convs.render();
    this.renderTranscript();
    const view = new TurnView(reply, conv.turns.length, this, { last: true, streaming: true });
    this.transcript.append(view.el);
    conv.turns.push(reply);
    this.scrollToEnd();

    let id = '';
    let usage: Usage | undefined;
    try {
      const messages = await this.fit(conv, signal, view);
      const offPrefill = engine.on(() => id && view.showPrefill(engine.prefill(id)));
      try {
        await this.stream(messages, signal, view, reply, (x) => (id = x), (u) => (usage = u));
      } finally {
        offPrefill();
      }
      reply.finish ??= 'stop';
    } catch (err) {
      if (signal.aborted) {
        reply.finish = 'stopped';
      } else {
        reply.finish = 'error';
        const e = err as Error;
        if (e instanceof APIError && e.offline) this.sendError = e;
        reply.content += (reply.content ? '\n\n' : '') + '**Error:** ' + e.message;
      }
    }
    if (!usage && id && !this.simulate) {
      // A stopped reply has no usage chunk: the engine's summary of the
      // request has the same figures.
      const s = await engine.summary(id, 2000);
      // A prompt stopped while it was read has no reading speed.
      if (s) usage = { prompt_tokens: s.prompt_tokens, completion_tokens: s.completion_tokens, prompt_tokens_details: { cached_tokens: s.cached_tokens }, prefill_ms: s.prefill_tokens_per_second > 0 ? s.prefill_ms : undefined, decode_ms: s.decode_ms };
    }
    reply.usage = usage;
    if (usage) conv.contextTokens = usage.prompt_tokens + usage.completion_tokens;
    this.abort = null;
    this.setBusy(false);
    conv.updated = Date.now();
    this.save();
    if (this.current === conv) {
      view.done();
      this.grew();
      this.refreshActions();
      this.renderBanner();
      this.renderMeter();
    }
    this.onEngine();
    this.announce.textContent = reply.finish === 'stopped' ? 'Reply stopped.' : reply.finish === 'error' ? 'The reply failed.' : 'Reply finished.';
    this.input.focus();
  }

  /** fit leaves out the oldest turns when the conversation would not fit
   * the context with room for the reply; it returns the messages to send. */
  private async fit(conv: Conversation, signal: AbortSignal, view: TurnView): Promise<ChatMessage[]> {
    const sendable = conv.turns.map((t, i) => ({ t, i })).filter((x) => x.i < conv.turns.length - 1 && x.t.finish !== 'error');
    const from = sendable.findIndex((x) => x.i >= (conv.contextFrom ?? 0));
    const messages = toMessages(sendable.map((x) => x.t));
    const limit = engine.hello?.context_length ?? 0;
    if (this.simulate || limit <= 0 || messages.length === 0) return messages;
    let fit: Fit;
    try {
      fit = await fitContext(messages, limit, Math.max(0, from), signal);
    } catch (e) {
      // Without a count (a server with no count_tokens), send it all:
      // the server says so if it does not fit.
      if (e instanceof ContextError || signal.aborted) throw e;
      return messages;
    }
    const first = sendable[fit.from].i;
    if (first !== (conv.contextFrom ?? 0)) {
      conv.contextFrom = first;
      conv.contextTokens = fit.tokens;
      // Say so in the thread, before the reply streams.
      if (this.current === conv) this.renderTranscript(view);
    }
    return messages.slice(fit.from);
  }

  private stream(messages: ChatMessage[], signal: AbortSignal, view: TurnView, reply: Turn, onID: (id: string) => void, onUsage: (u: Usage) => void): Promise<void> {
    let pending = false;
    const paint = () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        if (signal.aborted || this.current.turns.at(-1) !== reply) return;
        view.paint();
        this.grew();
      });
    };
    const calls: ToolCall[] = [];
    const on: StreamHandlers = {
      onStart: (id) => {
        onID(id);
        view.showPrefill(engine.prefill(id));
      },
      onContent: (s) => {
        reply.content += s;
        paint();
      },
      onReasoning: (s) => {
        reply.reasoning = (reply.reasoning ?? '') + s;
        paint();
      },
      onToolCall: (i, tc) => {
        const c = (calls[i] ??= { id: tc.id, type: 'function', function: { name: '', arguments: '' } });
        if (tc.id) c.id = tc.id;
        if (tc.function?.name) c.function.name += tc.function.name;
        if (tc.function?.arguments) c.function.arguments += tc.function.arguments;
        reply.toolCalls = calls.filter(Boolean);
        paint();
      },
      onFinish: (reason, u) => {
        reply.finish = reason ?? 'stop';
        if (u) onUsage(u);
      },
    };
    if (this.simulate) return simulateChat(this.simulate, 500, signal, on);
    const thinking = engine.hello?.thinking ? this.thinking.checked : undefined;
    return streamChat(messages, { thinking, signal }, on);
  }

  /** refreshActions enables the turns' actions and keeps Regenerate on
   * the latest reply only. */
  private refreshActions(): void {
    for (const b of this.transcript.querySelectorAll<HTMLButtonElement>('button[data-action]')) b.disabled = this.busy();
    const buttons = this.transcript.querySelectorAll('button[data-action=regenerate]');
    buttons.forEach((b, i) => i < buttons.length - 1 && b.remove());
  }

  private setBusy(busy: boolean): void {
    this.sendBtn.textContent = busy ? 'Stop' : 'Send';
    this.sendBtn.classList.toggle('danger', busy);
    this.sendBtn.classList.toggle('primary', !busy);
    this.sendBtn.setAttribute('aria-label', busy ? 'Stop generating' : 'Send message');
    this.transcript.setAttribute('aria-busy', String(busy));
    for (const b of this.transcript.querySelectorAll<HTMLButtonElement>('button[data-action]')) b.disabled = busy;
    this.convs.render();
    this.updateSend();
  }
}
