// Small DOM and formatting helpers shared by the pages.

type Attrs = Record<string, string | number | boolean | EventListener | null | undefined>;
type Child = Node | string | number | null | undefined | false;

/** h creates an element: attributes (on* become listeners), then children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2).toLowerCase(), v as EventListener);
    } else if (k === 'class') {
      el.className = String(v);
    } else if (v === true) {
      el.setAttribute(k, '');
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** replace swaps el's children. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, ...children);
}

/** field is a labelled form control with an optional hint under it. */
export function field(id: string, label: string, control: HTMLElement, hint?: string): HTMLElement {
  if (hint) control.setAttribute('aria-describedby', id + '-hint');
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hint ? h('p', { class: 'hint', id: id + '-hint' }, hint) : null);
}

const binaryUnits = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
const decimalUnits = ['B', 'kB', 'MB', 'GB', 'TB'];

/** bytes formats n in binary units (memory): "1.09 GiB". */
export function bytes(n: number): string {
  return scaled(n, 1024, binaryUnits);
}

/** diskBytes formats n in decimal units, as macOS shows disk sizes. */
export function diskBytes(n: number): string {
  return scaled(n, 1000, decimalUnits);
}

function scaled(n: number, base: number, units: string[]): string {
  if (!Number.isFinite(n)) return '–';
  let v = Math.abs(n);
  let i = 0;
  while (v >= base && i < units.length - 1) {
    v /= base;
    i++;
  }
  const s = i === 0 ? String(Math.round(v)) : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2);
  return (n < 0 ? '−' : '') + s + ' ' + units[i];
}

/** duration formats seconds as "1 h 05 min", "3 min 20 s" or "12 s". */
export function duration(s: number): string {
  if (!Number.isFinite(s) || s <= 0) return '–';
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = Math.round(s % 60);
  if (h > 0) return `${h} h ${String(m).padStart(2, '0')} min`;
  if (m > 0) return `${m} min ${String(sec).padStart(2, '0')} s`;
  return `${sec} s`;
}

export function percent(x: number, digits = 0): string {
  return (x * 100).toFixed(digits) + '%';
}

/** debounce delays fn until calls stop for ms. */
export function debounce<A extends unknown[]>(fn: (...a: A) => void, ms: number): (...a: A) => void {
  let t: number | undefined;
  return (...a: A) => {
    window.clearTimeout(t);
    t = window.setTimeout(() => fn(...a), ms);
  };
}

/** base64 decodes a Go []byte JSON value. */
export function base64Bytes(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** cssVar reads a custom property of the document (theme colours). */
export function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** A page mounts into the main element and cleans up on unmount. */
export interface Page {
  title: string;
  mount(root: HTMLElement): void;
  unmount?(): void;
}

/** Observable is a store that tells its listeners when it changed. */
export class Observable {
  private listeners = new Set<() => void>();

  /** on calls fn after every change; it returns the unsubscribe. */
  on(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  protected emit(): void {
    for (const fn of this.listeners) fn();
  }
}
