// The chat page: conversations on the left, the transcript with streamed
// replies (reasoning collapsible, markdown, tool calls), and the composer
// with the thinking toggle and the stop button.

import { streamChat, type ToolCall, type Usage } from './api';
import { render, wireCopy } from './markdown';
import { loadConversations, newConversation, saveConversations, toMessages, type Conversation, type Turn } from './store';
import { h, replace, type Page } from './util';

export class ChatPage implements Page {
  title = 'Chat';
  private list: Conversation[] = loadConversations();
  private current!: Conversation;
  private abort: AbortController | null = null;
  private transcript!: HTMLElement;
  private convList!: HTMLElement;
  private input!: HTMLTextAreaElement;
  private sendBtn!: HTMLButtonElement;
  private thinking!: HTMLInputElement;
  private status!: HTMLElement;

  mount(root: HTMLElement): void {
    this.current = this.list[0] ?? newConversation();
    this.convList = h('ul', { class: 'conv-list', 'aria-label': 'Conversations' });
    this.transcript = h('div', { class: 'transcript', role: 'log', 'aria-label': 'Conversation', tabindex: 0 });
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
    this.sendBtn = h('button', { type: 'submit', class: 'primary send', 'data-testid': 'send' }, 'Send');
    this.status = h('p', { class: 'sr-only', 'aria-live': 'polite' });
    const form = h(
      'form',
      { class: 'composer', onsubmit: (e: Event) => (e.preventDefault(), this.onSend()) },
      this.input,
      h(
        'div',
        { class: 'composer-bar' },
        h('label', { class: 'switch', for: 'think' }, this.thinking, h('span', { class: 'track', 'aria-hidden': 'true' }), 'Thinking'),
        h('span', { class: 'spacer' }),
        this.sendBtn,
      ),
    );
    replace(
      root,
      h(
        'div',
        { class: 'chat' },
        h(
          'aside',
          { class: 'conversations' },
          h('button', { type: 'button', class: 'new-chat', onclick: () => this.startNew() }, '+ New chat'),
          this.convList,
        ),
        h('section', { class: 'chat-main', 'aria-label': 'Chat' }, this.transcript, form, this.status),
      ),
    );
    this.renderList();
    this.renderTranscript();
    this.input.focus();
  }

  unmount(): void {
    this.abort?.abort();
  }

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

  private startNew(): void {
    if (this.abort) return;
    if (this.current.turns.length === 0) {
      this.input.focus();
      return;
    }
    this.current = newConversation();
    this.renderList();
    this.renderTranscript();
    this.input.focus();
  }

  private select(c: Conversation): void {
    if (this.abort) return;
    this.current = c;
    this.renderList();
    this.renderTranscript();
  }

  private remove(c: Conversation): void {
    if (this.abort && c === this.current) return;
    this.list = this.list.filter((x) => x.id !== c.id);
    saveConversations(this.list);
    if (c === this.current) this.current = this.list[0] ?? newConversation();
    this.renderList();
    this.renderTranscript();
  }

  private renderList(): void {
    replace(
      this.convList,
      ...this.list.map((c) =>
        h(
          'li',
          { class: c.id === this.current.id ? 'active' : '' },
          h('button', { type: 'button', class: 'conv', 'aria-current': c.id === this.current.id ? 'true' : null, onclick: () => this.select(c) }, c.title),
          h('button', { type: 'button', class: 'icon delete', 'aria-label': `Delete “${c.title}”`, title: 'Delete', onclick: () => this.remove(c) }, '×'),
        ),
      ),
    );
    if (this.list.length === 0) this.convList.append(h('li', { class: 'muted empty' }, 'No conversations yet'));
  }

