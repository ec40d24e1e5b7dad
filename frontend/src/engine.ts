// The engine: this Mac, or a server (vLLM, SGLang, another Spool) that
// Spool forwards to. This module keeps what the events say about it, words
// the sidebar's status while it is a server (remoteLine), gives the pages
// that describe the local engine (fit plan, heat map) a note saying so,
// and draws the Settings card that chooses the engine (GET/PUT
// /ui/engine, POST /ui/engine/check). The server's key is sent, never
// shown: the API only says whether one is saved.

import './engine.css';
import { conn, getJSON, sendJSON } from './api';
import { events } from './events';
import { field, h, replace } from './util';

export interface RemoteSummary {
  endpoint: string;
  reachable: boolean;
  latency_ms: number;
  error?: string;
}

interface RemoteStatus extends RemoteSummary {
  checked_at: string | null;
  models: { id: string; context_length?: number }[];
}

interface EngineView {
  engine: 'local' | 'remote';
  remote_url: string;
  remote_key_set: boolean;
  running?: { state: string; remote?: string };
  remote?: RemoteStatus;
  path: string;
}

/** remote is the server Spool forwards to, as the events last said; null
 * while the engine is this Mac. */
let remote: RemoteSummary | null = null;
let remoteModel = '';
const watchers = new Set<() => void>();

function set(next: RemoteSummary | null, model?: string): void {
  remote = next;
  if (model !== undefined) remoteModel = model;
  for (const w of [...watchers]) w();
}

events.on('hello', (d: any) => set(d?.engine === 'remote' ? d.remote : null, d?.engine === 'remote' ? d.id : ''));
events.on('state', (d: any) => {
  if (d?.engine === 'remote') set(d.remote, d.model);
});

export function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

/** remoteLine is the sidebar's status while Spool forwards to a server
 * (null for the local engine): which server, whether it answers, and the
 * last reply's rate from the server's usage. */
export function remoteLine(s: {
  engine?: string;
  state: string;
  model: string;
  remote?: RemoteSummary;
  last?: { decode_tokens_per_second: number };
}): { state: string; text: string } | null {
  if (s.engine !== 'remote' || !s.remote) return null;
  const where = `Server ${hostOf(s.remote.endpoint)}`;
  if (!s.remote.reachable) return { state: 'offline', text: `${where} not reachable` };
  if (s.state === 'generating') return { state: 'generating', text: `${where} · generating` };
  const rate = s.last && s.last.decode_tokens_per_second > 0 ? ` · last reply ${s.last.decode_tokens_per_second.toFixed(1)} tok/s` : '';
  return { state: 'ready', text: `${where} · ${s.model || 'ready'} · ${Math.round(s.remote.latency_ms)} ms${rate}` };
}

/** localOnlyNote is a note for a page about the local engine: shown while
 * Spool forwards to a server. */
export function localOnlyNote(what: string): HTMLElement {
  const note = h('p', { class: 'card remote-note', role: 'note', 'data-testid': 'remote-note', hidden: true });
  let seen = false;
  const update = (): void => {
    if (note.isConnected) seen = true;
    else if (seen) {
      watchers.delete(update);
      return;
    }
    note.hidden = remote === null;
    if (remote) {
      note.textContent = `Spool is forwarding to the server ${hostOf(remote.endpoint)}${remoteModel ? ` (${remoteModel})` : ''}: this ${what} describes the local engine on this Mac only, not the server.`;
    }
  };
  watchers.add(update);
  update();
  return note;
}

/** enginePanel is the Settings card: Engine: this Mac / a server. */
export function enginePanel(): HTMLElement {
  const box = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  load(box);
  return box;
}

