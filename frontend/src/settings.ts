// The Settings page: the engine's settings (saved on the machine, applied
// when the model next starts) and this page's own (API key, theme).

import { APIError, conn, getJSON, sendJSON, setKey } from './api';
import { enginePanel } from './engine';
import { events } from './events';
import { field, h, replace, type Page } from './util';

interface Settings {
  host: string;
  port: number;
  api_key: string;
  model_dir: string;
  memory: string;
  context: number;
  kv_cache?: string;
  hub_cache?: string;
}

interface SettingsResponse {
  settings: Settings;
  defaults: Settings;
  path: string;
  /** version names the saved file; a save sends it back (If-Match) so that
   * it is refused, not applied, when the file changed meanwhile. */
  version: string;
}

export type Theme = 'system' | 'light' | 'dark';

export function applyTheme(t: Theme): void {
  if (t === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
  document.dispatchEvent(new Event('spool-theme'));
}

export class SettingsPage implements Page {
  title = 'Settings';

  private root?: HTMLElement;
  /** loaded settles when the saved settings are shown. */
  private loaded: Promise<void> = Promise.resolve();

  mount(root: HTMLElement): void {
    this.root = root;
    const page = h('div', { class: 'page' });
    replace(root, page);
    const clientKey = h('input', { type: 'password', id: 'client-key', autocomplete: 'off', value: conn.key, placeholder: 'none' });
    const theme = h('select', { id: 'theme' }, ...(['system', 'light', 'dark'] as Theme[]).map((t) => h('option', { value: t, selected: (localStorage.getItem('spool.theme') ?? 'system') === t }, t[0].toUpperCase() + t.slice(1))));
    theme.addEventListener('change', () => {
      localStorage.setItem('spool.theme', theme.value);
      applyTheme(theme.value as Theme);
    });
    const clientNote = h('p', { class: 'muted', 'aria-live': 'polite' });
    const client = h(
      'form',
      {
        class: 'card form',
        onsubmit: (e: Event) => {
          e.preventDefault();
          setKey(clientKey.value.trim());
          events.reconnect();
          clientNote.textContent = 'Saved in this browser.';
        },
      },
      h('h2', {}, 'This window'),
      h('div', { class: 'form-grid' }, field('client-key', 'API key to use', clientKey, 'Needed only when the server was started with an API key.'), field('theme', 'Appearance', theme)),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Save')),
      clientNote,
    );
    const server = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
    replace(page, h('header', { class: 'page-head' }, h('h1', {}, 'Settings')), enginePanel(), server, client);
    this.loaded = this.loadServer(server);
  }

  private async loadServer(box: HTMLElement): Promise<void> {
    let r: SettingsResponse;
    try {
      r = await getJSON<SettingsResponse>('/ui/settings');
    } catch (e) {
      if (e instanceof APIError && e.code === 'settings_file_unusable') this.offerReset(box, e.message);
      else replace(box, h('p', { class: 'error' }, (e as Error).message));
      return;
    }
    let version = r.version;
    const s = r.settings;
    const d = r.defaults;
    const input = (id: string, value: string | number, attrs: Record<string, string | number> = {}) => h('input', { id, value: value || '', ...attrs });
    const host = input('set-host', s.host, { placeholder: d.host, autocomplete: 'off' });
    const port = input('set-port', s.port, { type: 'number', min: 1, max: 65535, placeholder: d.port });
    const key = input('set-key', s.api_key, { type: 'password', autocomplete: 'new-password', placeholder: 'none' });
    const dir = input('set-model', s.model_dir, { placeholder: 'the demo model', autocomplete: 'off' });
    const mem = input('set-memory', s.memory, { placeholder: "this machine's memory", autocomplete: 'off' });
    const ctx = input('set-context', s.context, { type: 'number', min: 256, step: 256, placeholder: d.context });
    const kv = h(
      'select',
      { id: 'set-kv-cache' },
      h('option', { value: 'f32', selected: (s.kv_cache || 'f32') === 'f32' }, 'float32: exact'),
      h('option', { value: 'bf16', selected: s.kv_cache === 'bf16' }, 'bfloat16: half the memory'),
    );
    const cache = input('set-cache', s.hub_cache ?? '', { placeholder: 'the Hugging Face cache', autocomplete: 'off' });
    const note = h('p', { class: 'muted', 'aria-live': 'polite' });
    const form = h(
      'form',
      {
        class: 'card form',
        onsubmit: async (e: Event) => {
          e.preventDefault();
          const next: Settings = {
            host: host.value.trim(),
            port: Number(port.value) || 0,
            api_key: key.value,
            model_dir: dir.value.trim(),
            memory: mem.value.trim(),
            context: Number(ctx.value) || 0,
            kv_cache: kv.value,
            hub_cache: cache.value.trim(),
          };
          try {
            const saved = await sendJSON<SettingsResponse>('PUT', '/ui/settings', next, { 'If-Match': `"${version}"` });
            version = saved.version;
            note.className = 'muted';
            note.textContent = conn.shell ? 'Saved. Stop and start the model from the menu bar to apply.' : 'Saved. Restart Spool to apply.';
          } catch (err) {
            note.className = 'error';
            if (err instanceof APIError && err.code === 'settings_changed') {
              // Another window or the menu bar saved meanwhile: show what is
              // saved now rather than write over it.
              await this.loadServer(box);
              const fresh = box.querySelector('[aria-live]');
              if (fresh) {
                fresh.className = 'error';
                fresh.textContent = 'The settings were changed elsewhere while you edited them; this is what is saved now. Make your change again.';
              }
              return;
            }
            if (err instanceof APIError && err.code === 'settings_file_unusable') {
              this.offerReset(box, err.message);
              return;
            }
            note.textContent = (err as Error).message;
          }
        },
      },
      h('h2', {}, 'Engine'),
      h('p', { class: 'muted small' }, 'Saved in ', h('code', {}, r.path), '.'),
      h(
        'div',
        { class: 'form-grid' },
        field('set-host', 'Bind address', host, '127.0.0.1 keeps Spool on this machine; any other address needs an API key.'),
        field('set-port', 'Port', port),
        field('set-key', 'API key', key, 'Clients send it as “Authorization: Bearer KEY”.'),
        field('set-model', 'Model directory', dir),
        field('set-memory', 'Memory budget', mem, 'For example 24GiB; empty plans against all of this machine’s memory.'),
        field('set-context', 'Context (tokens)', ctx),
        field('set-kv-cache', 'KV cache', kv, 'bfloat16 holds twice the context (or leaves the memory to the expert cache); its tokens may part from float32’s at a near-tie.'),
        field('set-cache', 'Download folder', cache, 'Where the GLM-5.2 download goes (357 GiB); empty is HF_HUB_CACHE or ~/.cache/huggingface/hub.'),
      ),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Save')),
      note,
    );
    replace(box, form);
  }

  /** offerReset explains a settings file that cannot be used and offers to
   * set it aside (it is renamed, not deleted) and start from the defaults. */
  private offerReset(box: HTMLElement, message: string): void {
    const note = h('p', { class: 'muted', 'aria-live': 'polite' });
    const button = h('button', { type: 'button', class: 'primary', 'data-testid': 'settings-reset' }, 'Reset settings');
    button.addEventListener('click', async () => {
      button.setAttribute('disabled', '');
      try {
        const r = await sendJSON<{ set_aside: string }>('POST', '/ui/settings/reset');
        // The whole page again: the engine panel read the same file.
        const root = this.root ?? box;
        this.mount(root);
        await this.loaded;
        const note = root.querySelector('#set-host')?.closest('form')?.querySelector('[aria-live]');
        if (note && r.set_aside) note.textContent = `The old file was kept as ${r.set_aside}.`;
      } catch (err) {
        button.removeAttribute('disabled');
        note.className = 'error';
        note.textContent = (err as Error).message;
      }
    });
    replace(
      box,
      h(
        'div',
        { class: 'card form', role: 'alert' },
        h('h2', {}, 'Engine'),
        h('p', { class: 'error' }, message),
        h('p', { class: 'muted' }, 'Reset sets this file aside (renamed next to it, nothing is deleted) and starts from the default settings.'),
        h('div', { class: 'actions' }, button),
        note,
      ),
    );
  }
}

