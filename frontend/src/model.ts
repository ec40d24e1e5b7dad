// The Model page: the model being served, and the pinned GLM-5.2 artifact's
// download as a state machine: plan and check the disk (another folder can
// be chosen; the originals can be kept for other tools), download with
// pause, resume and a confirmed cancel — packed as it downloads, so the
// model takes about three quarters of its size — and once every file is
// verified and packed, load it.

import { conn, getJSON, sendJSON, shell } from './api';
import { downloads, type DownloadStatus } from './downloads';
import type { Info } from './experts';
import { confirmDialog } from './notice';
import { bytes, diskBytes, duration, h, percent, replace, type Page } from './util';

/** Phase is what the user can do next. */
type Phase = 'unplanned' | 'planning' | 'plan-error' | 'no-space' | 'ready' | 'downloading' | 'paused' | 'done';

function phaseOf(s: DownloadStatus): Phase {
  if (s.state === 'done' && s.model_dir) return 'done';
  if (s.running) return s.state === 'paused' ? 'paused' : 'downloading';
  if (s.planning) return 'planning';
  if (!s.plan) return s.plan_error ? 'plan-error' : 'unplanned';
  if (!s.plan.preflight.ok) return 'no-space';
  return 'ready';
}

/** size shows a download size both ways: 357 GiB (384 GB). */
function size(n: number): string {
  return `${bytes(n)} (${diskBytes(n)})`;
}

export class ModelPage implements Page {
  title = 'Model';
  private root!: HTMLElement;
  private serving!: HTMLElement;
  private artifact!: HTMLElement;
  private progress!: HTMLElement;
  private message!: HTMLElement;
  private info: Info | null = null;
  private timer: number | undefined;
  private off: (() => void) | null = null;
  private shown = '';
  private choosing = false;
  private loading = false;
  private bar: { state: HTMLElement; amount: HTMLElement; meter: HTMLProgressElement; rate: HTMLElement; eta: HTMLElement; files: HTMLElement; packed: HTMLElement; active: HTMLElement } | null = null;

  mount(root: HTMLElement): void {
    this.serving = h('section', { class: 'card' }, h('h2', {}, 'Serving now'), h('p', { class: 'muted' }, 'Loading…'));
    this.artifact = h('section', { class: 'card', 'aria-labelledby': 'artifact-title' });
    this.progress = h('section', { class: 'card', 'aria-labelledby': 'progress-title', hidden: true });
    this.message = h('p', { class: 'error', role: 'alert', 'data-testid': 'download-error' });
    this.root = h(
      'div',
      { class: 'page' },
      h('header', { class: 'page-head' }, h('h1', {}, 'Model'), h('p', { class: 'muted' }, 'The model Spool serves, and the full GLM-5.2 artifact it can download.')),
      this.serving,
      this.artifact,
      this.progress,
    );
    replace(root, this.root);
    this.off = downloads.on(() => this.render());
    getJSON<Info>('/ui/info').then(
      (i) => ((this.info = i), this.renderServing(), this.render(true)),
      (e) => replace(this.serving, h('h2', {}, 'Serving now'), h('p', { class: 'error' }, (e as Error).message)),
    );
    this.refresh();
    this.timer = window.setInterval(() => {
      const s = downloads.status;
      if (s?.planning || s?.running) this.refresh();
    }, 1000);
  }

  unmount(): void {
    window.clearInterval(this.timer);
    this.off?.();
  }

  private async refresh(): Promise<void> {
    try {
      downloads.set(await getJSON<DownloadStatus>('/ui/download'));
    } catch (e) {
      replace(this.artifact, h('h2', { id: 'artifact-title' }, 'GLM-5.2'), h('p', { class: 'error', role: 'alert' }, (e as Error).message));
    }
  }

  private async act(action: string, body?: unknown): Promise<void> {
    this.message.textContent = '';
    try {
      downloads.set(await sendJSON<DownloadStatus>('POST', '/ui/download/' + action, body));
    } catch (e) {
      this.message.textContent = (e as Error).message;
    }
  }

