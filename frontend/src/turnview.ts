// One turn of the transcript: who spoke, the text (markdown for replies,
// rendered incrementally while it streams), the reasoning, tool calls, the
// reply's figures and the turn's actions (copy, edit and resend,
// regenerate).

import type { Usage } from './api';
import { copyText, MarkdownView } from './markdown';
import { decodeRate, rate, type PrefillEvent } from './status';
import type { Turn } from './store';
import { h, replace } from './util';

export interface TurnActions {
  /** edit resends the user turn at index with new text. */
  edit(index: number, text: string): void;
  /** regenerate replaces the reply at index with a new one. */
  regenerate(index: number): void;
  busy(): boolean;
}

/** minCachedNote is the least reused prefix the figures mention. */
const minCachedNote = 16;

const finishNotes: Record<string, string> = { stopped: 'Stopped', length: 'Cut at the token limit', error: 'Error' };

/** statsLine is a reply's figures: tokens and decode speed, then how the
 * prompt was read (speed, and the prefix reused from the cache). */
export function statsLine(u: Usage | undefined): string {
  if (!u) return '';
  const parts = [`${u.completion_tokens.toLocaleString()} token${u.completion_tokens === 1 ? '' : 's'}`];
  const tps = decodeRate(u.completion_tokens, u.decode_ms);
  if (tps > 0) parts.push(`${rate(tps)} tok/s`);
  const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
  const read = u.prompt_tokens - cached;
  if (u.prefill_ms && u.prefill_ms > 0 && read > 0) parts.push(`prompt ${u.prompt_tokens.toLocaleString()} tokens read at ${rate(read / (u.prefill_ms / 1000))} tok/s`);
  else parts.push(`prompt ${u.prompt_tokens.toLocaleString()} tokens`);
  // A few template tokens match any earlier prompt: not worth a mention.
  if (cached >= minCachedNote) parts.push(`cached prefix reused (${cached.toLocaleString()} tokens)`);
  return parts.join(' · ');
}

export class TurnView {
  readonly el: HTMLElement;
  private body: MarkdownView | null = null;
  private reasoning: MarkdownView | null = null;
  private details: HTMLDetailsElement | null = null;
  private waiting: HTMLElement | null = null;
  private tools: HTMLElement | null = null;
  private caret: HTMLElement | null = null;

  constructor(
    readonly turn: Turn,
    readonly index: number,
    private actions: TurnActions,
    private opts: { last: boolean; streaming?: boolean },
  ) {
    this.el = h('article', { class: `turn ${turn.role}`, 'data-role': turn.role, 'aria-label': turn.role === 'user' ? 'You said' : 'Spool replied' });
    if (turn.role === 'user') this.showUser();
    else if (opts.streaming) this.startStreaming();
    else this.showReply();
  }

  private who(): HTMLElement {
    return h('div', { class: 'who' }, this.turn.role === 'user' ? 'You' : 'Spool');
  }

  private showUser(): void {
    const t = this.turn;
    replace(
      this.el,
      this.who(),
      h('div', { class: 'body plain' }, t.content),
      this.toolbar(
        this.copyButton(),
        h('button', { type: 'button', class: 'small ghost', 'data-action': 'edit', disabled: this.actions.busy(), onclick: () => this.editUser() }, 'Edit'),
      ),
    );
  }

