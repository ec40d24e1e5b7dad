// The pages of the web UI against a Spool server on the demo model: every
// page at 1280 and 800 px in light and dark mode (screenshots in
// test-artifacts/e2e/, axe-core with no serious or critical violation),
// keyboard use (skip link, nav, heat map, atlas), the narrow window's
// drawer, the heat map, the atlas and the fit plan of GLM-5.2.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { axe, launchBrowser, narrow, openPage, shot, startSpool, wide } from './helpers.mjs';

let spool;
let browser;

before(async () => {
  [spool, browser] = await Promise.all([startSpool(), launchBrowser()]);
});

after(async () => {
  await browser?.close();
  await spool?.stop();
});

const pages = [
  ['chat', (p) => p.getByTestId('chat-model').filter({ hasText: 'glm52-demo' }).waitFor()],
  ['model', (p) => p.getByRole('heading', { name: 'GLM-5.2 (Colibri int4, int8 MTP)' }).waitFor()],
  ['fit', (p) => p.getByTestId('verdict').waitFor()],
  ['experts', (p) => p.getByTestId('heatmap').waitFor()],
  ['atlas', (p) => p.waitForFunction(() => Number(document.querySelector('[data-testid=atlas]')?.dataset.drawn ?? 0) > 0)],
  ['settings', (p) => p.getByLabel('Bind address').waitFor()],
];

