// The chat when the engine is not running: an error card with Retry (and,
// in the desktop shell, Start model) instead of "Failed to fetch", and Send
// disabled. The page comes from a plain file server standing in for the
// desktop shell's asset server: it serves the built UI, says where the API
// is (a port nothing listens on yet) and answers the shell's engine
// controls; Start model starts a real Spool there.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import { bin, freePort, launchBrowser, modelDir, openPage, repo, shot, waitHealthy } from './helpers.mjs';

const dist = join(repo, 'frontend', 'dist');
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.json': 'application/json' };

let browser;
let shellServer;
let base;
let apiPort;
let engine = null;
let engineLog = '';
const home = mkdtempSync(join(tmpdir(), 'spool-e2e-offline-'));

function startEngine() {
  engine = spawn(bin, ['app', '--no-window', '--model', modelDir, '--port', String(apiPort)], {
    cwd: repo,
    env: { ...process.env, SPOOL_SETTINGS: join(home, 'settings.json'), XDG_CACHE_HOME: join(home, 'cache'), HF_HUB_OFFLINE: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  engine.stdout.on('data', (d) => (engineLog += d));
  engine.stderr.on('data', (d) => (engineLog += d));
  return waitHealthy(`http://127.0.0.1:${apiPort}`, engine, () => engineLog);
}

before(async () => {
  apiPort = await freePort();
  shellServer = createServer(async (req, res) => {
    const json = (v) => (res.writeHead(200, { 'content-type': 'application/json' }), res.end(JSON.stringify(v)));
    const path = req.url.split('?')[0];
    if (path === '/spool-ui.json') return json({ api: `http://127.0.0.1:${apiPort}`, shell: true });
    if (path === '/shell/status') return json({ state: engine ? 'ready' : 'stopped' });
    if (path === '/shell/start' && req.method === 'POST') {
      if (!engine) await startEngine();
      return json({ state: 'ready' });
    }
    const file = normalize(join(dist, path === '/' ? 'index.html' : path));
    if (!file.startsWith(dist) || !existsSync(file)) {
      res.writeHead(404);
      return res.end();
    }
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' });
    res.end(readFileSync(file));
  });
  await new Promise((r) => shellServer.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${shellServer.address().port}`;
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  shellServer?.close();
  if (engine && engine.exitCode === null) {
    engine.kill('SIGTERM');
    await new Promise((r) => engine.once('exit', r));
  }
  rmSync(home, { recursive: true, force: true });
});

describe('engine offline', () => {
  test('an error card with Retry and Start model, and Send disabled, until the engine runs', async () => {
    const { page, context, errors } = await openPage(browser, base, 'chat');
    const card = page.getByTestId('offline-card');
    await card.waitFor({ timeout: 10000 });
    assert.match(await card.innerText(), /The engine is not reachable/);
    assert.doesNotMatch(await page.locator('body').innerText(), /Failed to fetch/);
    await page.getByLabel('Message', { exact: true }).fill('What does the function re.compile do?');
    assert.ok(await page.getByTestId('send').isDisabled(), 'Send is enabled while the engine is offline');
    await page.getByLabel('Message', { exact: true }).press('Enter');
    assert.equal(await page.locator('.turn').count(), 0, 'a message was sent to an offline engine');
    assert.match(await page.getByTestId('engine-status').innerText(), /Model stopped|not reachable/);
    await shot(page, 'chat-offline');
    // Retry while it is still down: still the card.
    await card.getByRole('button', { name: 'Retry' }).click();
    await page.waitForTimeout(500);
    assert.ok(await card.isVisible());
    // Start model: the engine comes up, the card goes, Send works.
    await card.getByRole('button', { name: 'Start model' }).click();
    await card.waitFor({ state: 'detached', timeout: 30000 });
    await page.getByTestId('send').filter({ hasText: 'Send' }).and(page.locator(':enabled')).waitFor();
    await page.getByTestId('send').click();
    await page.getByTestId('send').filter({ hasText: 'Send' }).waitFor({ timeout: 60000 });
    assert.ok((await page.locator('.turn.assistant .body').innerText()).trim().length > 10);
    assert.deepEqual(errors, []);
    await context.close();
  });
});
