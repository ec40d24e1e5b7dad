// The Model page: the pinned GLM-5.2 artifact, the disk preflight, and the
// download's progress (rate, ETA, pause/resume, verification), wired to
// the downloader through /ui/download and the "download" events.

import { getJSON, sendJSON } from './api';
import { events } from './events';
import { diskBytes, duration, h, percent, replace, type Page } from './util';
import type { Info } from './experts';

interface Preflight {
  volume: string;
  to_fetch: number;
  reserve: number;
  required: number;
  available: number;
  important: number;
  checked: boolean;
  ok: boolean;
  purge: boolean;
  message: string;
}

interface PlannedFile {
  path: string;
  size: number;
  status: 'complete' | 'partial' | 'missing';
  present: number;
  lfs: boolean;
}

interface DownloadPlan {
  repo: string;
  revision: string;
  commit: string;
  snapshot_dir: string;
  files: PlannedFile[];
  total_bytes: number;
  present_bytes: number;
  to_fetch: number;
  preflight: Preflight;
}

interface Progress {
  done: number;
  total: number;
  rate: number;
  eta_s: number;
  files_done: number;
  files_total: number;
  active?: Array<{ path: string; done: number; total: number; rate: number }>;
}

interface DownloadEvent {
  kind: string;
  state?: string;
  file?: string;
  message?: string;
  progress: Progress;
}

interface Status {
  repo: string;
  revision: string;
  cache_dir: string;
  disk?: { path?: string; available?: number; important?: number; total?: number; error?: string };
  planning: boolean;
  plan?: DownloadPlan;
  plan_error?: string;
  state: string;
  running: boolean;
  error?: string;
  last?: DownloadEvent;
}

export class ModelPage implements Page {
  title = 'Model';
  private root!: HTMLElement;
  private status: Status | null = null;
  private info: Info | null = null;
  private timer: number | undefined;
  private off: (() => void) | null = null;
  private verified = new Set<string>();
  private integrity: string[] = [];

  mount(root: HTMLElement): void {
    this.root = h('div', { class: 'page' });
    replace(root, this.root);
    this.off = events.on('download', (ev: DownloadEvent) => {
      if (ev.kind === 'file-done' && ev.file) this.verified.add(ev.file);
      if (ev.kind === 'integrity' && ev.file) this.integrity.push(`${ev.file}: ${ev.message ?? 'failed verification'}`);
      if (this.status) {
        this.status.last = ev;
        if (ev.state) this.status.state = ev.state;
        this.render();
      }
    });
    getJSON<Info>('/ui/info').then((i) => ((this.info = i), this.render())).catch(() => {});
    this.refresh();
    this.timer = window.setInterval(() => {
      if (this.status?.planning || this.status?.running) this.refresh();
    }, 1000);
  }

  unmount(): void {
    window.clearInterval(this.timer);
    this.off?.();
  }

  private async refresh(): Promise<void> {
    try {
      this.status = await getJSON<Status>('/ui/download');
    } catch (e) {
      replace(this.root, h('p', { class: 'error' }, (e as Error).message));
      return;
    }
    this.render();
  }

  private async act(action: string): Promise<void> {
    try {
      this.status = await sendJSON<Status>('POST', '/ui/download/' + action);
      this.render();
    } catch (e) {
      alert((e as Error).message);
    }
  }

  private render(): void {
    const s = this.status;
    if (!s) return;
    const short = s.revision.length > 12 ? s.revision.slice(0, 12) : s.revision;
    const local = this.info?.model;
    const head = h('header', { class: 'page-head' }, h('h1', {}, 'Model'), h('p', { class: 'muted' }, 'The model Spool serves, and the full GLM-5.2 artifact it can download.'));
    const serving = h(
      'section',
      { class: 'card' },
      h('h2', {}, 'Serving now'),
      local
        ? h('dl', { class: 'facts' }, fact('Model', local.name), fact('Directory', local.dir), fact('Layers', `${local.layers} (${local.sparse_layers.length} with routed experts)`), fact('Experts', `${local.experts} per layer, ${local.experts_per_token} per token`), fact('Context', local.context_length.toLocaleString() + ' tokens'))
        : h('p', { class: 'muted' }, 'Loading…'),
    );
    const artifact = h(
      'section',
      { class: 'card' },
      h('h2', {}, 'GLM-5.2 (Colibri int4, int8 MTP)'),
      h(
        'dl',
        { class: 'facts' },
        fact('Repository', h('a', { href: `https://huggingface.co/${s.repo}`, target: '_blank', rel: 'noreferrer' }, s.repo)),
        fact('Pinned revision', h('code', { title: s.revision }, short)),
        fact('Cache', s.cache_dir || '–'),
      ),
      this.preflightView(s),
      this.actions(s),
    );
    replace(this.root, head, serving, artifact, this.progressView(s));
  }

