// The Atlas page: experts placed by their topic mix (each topic an anchor
// on a circle, each expert at the p-weighted mean of the anchors), sized by
// use and made opaque by specialization, from experts.json.

import { getJSON } from './api';
import { cssVar, h, replace, type Page } from './util';

interface AtlasExpert {
  layer: number;
  expert: number;
  total: number;
  spec: number;
  top_topic: string;
  top_lift: number;
  reliability: string;
  p: Record<string, number>;
}

interface Provenance {
  model: string;
  model_config: string;
  tool: string;
  tool_version: string;
  date: string;
  method: string;
  prompts: Record<string, string[]>;
  min_count: number;
  min_runs: number;
  runs: number;
}

interface AtlasDoc {
  categories: string[];
  experts: AtlasExpert[];
  provenance?: Provenance;
}

/** topicColor is topic i's colour for the current theme (--topic-N). */
function topicColor(i: number): string {
  return cssVar(`--topic-${(i % 10) + 1}`) || '#2563eb';
}

export class AtlasPage implements Page {
  title = 'Atlas';
  private doc: AtlasDoc | null = null;
  private canvas!: HTMLCanvasElement;
  private tip!: HTMLElement;
  private layer!: HTMLSelectElement;
  private minSpec!: HTMLInputElement;
  private stretch = 1;
  private scaleNote = h('p', { class: 'muted small' });
  private detail = h('p', { class: 'muted heat-detail', 'aria-live': 'polite', 'data-testid': 'atlas-detail' }, 'Hover a point, or focus the map and use the arrow keys, for details.');
  private sel: AtlasExpert | null = null;
  private points: Array<{ x: number; y: number; r: number; e: AtlasExpert }> = [];
  private body!: HTMLElement;
  private ro: ResizeObserver | null = null;
  private onTheme = () => this.draw();
  private themeMQ = window.matchMedia('(prefers-color-scheme: dark)');

  mount(root: HTMLElement): void {
    this.body = h('div', {}, h('p', { class: 'muted' }, 'Loading the atlas…'));
    this.tip = h('div', { class: 'tooltip', role: 'tooltip', hidden: true });
    replace(
      root,
      h(
        'div',
        { class: 'page' },
        h('header', { class: 'page-head' }, h('h1', {}, 'Expert atlas'), h('p', { class: 'muted' }, 'What each routed expert works on: placed by its topic mix, larger when used more, more opaque when more specialized.')),
        this.body,
      ),
      this.tip,
    );
    document.addEventListener('spool-theme', this.onTheme);
    this.themeMQ.addEventListener('change', this.onTheme);
    this.load();
  }

  unmount(): void {
    this.ro?.disconnect();
    document.removeEventListener('spool-theme', this.onTheme);
    this.themeMQ.removeEventListener('change', this.onTheme);
  }

