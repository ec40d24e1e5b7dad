// The Experts page: the live heat map of the routed-expert tier.

import { getJSON } from './api';
import { localOnlyNote } from './engine';
import { events } from './events';
import { HeatMap, TIER_DISK, TIER_LRU, TIER_PINNED, tierNames, usageLevel, type Palette, type Shape } from './heatmap';
import { base64Bytes, cssVar, h, percent, replace, type Page } from './util';

export interface ModelInfo {
  dir: string;
  name: string;
  layers: number;
  sparse_layers: number[];
  mtp_layer: number;
  experts: number;
  experts_per_token: number;
  context_length: number;
}

export interface Info {
  version: string;
  model?: ModelInfo;
  model_error?: string;
}

interface TierStats {
  Turn?: { Hits: number; Misses: number; BytesRead: number };
  Total?: { Hits: number; Misses: number; BytesRead: number };
  Pinned?: number;
  Cached?: number;
  LRUSlots?: number;
}

/** shapeOf lays out rows for a model: sparse layers, then MTP. */
export function shapeOf(m: ModelInfo, rows: number): Shape {
  const labels = m.sparse_layers.map((l) => 'L' + l);
  if (rows > labels.length && m.mtp_layer >= 0) labels.push('MTP');
  while (labels.length < rows) labels.push('R' + labels.length);
  return { rows, cols: m.experts, rowLabels: labels.slice(0, rows) };
}

/** The real GLM-5.2 shape: 75 sparse layers (3..77) + MTP, 256 experts. */
export const glm52Shape: Shape = {
  rows: 76,
  cols: 256,
  rowLabels: [...Array.from({ length: 75 }, (_, i) => 'L' + (i + 3)), 'MTP'],
};

function rgb(v: string, fallback: [number, number, number]): [number, number, number] {
  const m = v.match(/^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i);
  return m ? [parseInt(m[1], 16), parseInt(m[2], 16), parseInt(m[3], 16)] : fallback;
}

export function themePalette(): Palette {
  return {
    background: rgb(cssVar('--surface'), [255, 255, 255]),
    cold: rgb(cssVar('--heat-cold'), [230, 232, 238]),
    tiers: [rgb(cssVar('--heat-disk'), [110, 116, 135]), rgb(cssVar('--heat-lru'), [37, 99, 235]), rgb(cssVar('--heat-pinned'), [217, 119, 6])],
    flash: rgb(cssVar('--heat-flash'), [255, 60, 120]),
  };
}

/** The engine's GPU status (/stats "gpu"): prefill runs on the device when active. */
interface GPUStatus {
  mode: string;
  active: boolean;
  device?: { name: string; type: string };
  reason?: string;
}

export class ExpertsPage implements Page {
  title = 'Experts';
  private map: HeatMap | null = null;
  private offs: Array<() => void> = [];
  private poll: number | undefined;
  private sim: number | undefined;
  private summary!: HTMLElement;
  private tip!: HTMLElement;
  private detail!: HTMLElement;
  private wrap!: HTMLElement;
  private legend!: HTMLElement;
  private legendMax = -1;
  private lastState = 'ready';
  private tiers: TierStats | null = null;
  private gpu: GPUStatus | null = null;
  private ro: ResizeObserver | null = null;
  private themeMQ = window.matchMedia('(prefers-color-scheme: dark)');
  private onTheme = () => this.map?.setPalette(themePalette());

  mount(root: HTMLElement): void {
    this.summary = h('div', { class: 'heat-summary', 'aria-live': 'polite' });
    this.tip = h('div', { class: 'tooltip', role: 'tooltip', hidden: true });
    this.detail = h('p', { class: 'muted heat-detail' }, 'Hover a cell, or focus the grid and use the arrow keys, for details.');
    this.wrap = h('div', { class: 'heat-wrap' });
    this.legend = h('div', { class: 'heat-legend', 'data-testid': 'heat-legend' });
    this.renderLegend();
    replace(
      root,
      h(
        'div',
        { class: 'page' },
        h('header', { class: 'page-head' }, h('h1', {}, 'Expert heat map'), h('p', { class: 'muted' }, 'Every routed expert of every MoE layer: where it lives, how much it is used, and which ones the current turn hits.')),
        localOnlyNote('heat map'),
        h('section', { class: 'card' }, this.summary, this.legend, this.wrap, this.detail),
      ),
      this.tip,
    );
    this.themeMQ.addEventListener('change', this.onTheme);
    document.addEventListener('spool-theme', this.onTheme);
    const simulate = new URLSearchParams(location.hash.split('?')[1] ?? '').get('simulate');
    if (simulate) {
      this.build(simulate === 'glm52' ? glm52Shape : { rows: 6, cols: 64, rowLabels: ['L1', 'L2', 'L3', 'L4', 'L5', 'MTP'] });
      this.simulate();
      return;
    }
    this.load();
  }