  private async cancel(): Promise<void> {
    const ok = await confirmDialog({
      title: 'Cancel the download?',
      body: 'The bytes already downloaded stay on disk: downloading again later resumes from them.',
      confirm: 'Cancel download',
      cancel: 'Keep downloading',
      danger: true,
    });
    if (ok) await this.act('cancel');
  }

  private async load(): Promise<void> {
    this.loading = true;
    this.render(true);
    await this.act('load');
    if (this.message.textContent) {
      this.loading = false;
      this.render(true);
    }
  }

  private renderServing(): void {
    const local = this.info?.model;
    replace(
      this.serving,
      h('h2', {}, 'Serving now'),
      local
        ? h('dl', { class: 'facts' }, fact('Model', local.name), fact('Directory', h('code', {}, local.dir)), fact('Layers', `${local.layers} (${local.sparse_layers.length} with routed experts)`), fact('Experts', `${local.experts} per layer, ${local.experts_per_token} per token`), fact('Context', local.context_length.toLocaleString() + ' tokens'))
        : h('p', { class: 'error' }, this.info?.model_error ?? 'No model.'),
    );
  }

  /** render shows the state; the artifact card is built again only when
   * the phase changes (buttons keep their focus), the progress figures
   * update in place. */
  private render(force = false): void {
    const s = downloads.status;
    if (!s) return;
    const phase = phaseOf(s);
    const key = [phase, s.plan?.commit, s.plan?.to_fetch, s.plan?.preflight.ok, s.cache_dir, s.keep_original, s.plan_error, s.error, this.choosing, this.loading].join('|');
    if (force || key !== this.shown) {
      const hadFocus = this.artifact.contains(document.activeElement);
      this.shown = key;
      this.renderArtifact(s, phase);
      if (hadFocus) (this.artifact.querySelector('.actions button:not([disabled])') as HTMLElement | null)?.focus();
    }
    this.renderProgress(s, phase);
  }

  private renderArtifact(s: DownloadStatus, phase: Phase): void {
    const short = s.revision.length > 12 ? s.revision.slice(0, 12) : s.revision;
    replace(
      this.artifact,
      h('h2', { id: 'artifact-title' }, 'GLM-5.2 (Colibri int4, int8 MTP)'),
      h(
        'dl',
        { class: 'facts' },
        fact('Repository', h('a', { href: `https://huggingface.co/${s.repo}` }, s.repo)),
        fact('Pinned revision', h('code', { title: s.revision }, short)),
        s.plan ? fact('Download', size(s.plan.total_bytes)) : null,
        s.plan ? fact('On disk', storedText(s.plan)) : null,
      ),
      this.folderView(s, phase),
      this.preflightView(s, phase),
      this.actions(s, phase),
      this.message,
      s.plan?.files.length ? this.filesView(s) : null,
    );
  }

  private folderView(s: DownloadStatus, phase: Phase): HTMLElement {
    const disk = s.disk;
    const kind = s.keep_original ? 'the Hugging Face cache' : "Spool's store";
    const where = s.cache_source === 'settings' ? `chosen in Spool, as ${kind}` : s.keep_original ? 'the Hugging Face cache (HF_HUB_CACHE)' : "Spool's store";
    const busy0 = phase === 'downloading' || phase === 'paused' || phase === 'planning';
    const keep = h('input', { type: 'checkbox', id: 'keep-original', checked: s.keep_original, disabled: busy0 }) as HTMLInputElement;
    keep.addEventListener('change', () => this.act('keep', { keep: keep.checked }));
    const box = h(
      'div',
      { class: 'folder' },
      h('h3', {}, 'Download folder'),
      h('p', { class: 'folder-path' }, h('code', { 'data-testid': 'cache-dir' }, s.cache_dir || '–'), ' ', h('span', { class: 'muted' }, `· ${where}`)),
      disk && disk.available !== undefined
        ? h('p', { class: 'muted small' }, `${diskBytes(disk.available)} free of ${diskBytes(disk.total ?? 0)} on ${disk.path ?? 'this volume'}`, disk.important && disk.important > disk.available ? ` (${diskBytes(disk.important)} counting purgeable space)` : '')
        : h('p', { class: 'muted small' }, disk?.error ?? 'Free space unknown.'),
      h('div', { class: 'field check' }, keep, h('label', { for: 'keep-original' }, 'Keep the original files for other tools')),
      h('p', { class: 'muted small', 'data-testid': 'keep-original-cost' }, keepCost(s)),
    );
    const busy = busy0;
    if (this.choosing && !busy) {
      const input = h('input', { type: 'text', id: 'folder-input', value: s.cache_dir, autocomplete: 'off', spellcheck: 'false' });
      const use = () => {
        this.choosing = false;
        this.act('folder', { dir: input.value.trim() });
      };
      input.addEventListener('keydown', (e) => e.key === 'Enter' && (e.preventDefault(), use()));
      box.append(
        h('div', { class: 'field' }, h('label', { for: 'folder-input' }, 'Folder on a disk with room for the download'), input),
        h('div', { class: 'actions' }, h('button', { type: 'button', class: 'primary', onclick: use }, 'Use this folder'), h('button', { type: 'button', onclick: () => ((this.choosing = false), this.render(true)) }, 'Cancel')),
      );
      queueMicrotask(() => input.focus());
    }
    return box;
  }

