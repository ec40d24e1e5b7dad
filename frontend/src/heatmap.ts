// The expert heat map: a layer x expert grid drawn on a canvas. Each cell
// is one routed expert: its tier (disk, LRU, pinned) picks the hue, its
// usage (log2 of the persistent count) how far the colour goes from the
// cold one to the tier's, exactly as the legend's scales show, and a hit
// in the latest updates draws an outline that fades (it never changes the
// fill, so every fill is a colour of the legend). The grid is painted one
// pixel per cell into an offscreen canvas and scaled up without smoothing,
// so the 19,456 cells of GLM-5.2 cost one putImageData per frame.

export const TIER_DISK = 0;
export const TIER_LRU = 1;
export const TIER_PINNED = 2;
export const tierNames = ['disk', 'LRU', 'pinned'];

export interface Shape {
  rows: number;
  cols: number;
  /** rowLabels names each row (e.g. "L3", "MTP"). */
  rowLabels: string[];
}

type RGB = [number, number, number];

export interface Palette {
  background: RGB;
  tiers: [RGB, RGB, RGB]; // hot colour per tier
  cold: RGB; // zero usage
  flash: RGB;
}

const flashMillis = 900;

/** usageLevel is how far (0..1) a cell's colour goes from cold to its
 * tier's colour: 0 for a never-used expert on disk, a floor for resident
 * ones, then linear in log2 of the count up to the most used. */
export function usageLevel(tier: number, heat: number, maxHeat: number): number {
  if (heat === 0) return tier === TIER_DISK ? 0 : usageFloor;
  return usageFloor + (1 - usageFloor) * (heat / Math.max(1, maxHeat));
}

/** usageFloor is the level of a resident expert never used (and the step
 * from 0 to a first use). */
export const usageFloor = 0.2;

export class HeatMap {
  readonly canvas: HTMLCanvasElement;
  private off: HTMLCanvasElement;
  private img: ImageData;
  private map: Uint8Array;
  private flashAt: Float64Array; // time of the latest hit per cell
  private turnHits: Uint8Array;
  private raf = 0;
  private dirty = true;
  maxHeat = 1;
  private palette: Palette;
  private cell = { w: 4, h: 6, x0: 44, y0: 18 };
  hover = -1;
  updates = 0;

  constructor(
    readonly shape: Shape,
    palette: Palette,
  ) {
    this.canvas = document.createElement('canvas');
    this.off = document.createElement('canvas');
    this.off.width = shape.cols;
    this.off.height = shape.rows;
    this.img = new ImageData(shape.cols, shape.rows);
    this.map = new Uint8Array(shape.rows * shape.cols);
    this.flashAt = new Float64Array(shape.rows * shape.cols).fill(-1e9);
    this.turnHits = new Uint8Array(shape.rows * shape.cols);
    this.palette = palette;
  }

  setPalette(p: Palette): void {
    this.palette = p;
    this.dirty = true;
  }

  get cells(): number {
    return this.shape.rows * this.shape.cols;
  }

  /** update takes a map (one byte per expert: tier << 6 | heat) and an
   * LSB-first hit bitmap; either may be missing. */
  update(map: Uint8Array | null, hits: Uint8Array | null, now = performance.now()): void {
    const n = this.cells;
    if (map && map.length >= n) {
      this.map.set(map.subarray(0, n));
      let mx = 1;
      for (let i = 0; i < n; i++) mx = Math.max(mx, map[i] & 63);
      this.maxHeat = mx;
    }
    if (hits) {
      for (let i = 0; i < n; i++) {
        if (hits[i >> 3] & (1 << (i & 7))) {
          this.flashAt[i] = now;
          this.turnHits[i] = 1;
        }
      }
    }
    this.updates++;
    this.dirty = true;
  }

  /** resetTurn clears the per-turn hit set (a new turn began). */
  resetTurn(): void {
    this.turnHits.fill(0);
    this.dirty = true;
  }

  turnHitCount(): number {
    let c = 0;
    for (const v of this.turnHits) c += v;
    return c;
  }

  tierCounts(): [number, number, number] {
    const c: [number, number, number] = [0, 0, 0];
    for (const b of this.map) c[Math.min(2, b >> 6)]++;
    return c;
  }

  cellInfo(i: number): { row: number; col: number; tier: number; heat: number; hitThisTurn: boolean } {
    const b = this.map[i];
    return { row: Math.floor(i / this.shape.cols), col: i % this.shape.cols, tier: Math.min(2, b >> 6), heat: b & 63, hitThisTurn: this.turnHits[i] === 1 };
  }

  /** layout sizes the canvas to width CSS pixels. */
  layout(width: number): void {
    const { rows, cols } = this.shape;
    const x0 = 44;
    const y0 = 18;
    const cw = Math.max(1, (width - x0 - 4) / cols);
    const ch = Math.max(4, Math.min(18, Math.round(cw * (cols > 128 ? 1.6 : 1))));
    this.cell = { w: cw, h: ch, x0, y0 };
    const dpr = window.devicePixelRatio || 1;
    const cssW = Math.round(x0 + cols * cw + 4);
    const cssH = Math.round(y0 + rows * ch + 6);
    this.canvas.style.width = cssW + 'px';
    this.canvas.style.height = cssH + 'px';
    this.canvas.width = Math.round(cssW * dpr);
    this.canvas.height = Math.round(cssH * dpr);
    this.dirty = true;
  }

  /** cellAt maps a CSS-pixel point on the canvas to a cell index or -1. */
  cellAt(x: number, y: number): number {
    const { w, h, x0, y0 } = this.cell;
    const col = Math.floor((x - x0) / w);
    const row = Math.floor((y - y0) / h);
    if (col < 0 || row < 0 || col >= this.shape.cols || row >= this.shape.rows) return -1;
    return row * this.shape.cols + col;
  }

