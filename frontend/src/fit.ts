// The Fit page: the memory equation for this machine, the verdict, and
// what-if controls (memory budget, context, sequences).

import { getJSON } from './api';
import { localOnlyNote } from './engine';
import { bytes, debounce, h, replace, type Page } from './util';

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
  cache_slots_per_layer: number;
  experts_per_layer: number;
  expert_layers: number;
  items: Item[];
  problem?: string;
  suggestion?: string;
}

interface PlanResponse {
  plan: Plan;
  machine_memory_bytes: number;
  max_context: number;
  model: string;
}

const GiB = 1024 ** 3;

export class FitPage implements Page {
  title = 'Fit';
  private out!: HTMLElement;
  private memory!: HTMLInputElement;
  private memoryOut!: HTMLOutputElement;
  private context!: HTMLSelectElement;
  private sequences!: HTMLInputElement;
  private machine = 0;
  private ctl = new AbortController();

  mount(root: HTMLElement): void {
    this.out = h('div', { class: 'fit-out', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Planning…'));
    this.memory = h('input', { type: 'range', id: 'fit-memory', min: 8, max: 192, step: 1, value: 32, 'aria-describedby': 'fit-memory-out' });
    this.memoryOut = h('output', { id: 'fit-memory-out', for: 'fit-memory' });
    this.context = h('select', { id: 'fit-context' });
    this.sequences = h('input', { type: 'number', id: 'fit-seq', min: 1, max: 64, value: 1 });
    const reset = h('button', { type: 'button', class: 'ghost', onclick: () => this.useMachine() }, 'This machine');
    const update = debounce(() => this.refresh(), 150);
    this.memory.addEventListener('input', () => {
      this.memoryOut.value = this.memory.value + ' GiB';
      update();
    });
    this.context.addEventListener('change', update);
    this.sequences.addEventListener('input', update);
    replace(
      root,
      h(
        'div',
        { class: 'page' },
        h('header', { class: 'page-head' }, h('h1', {}, 'Fit plan'), h('p', { class: 'muted' }, 'The memory equation of running the model on this machine, line by line. Change the budget or the context to see what fits.')),
        localOnlyNote('fit plan'),
        h(
          'section',
          { class: 'card controls', 'aria-label': 'What if' },
          h('div', { class: 'field' }, h('label', { for: 'fit-memory' }, 'Memory'), h('div', { class: 'range-row' }, this.memory, this.memoryOut, reset)),
          h('div', { class: 'field' }, h('label', { for: 'fit-context' }, 'Context (tokens per sequence)'), this.context),
          h('div', { class: 'field' }, h('label', { for: 'fit-seq' }, 'Sequences decoded together'), this.sequences),
        ),
        this.out,
      ),
    );
    this.first();
  }

  unmount(): void {
    this.ctl.abort();
  }

  private async first(): Promise<void> {
    try {
      const r = await getJSON<PlanResponse>('/ui/plan', this.ctl.signal);
      this.machine = r.machine_memory_bytes || r.plan.memory_bytes;
      const opts = [2048, 4096, 8192, 16384, 32768, 65536, 131072, 202752].filter((c) => c <= r.max_context);
      if (!opts.includes(r.max_context)) opts.push(r.max_context);
      replace(this.context, ...opts.map((c) => h('option', { value: c, selected: c === r.plan.context }, c.toLocaleString())));
      this.setMemory(r.plan.memory_bytes);
      this.show(r);
    } catch (e) {
      if (!this.ctl.signal.aborted) replace(this.out, h('p', { class: 'error' }, (e as Error).message));
    }
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
    const q = new URLSearchParams({ memory: this.memory.value + 'GiB', context: this.context.value, sequences: this.sequences.value || '1' });
    try {
      this.show(await getJSON<PlanResponse>('/ui/plan?' + q.toString(), this.ctl.signal));
    } catch (e) {
      if (!this.ctl.signal.aborted) replace(this.out, h('p', { class: 'error' }, (e as Error).message));
    }
  }

  private show(r: PlanResponse): void {
    const p = r.plan;
    const limit = p.memory_limit_bytes;
    const verdict = p.fits
      ? h('div', { class: 'verdict ok', 'data-testid': 'verdict' }, h('strong', {}, 'Fits.'), ` ${r.model} runs in ${bytes(p.planned_process_bytes)} of the ${bytes(limit)} limit, with ${p.cache_slots_per_layer} expert cache slots per layer (of ${p.experts_per_layer}).`)
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
      h('section', { class: 'card' }, h('h2', {}, 'Where the memory goes'), bar),
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
}