async function load(box: HTMLElement): Promise<void> {
  let v: EngineView;
  try {
    v = await getJSON<EngineView>('/ui/engine');
  } catch (e) {
    replace(box, h('p', { class: 'error' }, (e as Error).message));
    return;
  }
  const radio = (value: string, label: string) =>
    h('label', { class: 'choice' }, h('input', { type: 'radio', name: 'engine-kind', value, id: 'engine-' + value, checked: v.engine === value }), ' ', label);
  const url = h('input', { id: 'engine-url', type: 'text', inputmode: 'url', value: v.remote_url, placeholder: 'http://gpu-box:8000', autocomplete: 'off', spellcheck: 'false' });
  const key = h('input', { id: 'engine-key', type: 'password', autocomplete: 'new-password', placeholder: v.remote_key_set ? 'saved (type to replace)' : 'none' });
  const clearKey = h('label', { class: 'choice small' }, h('input', { type: 'checkbox', id: 'engine-clear-key' }), ' Forget the saved key');
  clearKey.hidden = !v.remote_key_set;
  const check = h('p', { class: 'muted', 'aria-live': 'polite', 'data-testid': 'engine-check' });
  const note = h('p', { class: 'muted', 'aria-live': 'polite' });
  const kind = (): string => (box.querySelector<HTMLInputElement>('input[name=engine-kind]:checked')?.value ?? 'local');
  const keyField = (): string | undefined => {
    if ((clearKey.querySelector('input') as HTMLInputElement).checked) return '';
    return key.value === '' ? undefined : key.value;
  };
  const serverFields = h(
    'div',
    { class: 'form-grid' },
    field('engine-url', 'Server URL', url, 'The OpenAI-compatible base URL of vLLM or SGLang (see docs/remote.md).'),
    h('div', { class: 'field' }, h('label', { for: 'engine-key' }, 'Server API key'), key, clearKey, h('p', { class: 'hint' }, 'The --api-key the server was started with. It stays in the settings file and is sent to the server only.')),
  );
  const sync = (): void => {
    serverFields.hidden = kind() !== 'remote';
  };
  const running = v.running?.remote ? `Now forwarding to ${hostOf(v.running.remote)}.` : v.running ? 'Now running on this Mac.' : '';
  const form = h(
    'form',
    {
      class: 'card form',
      'data-testid': 'engine-form',
      onchange: sync,
      onsubmit: async (e: Event) => {
        e.preventDefault();
        const body: Record<string, string> = { engine: kind(), remote_url: url.value.trim() };
        const k = keyField();
        if (k !== undefined) body.remote_key = k;
        try {
          const saved = await sendJSON<EngineView>('PUT', '/ui/engine', body);
          key.value = '';
          key.placeholder = saved.remote_key_set ? 'saved (type to replace)' : 'none';
          (clearKey.querySelector('input') as HTMLInputElement).checked = false;
          clearKey.hidden = !saved.remote_key_set;
          note.className = 'muted';
          note.textContent = conn.shell ? 'Saved. Stop and start the model from the menu bar (or choose the engine there) to apply.' : 'Saved. Restart Spool to apply.';
        } catch (err) {
          note.className = 'error';
          note.textContent = (err as Error).message;
        }
      },
    },
    h('h2', {}, 'Where replies come from'),
    h('p', { class: 'muted small' }, running),
    h('div', { class: 'choices', role: 'radiogroup', 'aria-label': 'Engine' }, radio('local', 'This Mac'), radio('remote', 'A server (vLLM, SGLang)')),
    serverFields,
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'submit', class: 'primary' }, 'Save'),
      h(
        'button',
        {
          type: 'button',
          class: 'ghost',
          'data-testid': 'engine-test',
          onclick: async () => {
            check.className = 'muted';
            check.textContent = 'Asking the server…';
            const body: Record<string, string> = { remote_url: url.value.trim() };
            const k = keyField();
            if (k) body.remote_key = k;
            try {
              const st = await sendJSON<RemoteStatus>('POST', '/ui/engine/check', body);
              if (st.reachable) {
                const m = st.models[0];
                check.textContent = `Reachable · ${Math.round(st.latency_ms)} ms · ${st.models.map((x) => x.id).join(', ')}${m?.context_length ? ` (${m.context_length.toLocaleString()} tokens of context)` : ''}`;
              } else {
                check.className = 'error';
                check.textContent = st.error ?? 'The server does not answer.';
              }
            } catch (err) {
              check.className = 'error';
              check.textContent = (err as Error).message;
            }
          },
        },
        'Test connection',
      ),
    ),
    check,
    note,
  );
  replace(box, form);
  sync();
}