  cellRect(i: number): { x: number; y: number; w: number; h: number } {
    const { w, h, x0, y0 } = this.cell;
    return { x: x0 + (i % this.shape.cols) * w, y: y0 + Math.floor(i / this.shape.cols) * h, w, h };
  }

  start(): void {
    const frame = (t: number) => {
      this.raf = requestAnimationFrame(frame);
      this.draw(t);
    };
    this.raf = requestAnimationFrame(frame);
  }

  stop(): void {
    cancelAnimationFrame(this.raf);
  }

  /** draw paints a frame; it skips work when nothing changed or flashes. */
  draw(now: number): void {
    const n = this.cells;
    let flashing = false;
    const data = this.img.data;
    const p = this.palette;
    if (!this.dirty) {
      for (let i = 0; i < n; i++) {
        if (now - this.flashAt[i] < flashMillis) {
          flashing = true;
          break;
        }
      }
      if (!flashing) return;
    }
    this.dirty = false;
    for (let i = 0; i < n; i++) {
      const b = this.map[i];
      const tier = Math.min(2, b >> 6);
      const heat = b & 63;
      const hot = p.tiers[tier];
      const t = usageLevel(tier, heat, this.maxHeat);
      const o = i * 4;
      data[o] = p.cold[0] + (hot[0] - p.cold[0]) * t;
      data[o + 1] = p.cold[1] + (hot[1] - p.cold[1]) * t;
      data[o + 2] = p.cold[2] + (hot[2] - p.cold[2]) * t;
      data[o + 3] = 255;
    }
    this.drawGrid(now);
  }

  /** fillOf is cell i's fill: its tier's colour at its usage level. */
  fillOf(i: number): RGB {
    const { tier, heat } = this.cellInfo(i);
    const p = this.palette;
    const hot = p.tiers[tier];
    const t = usageLevel(tier, heat, this.maxHeat);
    return [0, 1, 2].map((k) => Math.round(p.cold[k] + (hot[k] - p.cold[k]) * t)) as RGB;
  }

  /** flashing reports whether cell i shows a recent hit at now. */
  flashing(i: number, now: number): boolean {
    return now - this.flashAt[i] < flashMillis;
  }

  private drawGrid(now: number): void {
    const n = this.cells;
    const p = this.palette;
    const octx = this.off.getContext('2d')!;
    octx.putImageData(this.img, 0, 0);
    const ctx = this.canvas.getContext('2d')!;
    const dpr = window.devicePixelRatio || 1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const [br, bg, bb] = p.background;
    ctx.fillStyle = `rgb(${br},${bg},${bb})`;
    ctx.fillRect(0, 0, this.canvas.width, this.canvas.height);
    const { w, h, x0, y0 } = this.cell;
    const { rows, cols } = this.shape;
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.off, x0, y0, cols * w, rows * h);
    // Cell separators when cells are large enough to read.
    if (w >= 6 && h >= 6) {
      ctx.strokeStyle = `rgba(${br},${bg},${bb},0.9)`;
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (let c = 0; c <= cols; c++) {
        ctx.moveTo(x0 + c * w, y0);
        ctx.lineTo(x0 + c * w, y0 + rows * h);
      }
      for (let r = 0; r <= rows; r++) {
        ctx.moveTo(x0, y0 + r * h);
        ctx.lineTo(x0 + cols * w, y0 + r * h);
      }
      ctx.stroke();
    }
    // Axis labels: rows every so often, expert ids every 16 or 32.
    const fg = getComputedStyle(this.canvas).color || '#888';
    ctx.fillStyle = fg;
    ctx.font = '10px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'right';
    const every = Math.max(1, Math.ceil(11 / h));
    for (let r = 0; r < rows; r++) {
      const label = this.shape.rowLabels[r];
      const nearMTP = this.shape.rowLabels[rows - 1] === 'MTP' && r < rows - 1 && rows - 1 - r < every;
      if ((r % every === 0 && !nearMTP) || label === 'MTP') ctx.fillText(label, x0 - 6, y0 + r * h + h / 2);
    }
    ctx.textAlign = 'center';
    ctx.textBaseline = 'alphabetic';
    const step = cols > 128 ? 32 : cols > 32 ? 16 : 4;
    for (let c = 0; c < cols; c += step) ctx.fillText(String(c), x0 + c * w + w / 2, y0 - 5);
    // Hits: an outline in the flash colour, fading out; cells too narrow
    // for one get its top and bottom edges, so the fill stays visible.
    const [fr, fg2, fb] = p.flash;
    ctx.lineWidth = 1.5;
    for (let i = 0; i < n; i++) {
      const age = now - this.flashAt[i];
      if (age >= flashMillis) continue;
      const rc = this.cellRect(i);
      const colour = `rgba(${fr},${fg2},${fb},${(1 - age / flashMillis).toFixed(2)})`;
      if (rc.w >= 6) {
        ctx.strokeStyle = colour;
        ctx.strokeRect(rc.x + 0.75, rc.y + 0.75, rc.w - 1.5, rc.h - 1.5);
      } else {
        ctx.fillStyle = colour;
        ctx.fillRect(rc.x, rc.y, rc.w, 1);
        ctx.fillRect(rc.x, rc.y + rc.h - 1, rc.w, 1);
      }
    }
    if (this.hover >= 0) {
      const rc = this.cellRect(this.hover);
      ctx.strokeStyle = fg;
      ctx.lineWidth = 2;
      ctx.strokeRect(rc.x - 1, rc.y - 1, rc.w + 2, rc.h + 2);
    }
  }

  markDirty(): void {
    this.dirty = true;
  }
}