  private renderTranscript(): void {
    if (this.current.turns.length === 0) {
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
    replace(this.transcript, ...this.current.turns.map((t) => this.turnView(t)));
    this.transcript.scrollTop = this.transcript.scrollHeight;
  }

  private turnView(t: Turn, streaming = false): HTMLElement {
    const el = h('article', { class: `turn ${t.role}`, 'data-role': t.role });
    this.fillTurn(el, t, streaming);
    return el;
  }

  private fillTurn(el: HTMLElement, t: Turn, streaming: boolean): void {
    const who = h('div', { class: 'who' }, t.role === 'user' ? 'You' : 'Spool');
    if (t.role === 'user') {
      replace(el, who, h('div', { class: 'body plain' }, t.content));
      return;
    }
    const parts: Node[] = [who];
    if (t.reasoning) {
      const d = h('details', { class: 'reasoning' }, h('summary', {}, streaming && !t.content ? 'Thinking…' : 'Reasoning'));
      const body = h('div', { class: 'reasoning-body' });
      body.innerHTML = render(t.reasoning);
      d.append(body);
      const prev = el.querySelector('details.reasoning') as HTMLDetailsElement | null;
      d.open = prev ? prev.open : streaming;
      parts.push(d);
    }
    const body = h('div', { class: 'body markdown' });
    body.innerHTML = render(t.content) + (streaming ? '<span class="caret" aria-hidden="true"></span>' : '');
    parts.push(body);
    for (const tc of t.toolCalls ?? []) {
      let args = tc.function.arguments;
      try {
        args = JSON.stringify(JSON.parse(args), null, 2);
      } catch {
        // Partial or not JSON: show as is.
      }
      parts.push(h('div', { class: 'tool-call' }, h('div', { class: 'tool-name' }, 'Tool call: ', h('code', {}, tc.function.name || '…')), h('pre', {}, args)));
    }
    if (!streaming && (t.finish || t.stats)) {
      const note = t.finish === 'stopped' ? 'Stopped' : t.finish === 'length' ? 'Cut at the token limit' : t.finish === 'error' ? '' : '';
      parts.push(h('div', { class: 'turn-meta' }, note ? h('span', { class: 'badge' }, note) : null, t.stats ?? ''));
    }
    replace(el, ...parts);
  }

  private async onSend(): Promise<void> {
    if (this.abort) {
      this.abort.abort();
      return;
    }
    const text = this.input.value.trim();
    if (!text) return;
    this.input.value = '';
    this.autosize();
    const conv = this.current;
    if (!this.list.includes(conv)) this.list.unshift(conv);
    if (conv.turns.length === 0) conv.title = text.length > 48 ? text.slice(0, 47) + '…' : text;
    conv.turns.push({ role: 'user', content: text });
    const reply: Turn = { role: 'assistant', content: '' };
    const messages = toMessages(conv.turns);
    conv.turns.push(reply);
    conv.updated = Date.now();
    this.list.sort((a, b) => b.updated - a.updated);
    saveConversations(this.list);
    this.renderList();
    this.renderTranscript();
    const el = this.transcript.lastElementChild as HTMLElement;
    this.fillTurn(el, reply, true);

    this.abort = new AbortController();
    this.setBusy(true);
    const start = performance.now();
    let first = 0;
    let pending = false;
    let finished = false;
    const paint = () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        if (!finished && this.current === conv) {
          this.fillTurn(el, reply, true);
          const nearBottom = this.transcript.scrollHeight - this.transcript.scrollTop - this.transcript.clientHeight < 120;
          if (nearBottom) this.transcript.scrollTop = this.transcript.scrollHeight;
        }
      });
    };
    const calls: ToolCall[] = [];
    let usage: Usage | undefined;
    try {
      await streamChat(messages, { thinking: this.thinking.checked, signal: this.abort.signal }, {
        onContent: (s) => {
          first ||= performance.now();
          reply.content += s;
          paint();
        },
        onReasoning: (s) => {
          first ||= performance.now();
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
          usage = u;
        },
      });
    } catch (err) {
      if (this.abort.signal.aborted) {
        reply.finish = 'stopped';
      } else {
        reply.finish = 'error';
        reply.content += (reply.content ? '\n\n' : '') + '**Error:** ' + (err as Error).message;
      }
    }
    const secs = (performance.now() - (first || start)) / 1000;
    const tokens = usage?.completion_tokens;
    reply.stats = tokens !== undefined ? `${tokens} tokens · ${secs > 0 && tokens > 1 ? ((tokens - 1) / secs).toFixed(1) + ' tok/s' : ''}` : '';
    finished = true;
    this.abort = null;
    this.setBusy(false);
    conv.updated = Date.now();
    saveConversations(this.list);
    if (this.current === conv) this.fillTurn(el, reply, false);
    this.status.textContent = reply.finish === 'stopped' ? 'Reply stopped.' : 'Reply finished.';
    this.input.focus();
  }

  private setBusy(busy: boolean): void {
    this.sendBtn.textContent = busy ? 'Stop' : 'Send';
    this.sendBtn.classList.toggle('danger', busy);
    this.sendBtn.classList.toggle('primary', !busy);
    this.sendBtn.setAttribute('aria-label', busy ? 'Stop generating' : 'Send message');
    this.transcript.setAttribute('aria-busy', String(busy));
  }
}
