// The download of the pinned GLM-5.2 artifact as the UI knows it: the
// status from /ui/download, kept current by the "download" events, for the
// Model page and the sidebar's indicator on every other page.

import { events } from './events';
import { diskBytes, Observable, percent } from './util';

export interface Preflight {
  volume: string;
  to_fetch: number;
  /** stored is what the files to fetch will take on the volume (packed as they arrive), stored_why says how. */
  stored: number;
  stored_why?: string;
  reserve: number;
  required: number;
  available: number;
  important: number;
  checked: boolean;
  ok: boolean;
  purge: boolean;
  message: string;
}

export interface PlannedFile {
  path: string;
  size: number;
  status: 'complete' | 'partial' | 'missing';
  present: number;
  lfs: boolean;
}

/** Estimate is what the model will take on disk (engine/pull). */
export interface Estimate {
  download: number;
  stored: number;
  stored_keeping_original: number;
  expert_bytes: number;
  dense_bytes: number;
  ratio: number;
  measured: boolean;
  from: string;
}

/** PackProgress is how far packing got (engine/pull). */
export interface PackProgress {
  shards: number;
  done: number;
  raw_bytes: number;
  packed_bytes: number;
  shard?: string;
  disk_bytes: number;
  expected_bytes: number;
  keep_original?: boolean;
}

export interface DownloadPlan {
  repo: string;
  revision: string;
  commit: string;
  cache_dir: string;
  snapshot_dir: string;
  /** model_dir is where the model is stored and loaded from. */
  model_dir: string;
  keep_original: boolean;
  estimate: Estimate;
  files: PlannedFile[];
  total_bytes: number;
  present_bytes: number;
  to_fetch: number;
  preflight: Preflight;
}

export interface Progress {
  done: number;
  total: number;
  rate: number;
  eta_s: number;
  files_done: number;
  files_total: number;
  active?: Array<{ path: string; done: number; total: number; rate: number }>;
}

export interface DownloadEvent {
  kind: string;
  state?: string;
  file?: string;
  message?: string;
  progress: Progress;
  pack?: PackProgress;
  /** seq is the event's place in the sequence DownloadStatus.seq counts. */
  seq?: number;
}

export interface DownloadStatus {
  repo: string;
  revision: string;
  cache_dir: string;
  cache_source: string;
  /** keep_original: the files go to the Hugging Face cache for other tools, and the store keeps the packs. */
  keep_original: boolean;
  pack?: PackProgress;
  disk?: { path?: string; available?: number; important?: number; total?: number; error?: string };
  planning: boolean;
  plan?: DownloadPlan;
  plan_error?: string;
  state: string;
  running: boolean;
  error?: string;
  last?: DownloadEvent;
  /** seq is the number of events published before the status was read. */
  seq?: number;
  model_dir?: string;
}

class Downloads extends Observable {
  status: DownloadStatus | null = null;
  /** verified and integrity are what the events said this session. */
  verified = new Set<string>();
  integrity: string[] = [];
  /** seq is the newest event applied. */
  private seq = 0;

  constructor() {
    super();
    events.on('download', (ev: DownloadEvent) => {
      if (ev.kind === 'file-done' && ev.file) this.verified.add(ev.file);
      if (ev.kind === 'integrity' && ev.file) this.integrity.push(`${ev.file}: ${ev.message ?? 'failed verification'}`);
      this.seq = Math.max(this.seq, ev.seq ?? 0);
      if (!this.status) return;
      this.status.last = ev;
      if (ev.pack && ev.pack.shards > 0) this.status.pack = ev.pack;
      if (ev.state) {
        this.status.state = ev.state;
        if (ev.state === 'downloading' || ev.state === 'paused') this.status.running = true;
      }
      this.emit();
    });
  }

  /**
   * set takes a status from /ui/download or an action's answer. One read
   * before an event already applied (overtaken by the websocket: a poll,
   * or a pause answered before the job noticed it) keeps the newer state.
   */
  set(s: DownloadStatus): void {
    const cur = this.status;
    if (cur && (s.seq ?? 0) < this.seq) {
      s = { ...s, state: cur.state, running: cur.running, last: cur.last, error: cur.error, seq: this.seq };
    }
    this.seq = Math.max(this.seq, s.seq ?? 0);
    this.status = s;
    this.emit();
  }
}

export const downloads = new Downloads();

/** downloadSummary is the sidebar's line while a download runs or waits
 * paused; null otherwise. */
export function downloadSummary(): { label: string; short: string; fraction: number } | null {
  const s = downloads.status;
  if (!s || !s.running || (s.state !== 'downloading' && s.state !== 'paused')) return null;
  const p = s.last?.progress;
  const fraction = p && p.total > 0 ? p.done / p.total : 0;
  const what = s.state === 'paused' ? 'GLM-5.2 download paused' : 'Downloading GLM-5.2';
  const detail = p && p.total > 0 ? `${percent(fraction)} of ${diskBytes(p.total)}` : '';
  return { label: `${what}${detail ? ': ' + detail : ''}. Open the Model page.`, short: `${s.state === 'paused' ? 'Paused' : 'GLM-5.2'} ${percent(fraction)}`, fraction };
}
