// Spool's web UI: a sidebar of sections and a hash router. Served by
// `spool serve` at "/" and by the desktop shell's webview.

import './style.css';
import { conn, connect, shell } from './api';
import { AtlasPage } from './atlas';
import { ChatPage } from './chat';
import { events } from './events';
import { ExpertsPage } from './experts';
import { FitPage } from './fit';
import { ModelPage } from './model';
import { applyTheme, SettingsPage, type Theme } from './settings';
import { h, replace, type Page } from './util';

const routes: Record<string, { label: string; icon: string; page: () => Page }> = {
  chat: { label: 'Chat', icon: 'M4 5h16v10H9l-5 4z', page: () => new ChatPage() },
  model: { label: 'Model', icon: 'M12 3v12m0 0-4-4m4 4 4-4M5 19h14', page: () => new ModelPage() },
  fit: { label: 'Fit', icon: 'M4 20V10m6 10V4m6 16v-7m4 7H2', page: () => new FitPage() },
  experts: { label: 'Experts', icon: 'M4 4h4v4H4zm6 0h4v4h-4zm6 0h4v4h-4zM4 10h4v4H4zm6 0h4v4h-4zm6 0h4v4h-4zM4 16h4v4H4zm6 0h4v4h-4zm6 0h4v4h-4z', page: () => new ExpertsPage() },
  atlas: { label: 'Atlas', icon: 'M12 3a9 9 0 1 0 0 18 9 9 0 0 0 0-18zm0 0v18M3 12h18', page: () => new AtlasPage() },
  settings: { label: 'Settings', icon: 'M12 8a4 4 0 1 0 0 8 4 4 0 0 0 0-8zm8 4h2M2 12h2m8-8V2m0 20v-2', page: () => new SettingsPage() },
};

let current: Page | null = null;
let main: HTMLElement;
const navLinks = new Map<string, HTMLAnchorElement>();
const statusDot = h('span', { class: 'dot-status', 'aria-hidden': 'true' });
const statusText = h('span', { class: 'status-text' }, 'Connecting…');
const shellBar = h('div', { class: 'shell-bar', hidden: true });

function icon(d: string): SVGSVGElement {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  const p = document.createElementNS('http://www.w3.org/2000/svg', 'path');
  p.setAttribute('d', d);
  svg.append(p);
  return svg;
}

function layout(): void {
  const nav = h('nav', { class: 'nav', 'aria-label': 'Sections' });
  for (const [id, r] of Object.entries(routes)) {
    const a = h('a', { href: '#/' + id, 'data-route': id }, icon(r.icon), h('span', {}, r.label));
    navLinks.set(id, a);
    nav.append(a);
  }
  main = h('main', { id: 'main', tabindex: -1 });
  const app = document.getElementById('app')!;
  replace(
    app,
    h(
      'div',
      { class: 'shell' },
      h(
        'aside',
        { class: 'sidebar' },
        h('div', { class: 'brand' }, h('img', { src: './favicon.svg', alt: '', width: 28, height: 28 }), h('span', {}, 'Spool')),
        nav,
        h('div', { class: 'engine-status', role: 'status', 'data-testid': 'engine-status' }, statusDot, statusText),
        shellBar,
      ),
      main,
    ),
  );
}

function route(): void {
  const id = (location.hash.replace(/^#\/?/, '').split(/[?/]/)[0] || 'chat') as string;
  const r = routes[id] ?? routes.chat;
  const key = routes[id] ? id : 'chat';
  current?.unmount?.();
  for (const [k, a] of navLinks) {
    if (k === key) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  current = r.page();
  document.title = `${current.title} · Spool`;
  main.dataset.page = key;
  current.mount(main);
}

function setStatus(state: string, detail = ''): void {
  statusDot.className = 'dot-status ' + state;
  statusText.textContent = detail || state;
  document.body.dataset.engine = state;
}

/** In the desktop app the engine can be stopped; offer to start it. */
async function pollShell(): Promise<void> {
  try {
    const s = await shell<{ state: string; detail?: string; progress?: number }>('status');
    if (s.state === 'stopped' || s.state === 'failed') {
      setStatus(s.state === 'failed' ? 'error' : 'stopped', s.state === 'failed' ? 'Model failed to start' : 'Model stopped');
      replace(shellBar, s.detail ? h('p', { class: 'small error' }, s.detail) : '', h('button', { type: 'button', class: 'primary small', onclick: () => shell('start').then(pollShell) }, 'Start model'));
      shellBar.hidden = false;
    } else if (s.state === 'loading') {
      setStatus('loading', `Loading… ${Math.round((s.progress ?? 0) * 100)}%`);
      shellBar.hidden = true;
    } else {
      shellBar.hidden = true;
    }
  } catch {
    // Not fatal: the status line keeps what the websocket said.
  }
}

async function start(): Promise<void> {
  applyTheme((localStorage.getItem('spool.theme') as Theme) ?? 'system');
  layout();
  await connect();
  events.on('connection', (up: boolean) => {
    if (!up) setStatus('offline', 'Engine not reachable');
  });
  events.on('state', (d: { state: string; tokens_per_second: number; model: string }) => {
    if (d.state === 'generating') setStatus('generating', `Generating · ${d.tokens_per_second.toFixed(1)} tok/s`);
    else setStatus('ready', `Ready · ${d.model}`);
  });
  events.start();
  if (conn.shell) {
    pollShell();
    window.setInterval(pollShell, 1500);
  }
  window.addEventListener('hashchange', route);
  route();
}

start();