  private preflightView(s: Status): HTMLElement {
    const p = s.plan;
    if (!p) {
      const disk = s.disk;
      return h(
        'div',
        { class: 'preflight' },
        h('h3', {}, 'Disk'),
        disk && disk.available !== undefined
          ? h('dl', { class: 'facts' }, fact('Volume', disk.path ?? ''), fact('Available', diskBytes(disk.available)), disk.important && disk.important > disk.available ? fact('Counting purgeable', diskBytes(disk.important)) : null, fact('Capacity', diskBytes(disk.total ?? 0)))
          : h('p', { class: 'muted' }, disk?.error ?? 'Free space unknown.'),
        s.planning ? h('p', { class: 'muted' }, 'Listing the files on the hub…') : null,
        s.plan_error ? h('p', { class: 'error', 'data-testid': 'plan-error' }, 'Could not plan the download: ', s.plan_error) : null,
      );
    }
    const pf = p.preflight;
    const verdict = !pf.checked ? 'Free space not checked' : !pf.ok ? 'Not enough space' : pf.purge ? 'Fits once macOS frees purgeable space' : 'Enough space';
    return h(
      'div',
      { class: 'preflight' },
      h('h3', {}, 'Preflight'),
      h('div', { class: 'verdict ' + (pf.ok ? 'ok' : 'bad') }, h('strong', {}, verdict + '. '), pf.message),
      h(
        'dl',
        { class: 'facts grid' },
        fact('Files', `${p.files.length}`),
        fact('Total size', diskBytes(p.total_bytes)),
        fact('Already on disk', diskBytes(p.present_bytes)),
        fact('To fetch', diskBytes(pf.to_fetch)),
        fact('Reserve', diskBytes(pf.reserve)),
        fact('Needed', diskBytes(pf.required)),
        fact('Available', diskBytes(pf.available)),
        pf.important > pf.available ? fact('With purgeable', diskBytes(pf.important)) : null,
      ),
    );
  }

  private actions(s: Status): HTMLElement {
    const b = (label: string, action: string, cls = '') => h('button', { type: 'button', class: cls, onclick: () => this.act(action) }, label);
    const bar = h('div', { class: 'actions' });
    if (!s.plan) bar.append(b(s.planning ? 'Checking…' : 'Check plan and disk space', 'plan', 'primary'));
    else if (s.state === 'paused') bar.append(b('Resume', 'resume', 'primary'), b('Cancel', 'cancel', 'danger'));
    else if (s.running) bar.append(b('Pause', 'pause'), b('Cancel', 'cancel', 'danger'));
    else if (s.state !== 'done') bar.append(b(s.state === 'idle' ? 'Download' : 'Download again', 'start', 'primary'), b('Re-check', 'plan'));
    if (s.error) bar.append(h('p', { class: 'error' }, s.error));
    return bar;
  }

  private progressView(s: Status): HTMLElement | string {
    const ev = s.last;
    const plan = s.plan;
    if (!ev && !plan) return '';
    const p = ev?.progress ?? { done: plan!.present_bytes, total: plan!.total_bytes, rate: 0, eta_s: 0, files_done: plan!.files.filter((f) => f.status === 'complete').length, files_total: plan!.files.length };
    const frac = p.total > 0 ? p.done / p.total : 0;
    const files = plan?.files ?? [];
    return h(
      'section',
      { class: 'card' },
      h('h2', {}, 'Download'),
      h('div', { class: 'progress-head' }, h('strong', {}, stateLabel(s.state)), h('span', { class: 'muted' }, `${diskBytes(p.done)} of ${diskBytes(p.total)} · ${percent(frac, 1)}`)),
      h('progress', { max: 1, value: frac, 'aria-label': 'Download progress' }),
      h('dl', { class: 'facts grid' }, fact('Rate', p.rate > 0 ? diskBytes(p.rate) + '/s' : '–'), fact('Time left', duration(p.eta_s)), fact('Files verified', `${p.files_done} of ${p.files_total}`)),
      ...(p.active ?? []).map((a) => h('div', { class: 'file-row' }, h('code', {}, a.path), h('progress', { max: a.total || 1, value: a.done }), h('span', { class: 'muted' }, a.rate > 0 ? diskBytes(a.rate) + '/s' : ''))),
      this.integrity.length ? h('div', { class: 'error' }, h('strong', {}, 'Verification failures (fetched again): '), this.integrity.join('; ')) : null,
      files.length
        ? h(
            'details',
            {},
            h('summary', {}, `Files (${files.length})`),
            h(
              'table',
              { class: 'files' },
              h('thead', {}, h('tr', {}, h('th', {}, 'File'), h('th', { class: 'num' }, 'Size'), h('th', {}, 'State'))),
              h('tbody', {}, ...files.map((f) => h('tr', {}, h('td', {}, h('code', {}, f.path)), h('td', { class: 'num' }, diskBytes(f.size)), h('td', {}, this.verified.has(f.path) || f.status === 'complete' ? 'verified' : f.status)))),
            ),
          )
        : null,
    );
  }
}

function fact(k: string, v: Node | string): HTMLElement {
  return h('div', { class: 'fact' }, h('dt', {}, k), h('dd', {}, v));
}

function stateLabel(s: string): string {
  return ({ idle: 'Not started', downloading: 'Downloading', paused: 'Paused', done: 'Complete: every file verified', failed: 'Failed (progress kept)', cancelled: 'Cancelled (progress kept)' } as Record<string, string>)[s] ?? s;
}
