// End-to-end tests of the web UI in headless Chromium (Debian's
// /usr/bin/chromium driven by playwright-core; no browser is downloaded)
// against a Spool server on the demo model. Screenshots of every page, in
// light and dark mode, go to test-artifacts/e2e/.
//
// Environment: SPOOL_BIN (default bin/spool), SPOOL_E2E_COMMAND (default
// "app --no-window": the engine with the streamed expert tier and the UI),
// SPOOL_MODEL_DIR (default assets/models/glm52-mini), CHROMIUM (default
// /usr/bin/chromium), SPOOL_ARTIFACTS (default test-artifacts/e2e).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const bin = process.env.SPOOL_BIN ?? join(repo, 'bin', 'spool');
const command = (process.env.SPOOL_E2E_COMMAND ?? 'app --no-window').split(/\s+/).filter(Boolean);
const modelDir = process.env.SPOOL_MODEL_DIR ?? join(repo, 'assets', 'models', 'glm52-mini');
const artifacts = process.env.SPOOL_ARTIFACTS ?? join(repo, 'test-artifacts', 'e2e');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** freePort asks the kernel for an unused loopback port. */
function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

async function waitHealthy(base, proc, log) {
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

let server;
let browser;
let base;
let home;
let output = '';

before(async () => {
  mkdirSync(artifacts, { recursive: true });
  home = mkdtempSync(join(tmpdir(), 'spool-e2e-'));
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = spawn(bin, [...command, '--model', modelDir, '--port', String(port)], {
    cwd: repo,
    env: { ...process.env, SPOOL_SETTINGS: join(home, 'settings.json'), XDG_CACHE_HOME: join(home, 'cache'), HF_HUB_OFFLINE: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  server.stdout.on('data', (d) => (output += d));
  server.stderr.on('data', (d) => (output += d));
  await waitHealthy(base, server, () => output);
  browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
});

after(async () => {
  await browser?.close();
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise((r) => server.once('exit', r));
  }
  if (home) rmSync(home, { recursive: true, force: true });
});

async function openPage(route, colorScheme = 'light') {
  const context = await browser.newContext({ viewport: { width: 1280, height: 820 }, colorScheme });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${base}/#/${route}`);
  return { page, context, errors };
}

async function shot(page, name) {
  await page.screenshot({ path: join(artifacts, `${name}.png`) });
}

const question = 'What does the function re.compile do?';

describe('Spool UI', () => {
  test('a chat round trip streams text', async () => {
    const { page, context, errors } = await openPage('chat');
    await page.getByLabel('Message').fill(question);
    await page.getByTestId('send').click();
    const reply = page.locator('.turn.assistant .body').last();
    // The caret shows while tokens stream in; record the growing text.
    const lengths = new Set();
    await page.locator('.turn.assistant .caret').first().waitFor({ timeout: 30000 }).catch(() => {});
    for (let i = 0; i < 400; i++) {
      lengths.add((await reply.innerText()).length);
      if ((await page.getByTestId('send').innerText()) === 'Send') break;
      await page.waitForTimeout(25);
    }
    await assert.doesNotReject(page.getByTestId('send').filter({ hasText: 'Send' }).waitFor({ timeout: 60000 }));
    const text = (await reply.innerText()).trim();
    assert.ok(text.length > 10, `the reply is too short: ${JSON.stringify(text)}`);
    assert.doesNotMatch(text, /Error:/);
    assert.ok([...lengths].filter((n) => n > 0).length >= 2 || text.length > 0, 'the reply did not stream');
    await shot(page, 'chat-light');
    // The conversation is kept across a reload.
    await page.reload();
    await page.locator('.turn.assistant .body').last().waitFor();
    assert.equal(await page.locator('.conv-list .conv').count(), 1);
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.waitForTimeout(100);
    await shot(page, 'chat-dark');
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('stop ends a reply', async () => {
    const { page, context, errors } = await openPage('chat');
    await page.getByRole('button', { name: '+ New chat' }).click();
    // A long prompt keeps the request busy (prefill) long enough to stop
    // it whatever the demo model would answer.
    const long = 'What does the method str.split do? ' + 'Explain the separator and maxsplit arguments. '.repeat(60);
    await page.getByLabel('Message').fill(long);
    await page.getByTestId('send').click();
    await page.getByTestId('send').filter({ hasText: 'Stop' }).waitFor();
    await page.getByTestId('send').click();
    await page.getByTestId('send').filter({ hasText: 'Send' }).waitFor({ timeout: 10000 });
    await page.locator('.turn.assistant .badge', { hasText: 'Stopped' }).waitFor({ timeout: 5000 });
    await shot(page, 'chat-stopped');
    // The server saw the client go and cancelled the generation.
    let finish = '';
    for (let i = 0; i < 100 && finish !== 'cancelled'; i++) {
      const stats = await (await fetch(base + '/stats')).json();
      finish = stats.last_turn?.finish_reason ?? '';
      if (finish !== 'cancelled') await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(finish, 'cancelled');
    // The engine is still serving: a new request completes.
    const r = await fetch(base + '/v1/chat/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'spool', messages: [{ role: 'user', content: question }], max_tokens: 8 }),
    });
    assert.equal(r.status, 200);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('the heat map changes after a reply', async () => {
    const { page, context, errors } = await openPage('experts');
    const canvas = page.getByTestId('heatmap');
    await canvas.waitFor();
    assert.equal(await canvas.getAttribute('data-cells'), String(6 * 64));
    const wrap = page.locator('.heat-wrap');
    await page.waitForFunction(() => Number(document.querySelector('.heat-wrap')?.dataset.updates ?? 0) >= 1);
    // Let any flash of earlier tests fade, then fingerprint the grid.
    await page.waitForTimeout(1200);
    const digest = async () => createHash('sha256').update(await canvas.screenshot()).digest('hex');
    const before = await digest();
    const updates = Number(await wrap.getAttribute('data-updates'));
    const r = await fetch(base + '/v1/chat/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'spool', messages: [{ role: 'user', content: 'What does the function heapq.heappush do?' }], max_tokens: 24 }),
    });
    assert.equal(r.status, 200);
    await page.waitForFunction((n) => Number(document.querySelector('.heat-wrap')?.dataset.updates ?? 0) > n + 1, updates, { timeout: 15000 });
    const afterDigest = await digest();
    assert.notEqual(afterDigest, before, 'the heat map did not change after a reply');
    const hit = await page.locator('.stat', { hasText: 'Hit this turn' }).locator('.stat-value').innerText();
    await shot(page, 'experts-light');
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.waitForTimeout(150);
    await shot(page, 'experts-dark');
    assert.ok(Number(hit.replace(/\D/g, '')) >= 0);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('the heat map draws the full GLM-5.2 grid at 10 updates/s', async () => {
    const { page, context, errors } = await openPage('experts?simulate=glm52', 'dark');
    const canvas = page.getByTestId('heatmap');
    await canvas.waitFor();
    assert.equal(await canvas.getAttribute('data-cells'), '19456');
    await page.waitForFunction(() => Number(document.querySelector('.heat-wrap')?.dataset.updates ?? 0) >= 12);
    await canvas.hover({ position: { x: 300, y: 120 } });
    await page.locator('.tooltip').waitFor();
    await shot(page, 'experts-glm52-dark');
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('the fit page shows the plan', async () => {
    const { page, context, errors } = await openPage('fit');
    const rows = page.getByTestId('plan-table').locator('tbody tr');
    await rows.first().waitFor();
    assert.ok((await rows.count()) >= 8);
    await assert.doesNotReject(page.getByTestId('verdict').filter({ hasText: 'Fits' }).waitFor());
    const kv = () => page.getByTestId('plan-table').locator('tr', { hasText: 'KV cache' }).locator('td.num').innerText();
    const kvBefore = await kv();
    await page.getByLabel('Context (tokens per sequence)').selectOption('2048');
    await page.waitForFunction((b) => {
      const td = [...document.querySelectorAll('[data-testid=plan-table] tr')].find((r) => r.textContent.includes('KV cache'))?.querySelector('td.num');
      return td && td.textContent !== b;
    }, kvBefore);
    await shot(page, 'fit-light');
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.waitForTimeout(100);
    await shot(page, 'fit-dark');
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('the atlas canvas draws', async () => {
    const { page, context, errors } = await openPage('atlas');
    const canvas = page.getByTestId('atlas');
    await canvas.waitFor();
    await page.waitForFunction(() => Number(document.querySelector('[data-testid=atlas]')?.dataset.drawn ?? 0) > 0);
    const painted = await canvas.evaluate((c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
      return n;
    });
    assert.ok(painted > 1000, `only ${painted} pixels painted`);
    await shot(page, 'atlas-light');
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.waitForTimeout(150);
    await shot(page, 'atlas-dark');
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('the model and settings pages render', async () => {
    for (const scheme of ['light', 'dark']) {
      const { page, context, errors } = await openPage('model', scheme);
      await page.getByRole('heading', { name: 'GLM-5.2 (Colibri int4, int8 MTP)' }).waitFor();
      await page.getByText('glm52-mini').first().waitFor();
      await shot(page, `model-${scheme}`);
      await page.goto(`${base}/#/settings`);
      await page.getByLabel('Bind address').waitFor();
      await shot(page, `settings-${scheme}`);
      assert.deepEqual(errors, []);
      await context.close();
    }
  });

  test('every page is keyboard reachable', async () => {
    const { page, context } = await openPage('chat');
    const names = [];
    for (let i = 0; i < 16; i++) {
      await page.keyboard.press('Tab');
      names.push(await page.evaluate(() => document.activeElement?.textContent?.trim() ?? ''));
    }
    for (const label of ['Chat', 'Model', 'Fit', 'Experts', 'Atlas', 'Settings']) {
      assert.ok(names.includes(label), `${label} is not reachable with Tab: ${names.join(' | ')}`);
    }
    await context.close();
  });
});