  private async load(): Promise<void> {
    let r: { source: string; atlas: AtlasDoc };
    try {
      r = await getJSON('/ui/atlas');
    } catch (e) {
      replace(this.body, h('p', { class: 'error' }, (e as Error).message));
      return;
    }
    this.doc = r.atlas;
    const doc = r.atlas;
    const layers = [...new Set(doc.experts.map((e) => e.layer))].sort((a, b) => a - b);
    this.layer = h('select', { id: 'atlas-layer' }, h('option', { value: '' }, 'All layers'), ...layers.map((l) => h('option', { value: l }, 'Layer ' + l)));
    this.minSpec = h('input', { type: 'range', id: 'atlas-spec', min: 0, max: 0.9, step: 0.05, value: 0 });
    const specOut = h('output', { for: 'atlas-spec' }, '0.00');
    this.layer.addEventListener('change', () => this.draw());
    this.minSpec.addEventListener('input', () => ((specOut.value = Number(this.minSpec.value).toFixed(2)), this.draw()));
    this.canvas = h('canvas', { class: 'atlas-canvas', 'data-testid': 'atlas', role: 'img', tabindex: 0, 'aria-label': `Expert atlas: ${doc.experts.length} experts over ${doc.categories.length} topics. Use the arrow keys to move between experts.`, 'aria-describedby': 'atlas-detail' });
    this.detail.id = 'atlas-detail';
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => (this.tip.hidden = true));
    this.canvas.addEventListener('keydown', (e) => this.onKey(e));
    this.canvas.addEventListener('focus', () => this.select(this.selectedIndex() >= 0 ? this.selectedIndex() : this.largest()));
    this.canvas.addEventListener('blur', () => {
      this.tip.hidden = true;
      this.draw();
    });
    const legend = h('div', { class: 'legend' }, ...doc.categories.flatMap((c, i) => [h('span', { class: 'swatch', style: `background:var(--topic-${(i % 10) + 1})` }), c]));
    const top = [...doc.experts].sort((a, b) => b.spec - a.spec || b.total - a.total).slice(0, 12);
    const pv = doc.provenance;
    replace(
      this.body,
      h(
        'section',
        { class: 'card' },
        h('div', { class: 'controls inline' }, h('div', { class: 'field' }, h('label', { for: 'atlas-layer' }, 'Layer'), this.layer), h('div', { class: 'field' }, h('label', { for: 'atlas-spec' }, 'Minimum specialization'), h('div', { class: 'range-row' }, this.minSpec, specOut))),
        legend,
        h('div', { class: 'atlas-wrap' }, this.canvas),
        this.detail,
        this.scaleNote,
      ),
      h(
        'section',
        { class: 'card' },
        h('h2', {}, 'Most specialized experts'),
        h(
          'table',
          { class: 'plan' },
          h('thead', {}, h('tr', {}, ...['Layer', 'Expert', 'Top topic', 'Spec', 'Lift', 'Reliability', 'Selections'].map((t) => h('th', { scope: 'col' }, t)))),
          h('tbody', {}, ...top.map((e) => h('tr', {}, h('td', {}, e.layer), h('td', {}, e.expert), h('td', {}, e.top_topic), h('td', { class: 'num' }, e.spec.toFixed(2)), h('td', { class: 'num' }, e.top_lift.toFixed(2) + '×'), h('td', {}, e.reliability), h('td', { class: 'num' }, e.total.toLocaleString())))),
        ),
      ),
      h(
        'section',
        { class: 'card' },
        h('h2', {}, 'Provenance'),
        pv
          ? h(
              'div',
              {},
              h('dl', { class: 'facts grid' }, ...[
                ['Model', pv.model],
                ['Probed', pv.date],
                ['Tool', `${pv.tool} ${pv.tool_version}`],
                ['Prompts', `${pv.runs} (${doc.categories.length} topics)`],
                ['Filters', `≥ ${pv.min_count} selections, fired on ≥ ${pv.min_runs} prompts of the top topic`],
                ['config.json sha256', pv.model_config.slice(0, 16) + '…'],
              ].map(([k, v]) => h('div', { class: 'fact' }, h('dt', {}, k), h('dd', {}, v)))),
              h('p', { class: 'muted' }, pv.method),
              h('details', {}, h('summary', {}, 'The prompts'), ...Object.entries(pv.prompts).map(([c, ps]) => h('div', {}, h('strong', {}, c), h('ul', {}, ...ps.map((p) => h('li', {}, p)))))),
            )
          : h('p', { class: 'muted' }, 'No provenance recorded.'),
        h('p', { class: 'muted small' }, 'Source: ', h('code', {}, r.source)),
      ),
    );
    this.ro = new ResizeObserver(() => this.draw());
    this.ro.observe(this.canvas.parentElement!);
    this.draw();
  }

  private draw(): void {
    const doc = this.doc;
    if (!doc || !this.canvas) return;
    const wrap = this.canvas.parentElement!;
    const W = Math.max(320, wrap.clientWidth);
    const H = Math.round(Math.min(640, Math.max(360, W * 0.62)));
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = W * dpr;
    this.canvas.height = H * dpr;
    this.canvas.style.width = W + 'px';
    this.canvas.style.height = H + 'px';
    const ctx = this.canvas.getContext('2d')!;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    const cx = W / 2;
    const cy = H / 2;
    const R = Math.min(W, H) / 2 - 48;
    const C = doc.categories.length;
    const anchors = doc.categories.map((_, i) => {
      const a = -Math.PI / 2 + (2 * Math.PI * i) / C;
      return [cx + R * Math.cos(a), cy + R * Math.sin(a)];
    });
    const fg = cssVar('--text') || '#222';
    const colours = doc.categories.map((_, i) => topicColor(i));
    const line = cssVar('--border') || '#ccc';
    ctx.strokeStyle = line;
    ctx.lineWidth = 1;
    ctx.beginPath();
    anchors.forEach(([x, y], i) => (i ? ctx.lineTo(x, y) : ctx.moveTo(x, y)));
    ctx.closePath();
    ctx.stroke();
    const layer = this.layer.value;
    const minSpec = Number(this.minSpec.value);
    const maxTotal = Math.max(1, ...doc.experts.map((e) => e.total));
    const maxSpec = Math.max(0.01, ...doc.experts.map((e) => e.spec));
    // Position: the offset of the expert's topic mix from an even mix,
    // mapped onto the anchors and stretched so that the most lopsided
    // expert reaches the rim (the arrangement is kept, the scale noted).
    const offset = (e: AtlasExpert): [number, number] => {
      let x = 0;
      let y = 0;
      doc.categories.forEach((c, i) => {
        const d = (e.p[c] ?? 0) - 1 / C;
        x += d * (anchors[i][0] - cx);
        y += d * (anchors[i][1] - cy);
      });
      return [x, y];
    };
    const reach = Math.max(1e-9, ...doc.experts.map((e) => Math.hypot(...offset(e))));
    this.stretch = (0.92 * R) / reach;
    this.points = [];
    const shown = doc.experts.filter((e) => (layer === '' || String(e.layer) === layer) && e.spec >= minSpec);
    // Least specialized first so specialists draw on top.
    shown.sort((a, b) => a.spec - b.spec);
    for (const e of shown) {
      const [ox, oy] = offset(e);
      const x = cx + ox * this.stretch;
      const y = cy + oy * this.stretch;
      const r = 2.5 + 9 * Math.sqrt(e.total / maxTotal);
      const ci = doc.categories.indexOf(e.top_topic);
      const colour = colours[ci < 0 ? 0 : ci];
      // Opacity carries specialization; the rim keeps the faintest
      // points visible on either theme.
      ctx.globalAlpha = 0.3 + 0.65 * (e.spec / maxSpec);
      ctx.fillStyle = colour;
      ctx.beginPath();
      ctx.arc(x, y, r, 0, 2 * Math.PI);
      ctx.fill();
      ctx.globalAlpha = 0.9;
      ctx.strokeStyle = colour;
      ctx.lineWidth = 1;
      ctx.stroke();
      this.points.push({ x, y, r, e });
    }
    ctx.globalAlpha = 1;
    const sel = this.points.find((p) => p.e === this.sel);
    if (sel && document.activeElement === this.canvas) {
      ctx.strokeStyle = fg;
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.arc(sel.x, sel.y, sel.r + 4, 0, 2 * Math.PI);
      ctx.stroke();
    }
    ctx.font = '600 13px system-ui, sans-serif';
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    anchors.forEach(([x, y], i) => {
      const dx = x - cx;
      const dy = y - cy;
      const d = Math.hypot(dx, dy) || 1;
      ctx.fillStyle = colours[i];
      ctx.beginPath();
      ctx.arc(x, y, 5, 0, 2 * Math.PI);
      ctx.fill();
      ctx.fillStyle = fg;
      ctx.fillText(doc.categories[i], x + (dx / d) * 26, y + (dy / d) * 18);
    });
    this.canvas.dataset.drawn = String(this.points.length);
    this.scaleNote.textContent = `Distance from the centre: how far an expert's topic mix is from an even mix, stretched ${this.stretch >= 10 ? Math.round(this.stretch) : this.stretch.toFixed(1)}× so that the most lopsided expert reaches the rim. Size: selections; opacity: specialization relative to the most specialized (spec ${maxSpec.toFixed(2)}).`;
  }

  private selectedIndex(): number {
    return this.points.findIndex((p) => p.e === this.sel);
  }

  /** largest is the most used point shown (where the keyboard starts). */
  private largest(): number {
    let best = -1;
    this.points.forEach((p, i) => {
      if (best < 0 || p.r > this.points[best].r) best = i;
    });
    return best;
  }

  /** onKey moves the selection to the nearest point in the arrow's
   * direction (Home and End: the first and last drawn). */
  private onKey(e: KeyboardEvent): void {
    const dirs: Record<string, [number, number]> = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
    let next = -1;
    if (e.key === 'Home') next = 0;
    else if (e.key === 'End') next = this.points.length - 1;
    else if (e.key === 'Escape') {
      this.tip.hidden = true;
      return;
    } else if (dirs[e.key]) {
      const at = this.selectedIndex();
      const cur = this.points[at];
      if (!cur) next = this.largest();
      else {
        const [dx, dy] = dirs[e.key];
        let best = Infinity;
        this.points.forEach((p, i) => {
          const along = (p.x - cur.x) * dx + (p.y - cur.y) * dy;
          if (i === at || along <= 0) return;
          const across = Math.abs((p.x - cur.x) * dy) + Math.abs((p.y - cur.y) * dx);
          const score = along + 2 * across;
          if (score < best) {
            best = score;
            next = i;
          }
        });
      }
    } else return;
    e.preventDefault();
    if (next >= 0) this.select(next);
  }

  private select(i: number): void {
    const p = this.points[i];
    if (!p) return;
    this.sel = p.e;
    this.draw();
    const r = this.canvas.getBoundingClientRect();
    this.showTip(p.e, r.left + p.x, r.top + p.y);
  }

  private describe(e: AtlasExpert): string {
    const mix = Object.entries(e.p)
      .filter(([, p]) => p >= 0.05)
      .sort((a, b) => b[1] - a[1])
      .map(([c, p]) => `${c} ${(p * 100).toFixed(0)}%`)
      .join(', ');
    return `Layer ${e.layer}, expert ${e.expert} · ${e.top_topic} (spec ${e.spec.toFixed(2)}, lift ${e.top_lift.toFixed(1)}×, fired ${e.reliability}) · ${mix}`;
  }

  private showTip(e: AtlasExpert, x: number, y: number): void {
    const text = this.describe(e);
    this.tip.textContent = text;
    this.detail.textContent = text;
    this.tip.hidden = false;
    this.tip.style.left = Math.max(8, Math.min(window.innerWidth - this.tip.offsetWidth - 8, x + 12)) + 'px';
    this.tip.style.top = y + 14 + 'px';
  }

  private hover(ev: MouseEvent): void {
    const r = this.canvas.getBoundingClientRect();
    const x = ev.clientX - r.left;
    const y = ev.clientY - r.top;
    let best: (typeof this.points)[number] | null = null;
    let bd = Infinity;
    for (const p of this.points) {
      const d = Math.hypot(p.x - x, p.y - y);
      if (d <= p.r + 3 && d < bd) {
        best = p;
        bd = d;
      }
    }
    if (!best) {
      this.tip.hidden = true;
      return;
    }
    this.showTip(best.e, ev.clientX, ev.clientY);
  }
}
