// The web UI while Spool forwards to a server: `spool app --no-window` with
// the engine set to the vLLM stand-in (engine/remote/standin) in its saved
// settings, in headless Chromium. The stand-in is built here unless
// STANDIN_BIN names it. Screenshots go to test-artifacts/e2e/remote-*.png.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { artifacts, bin, freePort, launchBrowser, modelDir, repo } from './helpers.mjs';

const KEY = 'server-secret-key-0123456789';

function started(proc, pattern, log) {
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`did not start: ${log.text}`)), 60000);
    const on = (d) => {
      log.text += d;
      const m = pattern.exec(log.text);
      if (m) {
        clearTimeout(timer);
        ok(m[1]);
      }
    };
    proc.stdout?.on('data', on);
    proc.stderr.on('data', on);
    proc.once('exit', (code) => fail(new Error(`exited with ${code}: ${log.text}`)));
  });
}

let home;
let standin;
let app;
let browser;
let base;
let remote;
const appLog = { text: '' };

before(async () => {
  mkdirSync(artifacts, { recursive: true });
  home = mkdtempSync(join(tmpdir(), 'spool-e2e-remote-'));
  let standinBin = process.env.STANDIN_BIN;
  if (!standinBin) {
    standinBin = join(home, 'vllm-standin');
    execFileSync('go', ['build', '-o', standinBin, './engine/remote/standin/cmd/vllm-standin'], { cwd: repo, stdio: 'inherit' });
  }
  standin = spawn(standinBin, ['--key', KEY, '--chunk-delay', '20ms'], { stdio: ['ignore', 'ignore', 'pipe'] });
  remote = await started(standin, /listening on (http:\/\/\S+)/, { text: '' });
  const settings = join(home, 'settings.json');
  writeFileSync(settings, JSON.stringify({ engine: 'remote', remote_url: remote + '/v1', remote_key: KEY }), { mode: 0o600 });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  app = spawn(bin, ['app', '--no-window', '--model', modelDir, '--port', String(port)], {
    cwd: repo,
    env: { ...process.env, SPOOL_SETTINGS: settings, XDG_CACHE_HOME: join(home, 'cache'), HF_HUB_OFFLINE: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  await started(app, /serving the remote engine at \S+ on (http:\/\/\S+)/, appLog);
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  for (const p of [app, standin]) {
    if (p && p.exitCode === null) {
      p.kill('SIGTERM');
      await new Promise((r) => p.once('exit', r));
    }
  }
  assert.ok(!appLog.text.includes(KEY), 'the server key was printed');
  if (home) rmSync(home, { recursive: true, force: true });
});

async function openPage(route) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 820 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${base}/#/${route}`);
  return { page, context, errors };
}

const host = () => new URL(remote).host;

describe('Spool UI with a server as the engine', () => {
  test('the sidebar shows the server, and a chat goes through it', async () => {
    const { page, context, errors } = await openPage('chat');
    const status = page.getByTestId('engine-status');
    await assert.doesNotReject(status.filter({ hasText: `Server ${host()} · glm-5.2-fp8` }).waitFor({ timeout: 15000 }));
    await page.getByLabel('Message').fill('hello from the browser');
    await page.getByTestId('send').click();
    const reply = page.locator('.turn.assistant .body').last();
    await assert.doesNotReject(reply.filter({ hasText: 'You said: hello from the browser' }).waitFor({ timeout: 30000 }));
    await page.screenshot({ path: join(artifacts, 'remote-chat.png') });
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('the fit plan and the heat map say they describe this Mac only', async () => {
    for (const route of ['fit', 'experts']) {
      const { page, context, errors } = await openPage(route);
      const note = page.getByTestId('remote-note');
      await assert.doesNotReject(note.filter({ hasText: `forwarding to the server ${host()}` }).waitFor({ timeout: 15000 }));
      assert.match(await note.innerText(), /describes the local engine on this Mac only/);
      await page.screenshot({ path: join(artifacts, `remote-${route}.png`) });
      assert.deepEqual(errors, []);
      await context.close();
    }
  });

  test('settings: the engine is a server, its key is never shown, the connection tests', async () => {
    const { page, context, errors } = await openPage('settings');
    const form = page.getByTestId('engine-form');
    await form.waitFor();
    assert.equal(await page.locator('#engine-remote').isChecked(), true);
    assert.equal(await page.locator('#engine-url').isVisible(), true);
    assert.equal(await page.locator('#engine-url').inputValue(), remote + '/v1');
    assert.equal(await page.locator('#engine-key').inputValue(), '');
    assert.match(await page.locator('#engine-key').getAttribute('placeholder'), /saved/);
    assert.ok(!(await page.content()).includes(KEY), 'the key is in the page');
    await page.getByTestId('engine-test').click();
    await assert.doesNotReject(page.getByTestId('engine-check').filter({ hasText: /Reachable · \d+ ms · glm-5\.2-fp8 \(131,072 tokens of context\)/ }).waitFor({ timeout: 15000 }));
    await page.screenshot({ path: join(artifacts, 'remote-settings.png') });
    // This Mac again: saved with the other settings, the key kept.
    await page.locator('#engine-local').check();
    assert.equal(await page.locator('#engine-url').isVisible(), false);
    await form.getByRole('button', { name: 'Save' }).click();
    await assert.doesNotReject(form.getByText('Saved.').waitFor());
    const saved = JSON.parse(readFileSync(join(home, 'settings.json'), 'utf8'));
    assert.equal(saved.engine, 'local');
    assert.equal(saved.remote_key, KEY);
    assert.deepEqual(errors, []);
    await context.close();
  });
});
