// The conversation list: new chat, search, rename and delete. In a narrow
// window it is a drawer that the chat header's button opens.

import { search, type Conversation } from './store';
import { h, replace } from './util';

export interface ConversationHost {
  conversations(): Conversation[];
  current(): Conversation;
  busy(): boolean;
  select(c: Conversation): void;
  startNew(): void;
  rename(c: Conversation, title: string): void;
  remove(c: Conversation): void;
}

export class ConversationList {
  readonly el: HTMLElement;
  private list: HTMLElement;
  private query: HTMLInputElement;
  private count: HTMLElement;
  private renaming: string | null = null;
  /** onClose is called when the drawer should close (a choice was made). */
  onClose: () => void = () => {};

  constructor(private host: ConversationHost) {
    this.list = h('ul', { class: 'conv-list', 'aria-label': 'Conversations', 'data-testid': 'conv-list' });
    this.query = h('input', { type: 'search', class: 'conv-search', placeholder: 'Search conversations', 'aria-label': 'Search conversations', autocomplete: 'off' });
    this.count = h('p', { class: 'sr-only', 'aria-live': 'polite' });
    this.query.addEventListener('input', () => this.render());
    this.query.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && this.query.value) {
        e.stopPropagation();
        this.query.value = '';
        this.render();
      }
    });
    this.el = h(
      'aside',
      { class: 'conversations', id: 'conversations', 'aria-label': 'Conversations' },
      h('button', { type: 'button', class: 'new-chat', onclick: () => (this.host.startNew(), this.onClose()) }, '+ New chat'),
      this.query,
      this.count,
      this.list,
    );
  }

  focusFirst(): void {
    (this.el.querySelector('.new-chat') as HTMLElement | null)?.focus();
  }

  render(): void {
    const q = this.query.value;
    const all = this.host.conversations();
    const shown = all.map((c) => ({ c, m: search(c, q) })).filter((x) => x.m.hit);
    const cur = this.host.current();
    replace(
      this.list,
      ...shown.map(({ c, m }) => {
        const active = c.id === cur.id;
        if (this.renaming === c.id) return this.renameRow(c);
        return h(
          'li',
          { class: active ? 'active' : '' },
          h(
            'button',
            { type: 'button', class: 'conv', 'aria-current': active ? 'true' : null, title: c.title, onclick: () => (this.host.select(c), this.onClose()) },
            h('span', { class: 'conv-title' }, c.title),
            m.snippet ? h('span', { class: 'conv-snippet' }, m.snippet) : null,
          ),
          h('button', { type: 'button', class: 'icon', 'aria-label': `Rename “${c.title}”`, title: 'Rename', disabled: this.host.busy() && active, onclick: () => this.startRename(c) }, '✎'),
          h('button', { type: 'button', class: 'icon delete', 'aria-label': `Delete “${c.title}”`, title: 'Delete', disabled: this.host.busy() && active, onclick: () => this.host.remove(c) }, '×'),
        );
      }),
    );
    if (shown.length === 0) this.list.append(h('li', { class: 'muted empty' }, q ? `No conversation mentions “${q}”` : 'No conversations yet'));
    this.count.textContent = q ? `${shown.length} of ${all.length} conversations match` : '';
  }

  private startRename(c: Conversation): void {
    this.renaming = c.id;
    this.render();
  }

  private renameRow(c: Conversation): HTMLElement {
    const input = h('input', { type: 'text', class: 'rename', 'aria-label': 'Conversation name', value: c.title });
    const done = (save: boolean) => {
      if (this.renaming !== c.id) return;
      this.renaming = null;
      const title = input.value.trim();
      if (save && title && title !== c.title) this.host.rename(c, title);
      this.render();
      (this.list.querySelector(`button[title="${CSS.escape(c.title)}"]`) as HTMLElement | null)?.focus();
    };
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') {
        e.preventDefault();
        done(true);
      } else if (e.key === 'Escape') {
        e.preventDefault();
        e.stopPropagation();
        done(false);
      }
    });
    input.addEventListener('blur', () => done(true));
    queueMicrotask(() => (input.focus(), input.select()));
    return h('li', { class: 'renaming' }, input);
  }
}
