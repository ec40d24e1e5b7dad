// Shared pieces of the end-to-end tests: a Spool server on the demo model,
// headless Chromium (Debian's /usr/bin/chromium driven by playwright-core;
// no browser is downloaded), screenshots and axe-core checks.
//
// Environment: SPOOL_BIN (default bin/spool), SPOOL_MODEL_DIR (default
// assets/models/glm52-demo), CHROMIUM (default /usr/bin/chromium),
// SPOOL_ARTIFACTS (default test-artifacts/e2e).

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';

export const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const bin = process.env.SPOOL_BIN ?? join(repo, 'bin', 'spool');
export const modelDir = process.env.SPOOL_MODEL_DIR ?? join(repo, 'assets', 'models', 'glm52-demo');
export const artifacts = process.env.SPOOL_ARTIFACTS ?? join(repo, 'test-artifacts', 'e2e');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** freePort asks the kernel for an unused loopback port. */
export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

export async function waitHealthy(base, proc, log) {
  for (let i = 0; i < 600; i++) {
    if (proc.exitCode !== null) throw new Error(`spool exited with ${proc.exitCode}:\n${log()}`);
    try {
      const r = await fetch(base + '/health');
      if (r.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`spool did not become healthy:\n${log()}`);
}

/** startSpool runs `spool app --no-window` (the engine with the streamed
 * expert tier and the UI) on the demo model in a private home. */
export async function startSpool({ args = [], env = {} } = {}) {
  mkdirSync(artifacts, { recursive: true });
  const home = mkdtempSync(join(tmpdir(), 'spool-e2e-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let output = '';
  const proc = spawn(bin, ['app', '--no-window', '--model', modelDir, '--port', String(port), ...args], {
    cwd: repo,
    env: { ...process.env, SPOOL_SETTINGS: join(home, 'settings.json'), XDG_CACHE_HOME: join(home, 'cache'), SPOOL_STORE: join(home, 'store'), HF_HUB_OFFLINE: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout.on('data', (d) => (output += d));
  proc.stderr.on('data', (d) => (output += d));
  await waitHealthy(base, proc, () => output);
  return {
    base,
    home,
    proc,
    log: () => output,
    async stop() {
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        await new Promise((r) => proc.once('exit', r));
      }
      rmSync(home, { recursive: true, force: true });
    },
  };
}

export function launchBrowser() {
  return chromium.launch({
    executablePath: chromiumPath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

export const wide = { width: 1280, height: 820 };
export const narrow = { width: 800, height: 600 };

/** openPage opens base/#/route in a new context; errors collects page
 * errors (a test asserts there are none). */
export async function openPage(browser, base, route, { viewport = wide, colorScheme = 'light', permissions } = {}) {
  const context = await browser.newContext({ viewport, colorScheme });
  if (permissions) await context.grantPermissions(permissions, { origin: base });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${base}/#/${route}`);
  return { page, context, errors };
}

export async function shot(page, name) {
  await page.screenshot({ path: join(artifacts, `${name}.png`) });
}

export function saveArtifact(name, data) {
  mkdirSync(artifacts, { recursive: true });
  writeFileSync(join(artifacts, name), JSON.stringify(data, null, 2) + '\n');
}

/** axe runs axe-core on the page and returns its serious and critical
 * violations, one line each. */
export async function axe(page) {
  if (!(await page.evaluate(() => 'axe' in window))) await page.addScriptTag({ content: axeSource });
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).slice(0, 4).join(', ')}`);
  });
  return result;
}

/** until polls fn (in the test) until it returns a truthy value. */
export async function until(fn, { timeout = 15000, every = 50, what = 'a condition' } = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}
