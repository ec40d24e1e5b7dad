// Spool's web UI: a sidebar of sections and a hash router (#/chat,
// #/model, ...). Served by `spool serve` at "/" and by the desktop shell's
// webview.

import './style.css';
import { conn, connect, getJSON, shell, shellStatus } from './api';
import { AtlasPage } from './atlas';
import { ChatPage } from './chat';
import { downloads, downloadSummary } from './downloads';
import { events } from './events';
import { ExpertsPage } from './experts';
import { FitPage } from './fit';
import { wireLinks } from './links';
import { ModelPage } from './model';
import { applyTheme, SettingsPage, type Theme } from './settings';
import { engine } from './status';
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
let currentKey = '';
let main: HTMLElement;
const navLinks = new Map<string, HTMLAnchorElement>();
const statusDot = h('span', { class: 'dot-status', 'aria-hidden': 'true' });
const statusText = h('span', { class: 'status-text' }, 'Connecting…');
const shellBar = h('div', { class: 'shell-bar', hidden: true });
const downloadLink = h('a', { class: 'dl-indicator', href: '#/model', hidden: true, 'data-testid': 'download-indicator' });
/** shellState is the desktop shell's engine state when it is not serving. */
let shellState: { state: string; text: string } | null = null;

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
    // The label stays in the accessibility tree when a narrow window
    // shows only the icon.
    const a = h('a', { href: '#/' + id, 'data-route': id, title: r.label }, icon(r.icon), h('span', { class: 'nav-label' }, r.label));
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
        h('div', { class: 'brand' }, h('img', { src: './favicon.svg', alt: '', width: 28, height: 28 }), h('span', { class: 'brand-name' }, 'Spool')),
        nav,
        downloadLink,
        h('div', { class: 'engine-status', role: 'status', 'data-testid': 'engine-status' }, statusDot, statusText),
        shellBar,
      ),
      main,
    ),
  );
}

function route(): void {
  const hash = location.hash;
  // "#main" and other in-page anchors are not routes.
  if (hash && !hash.startsWith('#/') && current) return;
  const id = hash.replace(/^#\/?/, '').split(/[?/]/)[0] || 'chat';
  const key = routes[id] ? id : 'chat';
  current?.unmount?.();
  for (const [k, a] of navLinks) {
    if (k === key) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  current = routes[key].page();
  currentKey = key;
  document.title = `${current.title} · Spool`;
  main.dataset.page = key;
  current.mount(main);
  showDownload();
}

function showStatus(): void {
  const s = shellState ?? engine.line();
  statusDot.className = 'dot-status ' + s.state;
  statusText.textContent = s.text;
  document.body.dataset.engine = s.state;
}

/** showDownload is the sidebar's note of a download running while the
 * Model page is not shown. */
function showDownload(): void {
  const d = downloadSummary();
  downloadLink.hidden = !d || currentKey === 'model';
  if (!d) return;
  downloadLink.setAttribute('aria-label', d.label);
  replace(downloadLink, h('span', { class: 'dl-text', 'aria-hidden': 'true' }, d.short), h('progress', { max: 1, value: d.fraction, 'aria-hidden': 'true' }));
}

interface ShellStatus {
  state: string;
  detail?: string;
  progress?: number;
  version: number;
}

/** In the desktop app the engine can be stopped; offer to start it. The
 * page follows the shell's state: each answer waits until it changes. */
async function followShell(): Promise<void> {
  let version: number | undefined;
  for (;;) {
    try {
      const s = await shellStatus<ShellStatus>(version);
      version = s.version;
      showShell(s);
    } catch {
      version = undefined;
      shellState = null;
      showStatus();
      await new Promise((resolve) => window.setTimeout(resolve, 1500));
    }
  }
}

/** pollShell reads the shell's state once (after a start). */
async function pollShell(): Promise<void> {
  try {
    showShell(await shellStatus<ShellStatus>());
  } catch {
    shellState = null;
    showStatus();
  }
}

/** showShell shows the shell's state: a stopped or failed engine offers
 * to start, a loading one its progress. */
function showShell(s: ShellStatus): void {
  if (s.state === 'stopped' || s.state === 'failed') {
    shellState = s.state === 'failed' ? { state: 'error', text: 'Model failed to start' } : { state: 'stopped', text: 'Model stopped' };
    replace(shellBar, s.detail ? h('p', { class: 'small error' }, s.detail) : '', h('button', { type: 'button', class: 'primary small', onclick: () => shell('start').then(pollShell) }, 'Start model'));
    shellBar.hidden = false;
  } else if (s.state === 'loading') {
    shellState = { state: 'loading', text: `Loading… ${Math.round((s.progress ?? 0) * 100)}%` };
    shellBar.hidden = true;
  } else {
    shellState = null;
    shellBar.hidden = true;
  }
  showStatus();
}

async function start(): Promise<void> {
  applyTheme((localStorage.getItem('spool.theme') as Theme) ?? 'system');
  layout();
  wireLinks();
  await connect();
  engine.on(showStatus);
  downloads.on(showDownload);
  events.start();
  if (conn.shell) followShell();
  getJSON('/ui/download').then((s) => downloads.set(s as never), () => {});
  window.addEventListener('hashchange', route);
  route();
}

start();