  unmount(): void {
    this.map?.stop();
    this.offs.forEach((f) => f());
    window.clearInterval(this.poll);
    window.clearInterval(this.sim);
    this.ro?.disconnect();
    this.themeMQ.removeEventListener('change', this.onTheme);
    document.removeEventListener('spool-theme', this.onTheme);
  }

  private async load(): Promise<void> {
    let info: Info;
    try {
      info = await getJSON<Info>('/ui/info');
    } catch (e) {
      replace(this.wrap, h('p', { class: 'error' }, 'Cannot reach the engine: ' + (e as Error).message));
      return;
    }
    if (!info.model) {
      replace(this.wrap, h('p', { class: 'error' }, info.model_error ?? 'No model.'));
      return;
    }
    const model = info.model;
    // The first map tells the row count (the MTP row is there when streamed).
    const first = await this.fetchStats();
    if (!first?.map) {
      replace(
        this.wrap,
        h('p', { class: 'muted', 'data-testid': 'no-telemetry' }, 'This engine keeps every routed expert resident in memory, so there is no streamed-tier telemetry to draw. The desktop app and `spool app` run the streamed tier and show the live map.'),
      );
      return;
    }
    const mapLen = base64Bytes(first.map).length;
    const rows = Math.round(mapLen / model.experts);
    this.build(shapeOf(model, rows));
    this.apply(first.map, first.hits);
    this.offs.push(
      events.on('experts', (d: { map?: string; hits?: string }) => this.apply(d.map, d.hits)),
      events.on('state', (d: { state: string }) => {
        // A turn starts when the engine leaves ready (queued, reading the
        // prompt or generating).
        if (d.state !== 'ready' && this.lastState === 'ready') this.map?.resetTurn();
        this.lastState = d.state;
        this.renderSummary();
      }),
    );
    // Without the websocket, poll /stats.
    this.poll = window.setInterval(() => {
      if (!events.connected) this.fetchStats().then((s) => s && this.apply(s.map, s.hits));
    }, 1000);
  }

  private async fetchStats(): Promise<{ map?: string; hits?: string } | null> {
    try {
      const s = await getJSON<{ experts?: { map?: string; hits?: string }; tiers?: TierStats; gpu?: GPUStatus }>('/stats');
      this.tiers = s.tiers ?? null;
      this.gpu = s.gpu ?? null;
      return s.experts ?? null;
    } catch {
      return null;
    }
  }

  private apply(map?: string, hits?: string): void {
    if (!this.map) return;
    this.map.update(map ? base64Bytes(map) : null, hits ? base64Bytes(hits) : null);
    this.wrap.dataset.updates = String(this.map.updates);
    this.renderSummary();
  }

