// The Fit page: the memory equation on this machine, line by line, for the
// pinned GLM-5.2 artifact (planned from its config and known formats,
// before anything is downloaded) or for the model being served; with
// what-if controls: memory, context (up to the model's limit) and
// sequences (by default the count the engine runs with).

import { getJSON } from './api';
import { localOnlyNote } from './engine';
import { bytes, debounce, diskBytes, h, replace, type Page } from './util';

interface Item {
  name: string;
  bytes: number;
  detail: string;
}

interface Plan {
  memory_bytes: number;
  os_reserve_bytes: number;
  memory_limit_bytes: number;
  planned_process_bytes: number;
  fits: boolean;
  context: number;
  sequences: number;
  prefill_segment: number;
  kv_cache: string;
  cache_slots_per_layer: number;
  experts_per_layer: number;
  expert_layers: number;
  source: string;
  items: Item[];
  problem?: string;
  suggestion?: string;
}

interface PromptTime {
  tokens: number;
  segments: number;
  read_bytes: number;
  read_seconds: number;
  compute_seconds: number;
  device: string;
  seconds: number;
}

interface Speed {
  machine?: string;
  decode_tokens_per_second?: number;
  prefill_tokens_per_second?: number;
  prefill_tokens?: number;
  agent_prompt?: PromptTime;
  expected_hit_rate?: number;
  decode_bound?: string;
  assumptions?: string[];
  unavailable?: string;
  no_probes?: boolean;
}

interface Chip {
  name: string;
}

interface PlanResponse {
  plan: Plan;
  machine_memory_bytes: number;
  max_context: number;
  model: string;
  served_model: string;
  routed_bytes: number;
  resident_bytes: number;
  server_context: number;
  server_sequences: number;
  server_kv_cache?: string;
  speed?: Speed;
  chips?: Chip[];
}

// The chip the speed falls back to when this machine has no probes yet.
const fallbackChip = 'M4 Pro';

const rate = (v: number) => (v >= 10 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toFixed(2));

// duration says seconds as seconds, minutes or hours.
const duration = (s: number) => (s < 120 ? `${Math.round(s)} s` : s < 7200 ? `${(s / 60).toFixed(1)} min` : `${(s / 3600).toFixed(1)} h`);

const GiB = 1024 ** 3;
const contexts = [2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576];

export class FitPage implements Page {
  title = 'Fit';
  private out!: HTMLElement;
  private memory!: HTMLInputElement;
  private memoryOut!: HTMLOutputElement;
  private context!: HTMLSelectElement;
  private sequences!: HTMLInputElement;
  private seqHint!: HTMLElement;
  private kv!: HTMLSelectElement;
  private chip!: HTMLSelectElement;
  private model = 'glm52';
  private pick!: HTMLElement;
  private machine = 0;
  private ctl = new AbortController();
  private noProbes = '';