describe('Spool UI pages', () => {
  for (const [name, viewport] of [
    ['1280', wide],
    ['800', narrow],
  ]) {
    for (const scheme of ['light', 'dark']) {
      test(`every page at ${name} px, ${scheme}: renders, no serious axe violation`, async () => {
        const { page, context, errors } = await openPage(browser, spool.base, 'chat', { viewport, colorScheme: scheme });
        const problems = [];
        for (const [route, ready] of pages) {
          await page.goto(`${spool.base}/#/${route}`);
          await ready(page);
          await page.waitForTimeout(150);
          await shot(page, `${route}-${name}-${scheme}`);
          for (const v of await axe(page)) problems.push(`#/${route}: ${v}`);
          // Words never break in the middle (paths and hashes may).
          const breaking = await page.evaluate(() => [...document.querySelectorAll('#app *')].filter((el) => getComputedStyle(el).wordBreak === 'break-all').map((el) => el.className || el.tagName));
          if (breaking.length) problems.push(`#/${route}: word-break: break-all on ${breaking.slice(0, 3).join(', ')}`);
        }
        assert.deepEqual(problems, [], 'axe-core found serious or critical violations');
        assert.deepEqual(errors, []);
        await context.close();
      });
    }
  }

  test('the skip link moves focus to the content and keeps the page', async () => {
    const { page, context } = await openPage(browser, spool.base, 'fit');
    await page.getByTestId('verdict').waitFor();
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to content');
    await page.keyboard.press('Enter');
    await page.waitForTimeout(100);
    assert.equal(new URL(page.url()).hash, '#/fit', 'the skip link changed the route');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'main');
    assert.equal(await page.getByRole('heading', { name: 'Fit plan' }).count(), 1);
    await context.close();
  });

  test('every page is keyboard reachable and named at 800 px', async () => {
    const { page, context } = await openPage(browser, spool.base, 'chat', { viewport: narrow });
    for (const label of ['Chat', 'Model', 'Fit', 'Experts', 'Atlas', 'Settings']) {
      const link = page.getByRole('link', { name: label, exact: true });
      assert.equal(await link.count(), 1, `no link named ${label}`);
      assert.ok(await link.isVisible(), `${label} is not visible`);
    }
    const names = [];
    for (let i = 0; i < 10; i++) {
      await page.keyboard.press('Tab');
      names.push(await page.evaluate(() => document.activeElement?.getAttribute('title') ?? document.activeElement?.textContent?.trim() ?? ''));
    }
    for (const label of ['Chat', 'Model', 'Fit', 'Experts', 'Atlas', 'Settings']) assert.ok(names.includes(label), `${label} is not reachable with Tab: ${names.join(' | ')}`);
    await context.close();
  });

  test('at 800 px the conversation list is a drawer', async () => {
    const { page, context, errors } = await openPage(browser, spool.base, 'chat', { viewport: narrow });
    await page.evaluate(() => {
      const now = Date.now();
      const convs = ['Regular expressions', 'Paths'].map((title, i) => ({ id: 'c' + i, title, updated: now - i, turns: [{ role: 'user', content: title + '?' }, { role: 'assistant', content: 'About ' + title, finish: 'stop' }] }));
      localStorage.setItem('spool.conversations.v1', JSON.stringify(convs));
    });
    await page.reload();
    const drawer = page.locator('#conversations');
    const toggle = page.getByRole('button', { name: 'Conversations' });
    assert.ok(!(await drawer.isVisible()), 'the list shows without being opened');
    await toggle.click();
    await page.getByRole('button', { name: 'Paths', exact: true }).waitFor({ state: 'visible' });
    assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
    await shot(page, 'chat-800-drawer');
    await page.keyboard.press('Escape');
    await drawer.waitFor({ state: 'hidden' });
    await toggle.click();
    await page.getByRole('button', { name: 'Paths', exact: true }).click();
    await drawer.waitFor({ state: 'hidden' });
    assert.equal(await page.locator('.chat-title').innerText(), 'Paths');
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('the heat map changes after a reply', async () => {
    const { page, context, errors } = await openPage(browser, spool.base, 'experts');
    const canvas = page.getByTestId('heatmap');
    await canvas.waitFor();
    assert.equal(await canvas.getAttribute('data-cells'), String(6 * 64));
    await page.waitForFunction(() => Number(document.querySelector('.heat-wrap')?.dataset.updates ?? 0) >= 1);
    await page.waitForTimeout(1000);
    const digest = async () => createHash('sha256').update(await canvas.screenshot()).digest('hex');
    const before = await digest();
    const updates = Number(await page.locator('.heat-wrap').getAttribute('data-updates'));
    const r = await fetch(spool.base + '/v1/chat/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'spool', messages: [{ role: 'user', content: 'What does the function heapq.heappush do?' }], max_tokens: 24 }),
    });
    assert.equal(r.status, 200);
    await page.waitForFunction((n) => Number(document.querySelector('.heat-wrap')?.dataset.updates ?? 0) > n + 1, updates, { timeout: 15000 });
    assert.notEqual(await digest(), before, 'the heat map did not change after a reply');
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('the GLM-5.2 heat map: hits are outlined, fills are the legend’s colours', async () => {
    const { page, context, errors } = await openPage(browser, spool.base, 'experts?simulate=glm52', { colorScheme: 'dark' });
    const canvas = page.getByTestId('heatmap');
    await canvas.waitFor();
    assert.equal(await canvas.getAttribute('data-cells'), '19456');
    await page.waitForFunction(() => Number(document.querySelector('.heat-wrap')?.dataset.updates ?? 0) >= 12);
    // Every cell's centre is the colour its tier and usage give, whether
    // or not it was just hit (a hit only draws an outline).
    const check = await canvas.evaluate((c) => {
      const m = c.heatmap;
      const ctx = c.getContext('2d');
      const dpr = window.devicePixelRatio || 1;
      let hits = 0;
      let bad = 0;
      let checked = 0;
      const samples = [];
      const now = performance.now();
      m.draw(now);
      for (let i = 0; i < m.cells; i += 7) {
        const rc = m.cellRect(i);
        if (rc.w < 3 || rc.h < 3) continue;
        const px = ctx.getImageData(Math.floor((rc.x + rc.w / 2) * dpr), Math.floor((rc.y + rc.h / 2) * dpr), 1, 1).data;
        const want = m.fillOf(i);
        checked++;
        if (m.flashing(i, now)) hits++;
        if (Math.abs(px[0] - want[0]) + Math.abs(px[1] - want[1]) + Math.abs(px[2] - want[2]) > 9) {
          bad++;
          if (bad < 4) samples.push({ i, rc, px: [...px], want, flashing: m.flashing(i, now), info: m.cellInfo(i) });
        }
      }
      return { hits, bad, checked, samples };
    });
    assert.ok(check.checked > 1000, `checked ${check.checked} cells`);
    assert.ok(check.hits > 0, 'no cell was flashing');
    assert.equal(check.bad, 0, `${check.bad} cell fills are not a legend colour: ${JSON.stringify(check.samples)}`);
    assert.equal(await page.getByTestId('heat-legend').locator('.ramp').count(), 3);
    await canvas.focus();
    await page.keyboard.press('ArrowRight');
    await page.locator('.tooltip').waitFor();
    await shot(page, 'experts-glm52-dark');
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('the atlas: points reachable by keyboard, visible in dark mode', async () => {
    const { page, context, errors } = await openPage(browser, spool.base, 'atlas', { colorScheme: 'dark' });
    const canvas = page.getByTestId('atlas');
    await page.waitForFunction(() => Number(document.querySelector('[data-testid=atlas]')?.dataset.drawn ?? 0) > 0);
    const visible = await canvas.evaluate((c) => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let strong = 0;
      for (let i = 3; i < d.length; i += 4) if (d[i] >= 200) strong++;
      return strong;
    });
    assert.ok(visible > 1500, `only ${visible} strongly painted pixels in dark mode`);
    const detail = page.getByTestId('atlas-detail');
    await page.keyboard.press('Tab');
    for (let i = 0; i < 12 && !(await canvas.evaluate((c) => c === document.activeElement)); i++) await page.keyboard.press('Tab');
    assert.ok(await canvas.evaluate((c) => c === document.activeElement), 'the atlas is not reachable with Tab');
    const first = await detail.innerText();
    assert.match(first, /^Layer \d+, expert \d+/);
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowDown');
    assert.notEqual(await detail.innerText(), first, 'the arrow keys did not move to another expert');
    assert.ok(await page.locator('.tooltip').isVisible());
    await shot(page, 'atlas-keyboard-dark');
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('the fit page plans GLM-5.2 before it is downloaded', async () => {
    const { page, context, errors } = await openPage(browser, spool.base, 'fit', { viewport: narrow });
    const verdict = page.getByTestId('verdict');
    await verdict.waitFor();
    assert.match(await verdict.innerText(), /GLM-5\.2/);
    // The engine's own sequence count and context, the model's limit in
    // the context choices, the pinned artifact's resident weights.
    assert.equal(await page.getByLabel('Sequences decoded together').inputValue(), '4');
    const contexts = await page.getByLabel('Context (tokens per sequence)').locator('option').allInnerTexts();
    assert.ok(contexts.some((t) => t.startsWith('1,048,576')), `contexts: ${contexts}`);
    const resident = await page.getByTestId('plan-table').locator('tr', { hasText: 'resident weights' }).locator('td.num').innerText();
    // (The embedding table is read by row on demand, not resident.)
    assert.equal(resident, '9.24 GiB');
    // The speed to expect, beside the plan: with no probes on this machine
    // (a fresh cache directory), an Apple M4 Pro's published figures; the
    // chip picker changes it.
    // (A plan that does not fit has no speed: plan for 48 GiB first.)
    await page.getByLabel('Memory').fill('48');
    const speed = page.getByTestId('speed');
    await speed.getByTestId('speed-decode').waitFor();
    assert.match(await speed.innerText(), /tokens\/s decoding[\s\S]*Apple M4 Pro[\s\S]*spool bench probe/);
    const m4pro = await speed.getByTestId('speed-decode').innerText();
    await page.getByLabel('Speed on').selectOption('M1');
    await page.getByTestId('speed').filter({ hasText: 'Apple M1 (' }).waitFor();
    assert.notEqual(await page.getByTestId('speed-decode').innerText(), m4pro, 'a slower SSD predicts another decode speed');
    // The what-ifs: memory and context change the plan.
    const kv = () => page.getByTestId('plan-table').locator('tr', { hasText: 'KV cache' }).locator('td.num').innerText();
    const kvBefore = await kv();
    assert.match(await page.getByTestId('speed-agent').innerText(), /20,000-token first prompt does not fit a 4,096-token context/);
    await page.getByLabel('Context (tokens per sequence)').selectOption('32768');
    await page.waitForFunction((b) => {
      const td = [...document.querySelectorAll('[data-testid=plan-table] tr')].find((r) => r.textContent.includes('KV cache'))?.querySelector('td.num');
      return td && td.textContent !== b;
    }, kvBefore);
    // A coding agent's 20,000-token prompt on the chosen chip: how long it
    // takes, in how many segments.
    await page.getByTestId('speed-agent-time').waitFor();
    assert.match(await page.getByTestId('speed-agent').innerText(), /20,000-token first prompt takes about [\d.]+ (s|min|h) to read in (one segment|\d+ segments)/);
    // "This machine" does not overlap the slider or its value.
    const boxes = await page.evaluate(() => ['#fit-memory', '#fit-memory-out'].map((s) => document.querySelector(s).getBoundingClientRect().toJSON()).concat([[...document.querySelectorAll('button')].find((b) => b.textContent === 'This machine').getBoundingClientRect().toJSON()]));
    const overlap = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    assert.ok(!overlap(boxes[2], boxes[0]) && !overlap(boxes[2], boxes[1]), `"This machine" overlaps: ${JSON.stringify(boxes)}`);
    await shot(page, 'fit-glm52-800');
    // The served model is one click away.
    await page.getByRole('radio', { name: /glm52-demo/ }).click();
    await page.getByTestId('verdict').filter({ hasText: 'glm52-demo' }).waitFor();
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('the thinking switch shows only for a model that can think', async () => {
    const { page, context } = await openPage(browser, spool.base, 'chat');
    await page.getByTestId('chat-model').filter({ hasText: 'glm52-demo' }).waitFor();
    assert.ok(await page.getByRole('switch', { name: 'Thinking' }).isVisible(), 'the demo template has a thinking switch');
    await context.close();
    // The same server, as if its model's template had no thinking switch.
    const c2 = await browser.newContext({ viewport: wide });
    const p2 = await c2.newPage();
    await p2.routeWebSocket(/\/v1\/events/, (ws) => {
      const server = ws.connectToServer();
      server.onMessage((m) => {
        const ev = JSON.parse(String(m));
        if (ev.type === 'hello') ev.data.thinking = false;
        ws.send(JSON.stringify(ev));
      });
    });
    await p2.goto(`${spool.base}/#/chat`);
    await p2.getByTestId('chat-model').filter({ hasText: 'glm52-demo' }).waitFor();
    assert.equal(await p2.getByRole('switch', { name: 'Thinking' }).count(), 0);
    await c2.close();
  });

  test('a settings file that cannot be used is named, and Reset sets it aside', async () => {
    const file = join(spool.home, 'settings.json');
    writeFileSync(file, '{"port": 80', { mode: 0o600 });
    const { page, context, errors } = await openPage(browser, spool.base, 'settings');
    await page.getByRole('alert').filter({ hasText: file }).waitFor();
    await shot(page, 'settings-unusable');
    await page.getByTestId('settings-reset').click();
    await page.getByLabel('Bind address').waitFor();
    await page.getByText('The old file was kept as').waitFor();
    const aside = readdirSync(spool.home).filter((n) => n.startsWith('settings.json.reset-'));
    assert.equal(aside.length, 1);
    assert.equal(readFileSync(join(spool.home, aside[0]), 'utf8'), '{"port": 80');
    // The page saves again.
    await page.getByLabel('Port').fill('9123');
    await page.locator('form', { has: page.getByLabel('Bind address') }).getByRole('button', { name: 'Save' }).click();
    await page.getByText(/^Saved\./).waitFor();
    assert.equal(JSON.parse(readFileSync(file, 'utf8')).port, 9123);
    assert.deepEqual(errors, []);
    await context.close();
  });
});