  private build(shape: Shape): void {
    const m = new HeatMap(shape, themePalette());
    this.map = m;
    const c = m.canvas;
    c.tabIndex = 0;
    c.setAttribute('role', 'img');
    c.setAttribute('aria-label', `Heat map of ${shape.rows} layers × ${shape.cols} experts (${shape.rows * shape.cols} cells). Use the arrow keys to inspect cells.`);
    c.dataset.testid = 'heatmap';
    c.dataset.cells = String(shape.rows * shape.cols);
    // The map itself, for checks of what it draws.
    (c as HTMLCanvasElement & { heatmap?: HeatMap }).heatmap = m;
    replace(this.wrap, c);
    this.ro = new ResizeObserver(() => m.layout(this.wrap.clientWidth));
    this.ro.observe(this.wrap);
    m.layout(this.wrap.clientWidth || 800);
    c.addEventListener('mousemove', (e) => {
      const r = c.getBoundingClientRect();
      this.hover(m.cellAt(e.clientX - r.left, e.clientY - r.top), e.clientX, e.clientY);
    });
    c.addEventListener('mouseleave', () => this.hover(-1, 0, 0));
    c.addEventListener('keydown', (e) => {
      const { rows, cols } = shape;
      let i = m.hover < 0 ? 0 : m.hover;
      const moves: Record<string, number> = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -cols, ArrowDown: cols };
      if (!(e.key in moves)) return;
      e.preventDefault();
      i = Math.max(0, Math.min(rows * cols - 1, i + moves[e.key]));
      const rc = m.cellRect(i);
      const br = c.getBoundingClientRect();
      this.hover(i, br.left + rc.x + rc.w, br.top + rc.y + rc.h);
    });
    c.addEventListener('blur', () => this.hover(-1, 0, 0));
    m.start();
    this.renderSummary();
  }

  private hover(i: number, x: number, y: number): void {
    const m = this.map;
    if (!m) return;
    m.hover = i;
    m.markDirty();
    if (i < 0) {
      this.tip.hidden = true;
      return;
    }
    const ci = m.cellInfo(i);
    const layer = m.shape.rowLabels[ci.row];
    const use = ci.heat === 0 ? 'never used' : ci.heat === 1 ? 'used once' : `used ${2 ** (ci.heat - 1)}–${2 ** ci.heat - 1} times`;
    const text = `${layer === 'MTP' ? 'MTP layer' : 'Layer ' + layer.slice(1)}, expert ${ci.col} · ${tierNames[ci.tier]} · ${use}${ci.hitThisTurn ? ' · hit this turn' : ''}`;
    this.tip.textContent = text;
    this.detail.textContent = text;
    this.tip.hidden = false;
    const tw = this.tip.offsetWidth;
    this.tip.style.left = Math.min(window.innerWidth - tw - 8, x + 12) + 'px';
    this.tip.style.top = y + 14 + 'px';
  }

  /** renderLegend draws the usage scale of each tier with the colours
   * the grid uses (usageLevel between the cold colour and the tier's). */
  private renderLegend(): void {
    const maxHeat = this.map?.maxHeat ?? 1;
    if (maxHeat === this.legendMax) return;
    this.legendMax = maxHeat;
    const most = maxHeat <= 1 ? 'once' : `${(2 ** (maxHeat - 1)).toLocaleString()}+ times`;
    const ramp = (cls: string, tier: number, name: string) => {
      const stops = [0, 0.25, 0.5, 0.75, 1].map((f) => {
        const level = f === 0 ? usageLevel(tier, 0, maxHeat) : usageLevel(tier, Math.max(1, Math.round(f * maxHeat)), maxHeat);
        return `color-mix(in srgb, var(--heat-${cls}) ${(level * 100).toFixed(0)}%, var(--heat-cold)) ${(f * 100).toFixed(0)}%`;
      });
      return h('div', { class: 'ramp-row' }, h('span', { class: 'ramp-name' }, name), h('span', { class: 'ramp', style: `background: linear-gradient(to right, ${stops.join(', ')})`, 'aria-hidden': 'true' }));
    };
    replace(
      this.legend,
      h('div', { class: 'ramps' }, ramp('disk', TIER_DISK, 'On disk'), ramp('lru', TIER_LRU, 'In the LRU cache'), ramp('pinned', TIER_PINNED, 'Pinned')),
      h('div', { class: 'ramp-scale muted small' }, h('span', {}, 'never used'), h('span', {}, `used ${most} (log scale)`)),
      h('div', { class: 'legend' }, h('span', { class: 'swatch outline', 'aria-hidden': 'true' }), 'outlined: hit in the last second'),
    );
  }

  private renderSummary(): void {
    const m = this.map;
    if (!m) return;
    this.renderLegend();
    const [disk, lru, pinned] = m.tierCounts();
    const items: Array<[string, string]> = [
      ['Experts', m.cells.toLocaleString()],
      ['On disk', disk.toLocaleString()],
      ['In LRU', lru.toLocaleString()],
      ['Pinned', pinned.toLocaleString()],
      ['Hit this turn', m.turnHitCount().toLocaleString()],
    ];
    const t = this.tiers?.Total;
    if (t && t.Hits + t.Misses > 0) items.push(['Hit rate', percent(t.Hits / (t.Hits + t.Misses), 1)]);
    items.push(['Updates', m.updates.toLocaleString()]);
    if (this.gpu) items.push(['Prefill', this.gpu.active && this.gpu.device ? `GPU · ${this.gpu.device.name}` : 'CPU']);
    replace(this.summary, ...items.map(([k, v]) => h('div', { class: 'stat' }, h('span', { class: 'stat-label' }, k), h('span', { class: 'stat-value' }, v))));
  }

  /** simulate feeds synthetic updates at 10 per second (a rendering check
   * at the real model's size; no engine needed). */
  private simulate(): void {
    const m = this.map!;
    const n = m.cells;
    const map = new Uint8Array(n);
    let seed = 12345;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    for (let i = 0; i < n; i++) {
      const r = rnd();
      const heat = Math.floor(r * r * 20);
      const tier = r > 0.93 ? 2 : r > 0.6 ? 1 : 0;
      map[i] = (tier << 6) | heat;
    }
    const tick = () => {
      const hits = new Uint8Array(Math.ceil(n / 8));
      for (let row = 0; row < m.shape.rows; row++) {
        for (let k = 0; k < 8; k++) {
          const i = row * m.shape.cols + Math.floor(rnd() * m.shape.cols);
          hits[i >> 3] |= 1 << (i & 7);
          map[i] = (map[i] & 0xc0) | Math.min(63, (map[i] & 63) + (rnd() < 0.2 ? 1 : 0));
          if ((map[i] >> 6) === 0 && rnd() < 0.5) map[i] = (1 << 6) | (map[i] & 63);
        }
      }
      m.update(map, hits);
      this.wrap.dataset.updates = String(m.updates);
      this.renderSummary();
    };
    tick();
    this.sim = window.setInterval(tick, 100);
  }
}