  private editUser(): void {
    const ta = h('textarea', { class: 'edit-box', rows: 3, 'aria-label': 'Edit your message' });
    ta.value = this.turn.content;
    const save = () => {
      const text = ta.value.trim();
      if (text) this.actions.edit(this.index, text);
    };
    ta.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        save();
      } else if (e.key === 'Escape') {
        e.preventDefault();
        this.showUser();
      }
    });
    replace(
      this.el,
      this.who(),
      ta,
      h('div', { class: 'toolbar' }, h('button', { type: 'button', class: 'small primary', onclick: save }, 'Save and send'), h('button', { type: 'button', class: 'small', onclick: () => this.showUser() }, 'Cancel')),
    );
    ta.focus();
    ta.setSelectionRange(ta.value.length, ta.value.length);
  }

  private copyButton(): HTMLButtonElement {
    const b = h('button', { type: 'button', class: 'small ghost', 'data-action': 'copy' }, 'Copy');
    b.addEventListener('click', async () => {
      b.textContent = (await copyText(this.turn.content)) ? 'Copied' : 'Copy failed';
      setTimeout(() => (b.textContent = 'Copy'), 1500);
    });
    return b;
  }

  private toolbar(...buttons: HTMLElement[]): HTMLElement {
    return h('div', { class: 'toolbar', role: 'group', 'aria-label': 'Message actions' }, ...buttons);
  }

  private startStreaming(): void {
    this.body = new MarkdownView('body markdown');
    this.waiting = h('div', { class: 'prefill', 'data-testid': 'prefill' }, h('span', { class: 'muted' }, 'Waiting for the engine…'));
    this.caret = h('span', { class: 'caret', 'aria-hidden': 'true' });
    replace(this.el, this.who(), this.waiting, this.body.el, this.caret);
  }

  /** showPrefill shows how far the prompt has been read. */
  showPrefill(p: PrefillEvent | undefined): void {
    if (!this.waiting || !p) return;
    const cached = p.cached_tokens > 0 ? ` (${p.cached_tokens.toLocaleString()} cached)` : '';
    replace(
      this.waiting,
      h('span', {}, `Reading prompt — ${p.done.toLocaleString()} of ${p.prompt_tokens.toLocaleString()} tokens${cached}`),
      h('progress', { max: p.prompt_tokens || 1, value: p.done, 'aria-label': 'Prompt read' }),
    );
  }

  /** paint shows the reply as streamed so far. */
  paint(): void {
    const t = this.turn;
    if (!this.body) return;
    if ((t.content || t.reasoning || t.toolCalls?.length) && this.waiting) {
      this.waiting.remove();
      this.waiting = null;
    }
    if (t.reasoning) {
      if (!this.reasoning) {
        this.reasoning = new MarkdownView('reasoning-body');
        this.details = h('details', { class: 'reasoning', open: true }, h('summary', {}, 'Thinking…'), this.reasoning.el);
        this.body.el.before(this.details);
      }
      this.reasoning.update(t.reasoning);
      if (t.content) this.details!.querySelector('summary')!.textContent = 'Reasoning';
    }
    this.body.update(t.content);
    if (t.toolCalls?.length) {
      const view = toolCallsView(t);
      if (this.tools) this.tools.replaceWith(view);
      else this.body.el.after(view);
      this.tools = view;
    }
  }

  /** done ends streaming: the final render, the figures and the actions. */
  done(): void {
    this.caret?.remove();
    this.waiting?.remove();
    this.waiting = null;
    if (this.body) {
      if (this.reasoning && this.turn.reasoning) this.reasoning.finish(this.turn.reasoning);
      this.body.finish(this.turn.content);
      this.el.append(...this.footer());
    } else {
      this.showReply();
    }
  }

  private showReply(): void {
    const t = this.turn;
    const parts: Node[] = [this.who()];
    if (t.reasoning) {
      const r = new MarkdownView('reasoning-body');
      r.finish(t.reasoning);
      parts.push(h('details', { class: 'reasoning' }, h('summary', {}, 'Reasoning'), r.el));
    }
    const body = new MarkdownView('body markdown');
    body.finish(t.content);
    parts.push(body.el);
    if (t.toolCalls?.length) parts.push(toolCallsView(t));
    replace(this.el, ...parts, ...this.footer());
  }

  private footer(): Node[] {
    const t = this.turn;
    const note = finishNotes[t.finish ?? ''];
    const stats = statsLine(t.usage);
    const out: Node[] = [];
    if (note || stats) out.push(h('div', { class: 'turn-meta', 'data-testid': 'turn-meta' }, note ? h('span', { class: 'badge' }, note) : null, stats));
    const buttons: HTMLElement[] = [this.copyButton()];
    if (this.opts.last) buttons.push(h('button', { type: 'button', class: 'small ghost', 'data-action': 'regenerate', disabled: this.actions.busy(), onclick: () => this.actions.regenerate(this.index) }, 'Regenerate'));
    out.push(this.toolbar(...buttons));
    return out;
  }
}

function toolCallsView(t: Turn): HTMLElement {
  return h(
    'div',
    { class: 'tool-calls' },
    ...(t.toolCalls ?? []).map((tc) => {
      let args = tc.function.arguments;
      try {
        args = JSON.stringify(JSON.parse(args), null, 2);
      } catch {
        // Partial or not JSON: show as is.
      }
      return h('div', { class: 'tool-call' }, h('div', { class: 'tool-name' }, 'Tool call: ', h('code', {}, tc.function.name || '…')), h('pre', {}, args));
    }),
  );
}