  private async chooseFolder(): Promise<void> {
    if (conn.shell) {
      try {
        const r = await shell<{ dir: string }>('choose-folder');
        if (r.dir) await this.act('folder', { dir: r.dir });
        return;
      } catch {
        // No native dialog: type the path.
      }
    }
    this.choosing = true;
    this.render(true);
  }

  private preflightView(s: DownloadStatus, phase: Phase): HTMLElement | null {
    const p = s.plan;
    if (phase === 'planning') return h('p', { class: 'muted', role: 'status' }, 'Listing the files on the hub…');
    if (phase === 'plan-error') return h('p', { class: 'error', role: 'alert', 'data-testid': 'plan-error' }, 'Could not plan the download: ', s.plan_error ?? '');
    // Once a download runs, its progress tells the rest.
    if (!p || phase === 'done' || phase === 'downloading' || phase === 'paused') return null;
    const pf = p.preflight;
    const verdict = !pf.checked ? 'Free space not checked' : !pf.ok ? 'Not enough space' : pf.purge ? 'Fits once macOS frees purgeable space' : 'Enough space';
    return h(
      'div',
      { class: 'preflight' },
      h('h3', {}, 'Preflight'),
      h('div', { class: 'verdict ' + (pf.ok ? 'ok' : 'bad'), 'data-testid': 'preflight-verdict' }, h('strong', {}, verdict + '. '), pf.message.charAt(0).toUpperCase() + pf.message.slice(1) + '.'),
      h(
        'dl',
        { class: 'facts grid' },
        fact('Files', `${p.files.length}`),
        fact('Total size', size(p.total_bytes)),
        fact('Already on disk', diskBytes(p.present_bytes)),
        fact('To fetch', diskBytes(pf.to_fetch)),
        pf.stored !== undefined && pf.stored !== pf.to_fetch ? fact('Stored', diskBytes(pf.stored)) : null,
        fact('Reserve', diskBytes(pf.reserve)),
        fact('Needed', diskBytes(pf.required)),
        fact('Available', diskBytes(pf.available)),
        pf.important > pf.available ? fact('With purgeable', diskBytes(pf.important)) : null,
      ),
    );
  }