  mount(root: HTMLElement): void {
    this.out = h('div', { class: 'fit-out', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Planning…'));
    this.memory = h('input', { type: 'range', id: 'fit-memory', min: 8, max: 192, step: 1, value: 32, 'aria-describedby': 'fit-memory-out' });
    this.memoryOut = h('output', { id: 'fit-memory-out', for: 'fit-memory' });
    this.context = h('select', { id: 'fit-context' });
    this.sequences = h('input', { type: 'number', id: 'fit-seq', min: 1, max: 64, value: 1, 'aria-describedby': 'fit-seq-hint' });
    this.seqHint = h('p', { class: 'hint', id: 'fit-seq-hint' });
    this.kv = h(
      'select',
      { id: 'fit-kv', 'aria-describedby': 'fit-kv-hint' },
      h('option', { value: 'f32' }, 'float32: exact'),
      h('option', { value: 'bf16' }, 'bfloat16: half the memory'),
    );
    this.pick = h('div', { class: 'segmented', role: 'radiogroup', 'aria-label': 'Model to plan' });
    this.chip = h('select', { id: 'fit-chip' }, h('option', { value: '' }, 'This machine (probed)'));
    const reset = h('button', { type: 'button', class: 'small', onclick: () => this.useMachine() }, 'This machine');
    const update = debounce(() => this.refresh(), 150);
    this.memory.addEventListener('input', () => {
      this.memoryOut.value = this.memory.value + ' GiB';
      update();
    });
    this.context.addEventListener('change', update);
    this.sequences.addEventListener('input', update);
    this.kv.addEventListener('change', update);
    this.chip.addEventListener('change', update);
    replace(
      root,
      h(
        'div',
        { class: 'page' },
        h('header', { class: 'page-head' }, h('h1', {}, 'Fit plan'), h('p', { class: 'muted' }, 'Does the model fit this machine? The memory equation of running it, line by line, before anything is downloaded. Change the budget, the context or the sequences to see what fits.')),
        localOnlyNote('fit plan'),
        h(
          'section',
          { class: 'card controls', 'aria-label': 'What if' },
          h('div', { class: 'field wide' }, h('span', { class: 'label', id: 'fit-model-label' }, 'Model'), this.pick),
          h('div', { class: 'field' }, h('label', { for: 'fit-memory' }, 'Memory'), h('div', { class: 'range-row' }, this.memory, this.memoryOut), h('div', {}, reset)),
          h('div', { class: 'field' }, h('label', { for: 'fit-context' }, 'Context (tokens per sequence)'), this.context),
          h('div', { class: 'field' }, h('label', { for: 'fit-seq' }, 'Sequences decoded together'), this.sequences, this.seqHint),
          h('div', { class: 'field' }, h('label', { for: 'fit-kv' }, 'KV cache'), this.kv, h('p', { class: 'hint', id: 'fit-kv-hint' }, 'bfloat16 holds twice the context in the same memory; its tokens may part from float32’s at a near-tie.')),
          h('div', { class: 'field' }, h('label', { for: 'fit-chip' }, 'Speed on'), this.chip),
        ),
        this.out,
      ),
    );
    this.first();
  }

  unmount(): void {
    this.ctl.abort();
  }

  private renderPick(served: string): void {
    const option = (id: string, label: string, note: string) => {
      const on = this.model === id;
      return h(
        'button',
        { type: 'button', role: 'radio', 'aria-checked': String(on), tabindex: on ? 0 : -1, class: on ? 'on' : '', 'data-model': id, onclick: () => this.choose(id) },
        h('span', {}, label),
        h('span', { class: 'muted small' }, note),
      );
    };
    replace(this.pick, option('glm52', 'GLM-5.2', 'the pinned artifact, before downloading'), option('served', served, 'the model being served'));
    this.pick.onkeydown = (e: KeyboardEvent) => {
      if (e.key === 'ArrowRight' || e.key === 'ArrowLeft' || e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        this.choose(this.model === 'glm52' ? 'served' : 'glm52');
        (this.pick.querySelector('[aria-checked=true]') as HTMLElement | null)?.focus();
      }
    };
  }

  private choose(model: string): void {
    if (model === this.model) return;
    this.model = model;
    this.first();
  }

  private async first(): Promise<void> {
    try {
      const q = new URLSearchParams({ model: this.model });
      if (this.chip.value) q.set('chip', this.chip.value);
      const r = await this.plan(q);
      this.machine = r.machine_memory_bytes || r.plan.memory_bytes;
      const opts = contexts.filter((c) => c <= r.max_context);
      for (const c of [r.max_context, r.plan.context]) if (!opts.includes(c)) opts.push(c);
      opts.sort((a, b) => a - b);
      replace(this.context, ...opts.map((c) => h('option', { value: c, selected: c === r.plan.context }, c.toLocaleString() + (c === r.max_context ? ' (the model’s limit)' : ''))));
      this.sequences.value = String(r.plan.sequences);
      this.kv.value = r.plan.kv_cache === 'bfloat16' ? 'bf16' : 'f32';
      this.seqHint.textContent = `The engine decodes ${r.server_sequences} sequences together (${r.server_context.toLocaleString()} tokens each).`;
      this.renderPick(r.served_model);
      this.setMemory(r.plan.memory_bytes);
      this.show(r);
    } catch (e) {
      if (!this.ctl.signal.aborted) replace(this.out, h('p', { class: 'error', role: 'alert' }, (e as Error).message));
    }
  }

  // plan fetches a plan; while this machine has no speed probes and no
  // chip is picked, it asks again for an Apple chip's published figures,
  // so that the page always says what speed to expect.
  private async plan(q: URLSearchParams): Promise<PlanResponse> {
    const r = await getJSON<PlanResponse>('/ui/plan?' + q.toString(), this.ctl.signal);
    if (this.chip.options.length === 1) for (const c of r.chips ?? []) this.chip.append(h('option', { value: c.name }, 'Apple ' + c.name + ' (published figures)'));
    if (q.has('chip') || !r.speed?.no_probes || !(r.chips ?? []).some((c) => c.name === fallbackChip)) return r;
    this.noProbes = r.speed.unavailable ?? '';
    this.chip.value = fallbackChip;
    q.set('chip', fallbackChip);
    return getJSON<PlanResponse>('/ui/plan?' + q.toString(), this.ctl.signal);
  }

  private useMachine(): void {
    this.setMemory(this.machine);
    this.refresh();
  }

  private setMemory(b: number): void {
    const g = Math.round(b / GiB);
    this.memory.max = String(Math.max(192, g));
    this.memory.value = String(g);
    this.memoryOut.value = g + ' GiB';
  }

  private async refresh(): Promise<void> {
    const q = new URLSearchParams({ model: this.model, memory: this.memory.value + 'GiB', context: this.context.value, sequences: this.sequences.value || '1', kv_cache: this.kv.value });
    if (this.chip.value) q.set('chip', this.chip.value);
    try {
      this.show(await this.plan(q));
    } catch (e) {
      if (!this.ctl.signal.aborted) replace(this.out, h('p', { class: 'error', role: 'alert' }, (e as Error).message));
    }
  }

  private show(r: PlanResponse): void {
    const p = r.plan;
    const limit = p.memory_limit_bytes;
    const streamed = `${p.cache_slots_per_layer} expert cache slots per layer (of ${p.experts_per_layer}); the rest of the ${bytes(r.routed_bytes)} of routed experts stream from the SSD`;
    const verdict = p.fits
      ? h('div', { class: 'verdict ok', 'data-testid': 'verdict' }, h('strong', {}, 'Fits.'), ` ${r.model} runs in ${bytes(p.planned_process_bytes)} of the ${bytes(limit)} limit with ${p.sequences} sequence${p.sequences === 1 ? '' : 's'} of ${p.context.toLocaleString()} tokens: ${streamed}.`)
      : h('div', { class: 'verdict bad', 'data-testid': 'verdict' }, h('strong', {}, 'Does not fit. '), p.problem ?? '', p.suggestion ? h('p', {}, p.suggestion) : null);
    const palette = ['--c1', '--c2', '--c3', '--c4', '--c5', '--c6', '--c7'];
    const scale = Math.max(limit, p.planned_process_bytes);
    const bar = h(
      'div',
      { class: 'stack', role: 'img', 'aria-label': `Planned ${bytes(p.planned_process_bytes)} of a ${bytes(limit)} limit` },
      ...p.items.map((it, i) => h('span', { class: 'seg', style: `width:${(100 * it.bytes) / scale}%;background:var(${palette[i % palette.length]})`, title: `${it.name}: ${bytes(it.bytes)}` })),
      h('span', { class: 'limit', style: `left:${(100 * limit) / scale}%`, title: 'limit' }),
    );
    const rows = p.items.map((it, i) =>
      h(
        'tr',
        {},
        h('th', { scope: 'row' }, h('span', { class: 'dot', style: `background:var(${palette[i % palette.length]})` }), it.name),
        h('td', { class: 'num' }, bytes(it.bytes)),
        h('td', { class: 'detail' }, it.detail),
      ),
    );
    const total = (label: string, b: number, note: string, cls = '') => h('tr', { class: cls }, h('th', { scope: 'row' }, label), h('td', { class: 'num' }, bytes(b)), h('td', { class: 'detail' }, note));
    replace(
      this.out,
      verdict,
      this.speedCard(r),
      h(
        'section',
        { class: 'card' },
        h('h2', {}, 'Where the memory goes'),
        bar,
        h('p', { class: 'muted small' }, `Weights: ${bytes(r.resident_bytes)} resident, ${bytes(r.routed_bytes)} (${diskBytes(r.routed_bytes)}) of routed experts on disk. Planned from ${p.source}.`),
      ),
      h(
        'section',
        { class: 'card' },
        h(
          'table',
          { class: 'plan', 'data-testid': 'plan-table' },
          h('caption', { class: 'sr-only' }, 'Memory plan line items'),
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Item'), h('th', { scope: 'col', class: 'num' }, 'Bytes'), h('th', { scope: 'col' }, 'What it is'))),
          h(
            'tbody',
            {},
            ...rows,
            total('Planned process', p.planned_process_bytes, 'sum of the items above', 'sum'),
            total('Limit', limit, 'memory minus the OS reserve'),
            total('OS reserve', p.os_reserve_bytes, 'left to the operating system and other apps'),
            total('Memory', p.memory_bytes, 'the budget planned against'),
          ),
        ),
      ),
    );
  }

  // speedCard is the predicted speed beside the memory plan: decode and
  // prefill tokens per second, on which figures, and the assumptions.
  private speedCard(r: PlanResponse): HTMLElement {
    const sp = r.speed;
    const head = h('h2', {}, 'Speed you can expect');
    if (!sp || sp.unavailable || sp.decode_tokens_per_second === undefined) {
      return h('section', { class: 'card', 'data-testid': 'speed' }, head, h('p', { class: 'muted' }, 'Not predicted: ' + (sp?.unavailable ?? 'no figures for this machine.')));
    }
    const note = !this.chip.value ? null : this.noProbes && this.chip.value === fallbackChip ? h('p', { class: 'muted small' }, `${this.noProbes} Meanwhile this is the prediction for an Apple ${fallbackChip}.`) : null;
    return h(
      'section',
      { class: 'card', 'data-testid': 'speed' },
      head,
      h(
        'p',
        { class: 'speed-figures' },
        h('strong', { 'data-testid': 'speed-decode' }, `${rate(sp.decode_tokens_per_second)} tokens/s`),
        ' decoding (writing the answer), ',
        h('strong', { 'data-testid': 'speed-prefill' }, `${rate(sp.prefill_tokens_per_second ?? 0)} tokens/s`),
        ` reading a ${(sp.prefill_tokens ?? 0).toLocaleString()}-token prompt, for ${r.model} with this plan on ${sp.machine}.`,
      ),
      this.agentLine(r),
      note,
      h('details', {}, h('summary', {}, 'What this assumes'), h('ul', { class: 'small' }, ...(sp.assumptions ?? []).map((a) => h('li', {}, a)))),
    );
  }

  // agentLine says how long a coding agent's first prompt takes to read:
  // its segments (each reads the routed experts it reaches once), the
  // reads and the products, and the time; or that the context is too
  // short for it.
  private agentLine(r: PlanResponse): HTMLElement {
    const a = r.speed?.agent_prompt;
    if (!a) {
      return h('p', { class: 'muted', 'data-testid': 'speed-agent' }, `A coding agent's 20,000-token first prompt does not fit a ${r.plan.context.toLocaleString()}-token context: choose a longer one to see how long it takes to read.`);
    }
    const segs = a.segments === 1 ? `in one segment of up to ${r.plan.prefill_segment.toLocaleString()} tokens, reading each routed expert once` : `in ${a.segments} segments of up to ${r.plan.prefill_segment.toLocaleString()} tokens, each reading the routed experts again`;
    return h(
      'p',
      { 'data-testid': 'speed-agent' },
      'A coding agent’s ',
      h('strong', {}, `${a.tokens.toLocaleString()}-token`),
      ' first prompt takes about ',
      h('strong', { 'data-testid': 'speed-agent-time' }, duration(a.seconds)),
      ` to read ${segs} (${diskBytes(a.read_bytes)} from the SSD: ${duration(a.read_seconds)}; the products on the ${a.device}: ${duration(a.compute_seconds)}).`,
    );
  }
}
