// Toasts (a short message with an optional action, such as Undo) and the
// confirmation dialog, in place of alert() and confirm().

import { h } from './util';

let region: HTMLElement | null = null;

function toasts(): HTMLElement {
  if (!region) {
    region = h('div', { class: 'toasts', role: 'status', 'aria-live': 'polite' });
    document.body.append(region);
  }
  return region;
}

/** toast shows message for ms; action, when given, is a button that runs
 * it and dismisses the toast. */
export function toast(message: string, action?: { label: string; run: () => void }, ms = 8000): () => void {
  const el = h('div', { class: 'toast' }, h('span', {}, message));
  const close = () => {
    window.clearTimeout(timer);
    el.remove();
  };
  if (action) {
    el.append(
      h('button', { type: 'button', class: 'small', onclick: () => (close(), action.run()) }, action.label),
    );
  }
  el.append(h('button', { type: 'button', class: 'icon', 'aria-label': 'Dismiss', onclick: close }, '×'));
  const timer = window.setTimeout(close, ms);
  toasts().append(el);
  return close;
}

/** confirmDialog asks a question in a modal dialog; it resolves true when
 * the user chose the confirming button. The safe choice has the focus. */
export function confirmDialog(opts: { title: string; body: string; confirm: string; cancel: string; danger?: boolean }): Promise<boolean> {
  return new Promise((done) => {
    const dlg = h('dialog', { class: 'dialog', 'aria-labelledby': 'dlg-title', 'aria-describedby': 'dlg-body' });
    const no = h('button', { type: 'button', value: 'no' }, opts.cancel);
    const yes = h('button', { type: 'button', value: 'yes', class: opts.danger ? 'danger' : 'primary' }, opts.confirm);
    dlg.append(h('h2', { id: 'dlg-title' }, opts.title), h('p', { id: 'dlg-body' }, opts.body), h('div', { class: 'actions' }, no, yes));
    const finish = (v: boolean) => {
      dlg.close();
      dlg.remove();
      done(v);
    };
    no.addEventListener('click', () => finish(false));
    yes.addEventListener('click', () => finish(true));
    dlg.addEventListener('cancel', (e) => (e.preventDefault(), finish(false)));
    document.body.append(dlg);
    dlg.showModal();
    no.focus();
  });
}