  private actions(s: DownloadStatus, phase: Phase): HTMLElement {
    const b = (label: string, run: () => void, cls = '') => h('button', { type: 'button', class: cls, onclick: run }, label);
    const bar = h('div', { class: 'actions', 'data-testid': 'download-actions' });
    const folder = b('Choose another folder…', () => this.chooseFolder());
    const check = b('Check again', () => this.act('plan'));
    switch (phase) {
      case 'unplanned':
        bar.append(b('Check plan and disk space', () => this.act('plan'), 'primary'), folder);
        break;
      case 'planning':
        bar.append(h('button', { type: 'button', class: 'primary', disabled: true }, 'Checking…'));
        break;
      case 'plan-error':
        bar.append(b('Try again', () => this.act('plan'), 'primary'), folder);
        break;
      case 'no-space':
        bar.append(folder, check);
        break;
      case 'ready':
        bar.append(b(s.plan && s.plan.present_bytes > 0 ? 'Resume download' : 'Download', () => this.act('start'), 'primary'), check, folder);
        break;
      case 'downloading':
        bar.append(b('Pause', () => this.act('pause')), b('Cancel download…', () => this.cancel(), 'danger-outline'));
        break;
      case 'paused':
        bar.append(b('Resume', () => this.act('resume'), 'primary'), b('Cancel download…', () => this.cancel(), 'danger-outline'));
        break;
      case 'done': {
        const serving = this.info?.model?.dir === s.model_dir;
        if (serving) bar.append(h('p', { class: 'ok-text' }, 'GLM-5.2 is the model being served.'));
        else if (this.loading) bar.append(h('button', { type: 'button', class: 'primary', disabled: true }, 'Loading GLM-5.2…'), h('p', { class: 'muted', role: 'status' }, 'The engine restarts on the downloaded model; the chat reconnects when it is ready.'));
        else bar.append(b('Load GLM-5.2', () => this.load(), 'primary'), h('p', { class: 'muted small' }, 'Serves it from ', h('code', {}, s.model_dir ?? ''), ' (saved in the settings).'));
        break;
      }
    }
    if (s.error && phase !== 'downloading' && phase !== 'paused') bar.append(h('p', { class: 'error', role: 'alert' }, 'The download stopped: ', s.error, ' Downloaded bytes are kept.'));
    return bar;
  }

  private filesView(s: DownloadStatus): HTMLElement {
    const files = s.plan!.files;
    return h(
      'details',
      { class: 'files-list' },
      h('summary', {}, `Files (${files.length})`),
      h(
        'table',
        { class: 'files' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'File'), h('th', { scope: 'col', class: 'num' }, 'Size'), h('th', { scope: 'col' }, 'State'))),
        h('tbody', {}, ...files.map((f) => h('tr', {}, h('td', {}, h('code', {}, f.path)), h('td', { class: 'num' }, diskBytes(f.size)), h('td', {}, downloads.verified.has(f.path) || f.status === 'complete' ? 'verified' : f.status)))),
      ),
    );
  }

  /** renderProgress updates the progress card in place. */
  private renderProgress(s: DownloadStatus, phase: Phase): void {
    const plan = s.plan;
    const ev = s.last;
    this.progress.hidden = !plan || phase === 'no-space' || phase === 'planning' || (phase === 'ready' && plan.present_bytes === 0 && !ev);
    if (this.progress.hidden || !plan) return;
    if (!this.bar) {
      this.bar = {
        state: h('strong', { 'data-testid': 'download-state' }),
        amount: h('span', { class: 'muted' }),
        meter: h('progress', { max: 1, value: 0, 'aria-label': 'Download progress' }),
        rate: h('dd', { 'data-testid': 'download-rate' }),
        eta: h('dd', { 'data-testid': 'download-eta' }),
        files: h('dd', {}),
        packed: h('dd', { 'data-testid': 'download-packed' }),
        active: h('div', { class: 'active-files' }),
      };
      const b = this.bar;
      replace(
        this.progress,
        h('h2', { id: 'progress-title' }, 'Download'),
        h('div', { class: 'progress-head' }, b.state, b.amount),
        b.meter,
        h('dl', { class: 'facts grid' }, h('div', { class: 'fact' }, h('dt', {}, 'Rate'), b.rate), h('div', { class: 'fact' }, h('dt', {}, 'Time left'), b.eta), h('div', { class: 'fact' }, h('dt', {}, 'Files verified'), b.files), h('div', { class: 'fact' }, h('dt', {}, 'Packed'), b.packed)),
        b.active,
      );
    }
    const b = this.bar;
    const p = phase === 'done' ? { done: plan.total_bytes, total: plan.total_bytes, rate: 0, eta_s: 0, files_done: plan.files.length, files_total: plan.files.length } : (ev?.progress ?? { done: plan.present_bytes, total: plan.total_bytes, rate: 0, eta_s: 0, files_done: plan.files.filter((f) => f.status === 'complete').length, files_total: plan.files.length });
    const frac = p.total > 0 ? p.done / p.total : 0;
    const moving = phase === 'downloading';
    b.state.textContent = stateLabel(phase, s.state);
    b.amount.textContent = `${diskBytes(p.done)} of ${diskBytes(p.total)} · ${percent(frac, 1)}`;
    b.meter.value = frac;
    // A paused, stopped or finished download has no rate and no time left.
    b.rate.textContent = moving && p.rate > 0 ? diskBytes(p.rate) + '/s' : '–';
    b.eta.textContent = moving && p.eta_s > 0 ? duration(p.eta_s) : '–';
    b.files.textContent = `${p.files_done} of ${p.files_total}`;
    b.packed.textContent = packedText(s);
    const active = moving ? (p as { active?: Array<{ path: string; done: number; total: number; rate: number }> }).active ?? [] : [];
    replace(b.active, ...active.map((a) => h('div', { class: 'file-row' }, h('code', {}, a.path), h('progress', { max: a.total || 1, value: a.done, 'aria-label': `${a.path} progress` }), h('span', { class: 'muted' }, a.rate > 0 ? diskBytes(a.rate) + '/s' : ''))));
    if (downloads.integrity.length) b.active.append(h('p', { class: 'error' }, h('strong', {}, 'Verification failures (fetched again): '), downloads.integrity.join('; ')));
  }
}

function fact(k: string, v: Node | string): HTMLElement {
  return h('div', { class: 'fact' }, h('dt', {}, k), h('dd', {}, v));
}

function stateLabel(phase: Phase, state: string): string {
  switch (phase) {
    case 'downloading':
      return 'Downloading';
    case 'paused':
      return 'Paused';
    case 'done':
      return 'Complete: every file verified and packed';
  }
  return ({ failed: 'Stopped by an error (progress kept)', cancelled: 'Cancelled (progress kept)' } as Record<string, string>)[state] ?? 'Not complete';
}

/** storedText is what the model will take on disk, and how. */
function storedText(p: NonNullable<DownloadStatus['plan']>): string {
  const e = p.estimate;
  if (!e || !e.from) return `${diskBytes(p.total_bytes)} (stored as downloaded)`;
  const how = e.measured ? 'measured on the shards packed so far' : `experts assumed to pack to ${e.ratio.toFixed(2)} of their size`;
  return p.keep_original
    ? `about ${diskBytes(e.stored_keeping_original)}: the original files, plus their packs (${how})`
    : `about ${diskBytes(e.stored)}, packed as it downloads (${how})`;
}

/** keepCost says what keeping the original files costs on disk. */
function keepCost(s: DownloadStatus): string {
  const e = s.plan?.estimate;
  if (!e || !e.from) {
    return s.keep_original
      ? 'The downloaded files stay as they are in the Hugging Face cache, where other tools read them; Spool keeps packs of their experts beside them.'
      : 'Spool packs the model as it downloads and keeps it in its own store.';
  }
  const extra = e.stored_keeping_original - e.stored;
  return s.keep_original
    ? `The downloaded files stay in the Hugging Face cache for other tools, and Spool keeps packs of the experts beside them: about ${diskBytes(e.stored_keeping_original)} on disk, ${diskBytes(extra)} more than packed alone.`
    : `Off: Spool packs the model as it downloads, about ${diskBytes(e.stored)} on disk in its own store; keeping the originals too takes ${diskBytes(extra)} more.`;
}

/** packedText is how far packing got. */
function packedText(s: DownloadStatus): string {
  const pk = s.last?.pack?.shards ? s.last.pack : s.pack;
  if (!pk || pk.shards === 0) return '–';
  const ratio = pk.raw_bytes > 0 ? ` at ${(pk.packed_bytes / pk.raw_bytes).toFixed(2)}` : '';
  return `${pk.done} of ${pk.shards} shards${ratio} · ${diskBytes(pk.disk_bytes)} on disk`;
}
