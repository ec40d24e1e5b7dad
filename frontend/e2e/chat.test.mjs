// The chat against a Spool server on the demo model with a 1,536-token
// context: streaming, true status (idle within a second of a reply's end,
// one tok/s figure), prompt progress before the first token, the context
// meter and the limit flow, stop, the chat actions, links and images, and
// the streaming renderer's main-thread cost on a 1,500-token reply.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { launchBrowser, openPage, saveArtifact, shot, startSpool, until } from './helpers.mjs';

let spool;
let browser;

before(async () => {
  [spool, browser] = await Promise.all([startSpool({ args: ['--context', '1536'] }), launchBrowser()]);
});

after(async () => {
  await browser?.close();
  await spool?.stop();
});

const send = async (page, text) => {
  await page.getByLabel('Message', { exact: true }).fill(text);
  await page.getByTestId('send').click();
};
const replyDone = (page, timeout = 60000) => page.getByTestId('send').filter({ hasText: 'Send' }).waitFor({ timeout });

/** watchStatus records in the page every text the sidebar status shows. */
const watchStatus = (page) =>
  page.evaluate(() => {
    const el = document.querySelector('[data-testid=engine-status]');
    window.__status = [{ t: performance.now(), text: el.textContent }];
    new MutationObserver(() => window.__status.push({ t: performance.now(), text: el.textContent })).observe(el, { subtree: true, characterData: true, childList: true });
    const send = document.querySelector('[data-testid=send]');
    window.__send = [];
    new MutationObserver(() => window.__send.push({ t: performance.now(), text: send.textContent })).observe(send, { childList: true, characterData: true, subtree: true });
    // The streaming caret may show for less than a poll interval when the
    // reply is quick: record that it appeared rather than wait to see it.
    window.__caret = false;
    const isCaret = (n) => n.nodeType === 1 && (n.matches('.turn.assistant .caret') || n.querySelector('.turn.assistant .caret') !== null);
    new MutationObserver((records) => {
      window.__caret ||= records.some((r) => [...r.addedNodes].some(isCaret));
    }).observe(document.body, { subtree: true, childList: true });
  });

describe('chat', () => {
  test('a reply streams; the status turns ready at once with the reply’s own figure', async () => {
    const { page, context, errors } = await openPage(browser, spool.base, 'chat');
    await page.getByTestId('chat-model').filter({ hasText: 'glm52-demo' }).waitFor();
    await watchStatus(page);
    await send(page, 'What does the function re.compile do?');
    await replyDone(page);
    assert.ok(await page.evaluate(() => window.__caret), 'no streaming caret appeared while the reply streamed');
    const text = (await page.locator('.turn.assistant .body').last().innerText()).trim();
    assert.ok(text.length > 10, `the reply is too short: ${JSON.stringify(text)}`);
    assert.doesNotMatch(text, /Error:/);
    // The end of the reply (Stop turns back into Send) and the first
    // "Ready" after "Generating": that Ready is the end's own state event,
    // not a later refresh, for it carries the reply's own figure (below).
    await page.waitForFunction(() => window.__status.some((s) => s.text.startsWith('Ready') && s.t > (window.__status.find((x) => x.text.startsWith('Generating'))?.t ?? Infinity)), null, { timeout: 3000 });
    const { status, sends } = await page.evaluate(() => ({ status: window.__status, sends: window.__send }));
    const generating = status.findIndex((s) => s.text.startsWith('Generating') || s.text.startsWith('Reading'));
    assert.ok(generating >= 0, `the status never said generating: ${JSON.stringify(status)}`);
    const ready = status.slice(generating).find((s) => s.text.startsWith('Ready'));
    const ended = sends.findLast((s) => s.text === 'Send');
    assert.ok(ready, `no Ready after Generating: ${JSON.stringify(status)}`);
    assert.ok(ended, 'Stop never turned back into Send');
    // One figure: the sidebar's "last reply" is the reply's own.
    const meta = await page.getByTestId('turn-meta').last().innerText();
    const figure = meta.match(/([\d.]+) tok\/s/)?.[1];
    assert.ok(figure, `no tok/s in ${meta}`);
    assert.match(ready.text, new RegExp(`last reply ${figure.replace('.', '\\.')} tok/s`));
    assert.match(await page.locator('.chat-title').innerText(), /re\.compile/);
    await shot(page, 'chat-reply-light');
    await page.reload();
    await page.locator('.turn.assistant .body').last().waitFor();
    assert.equal(await page.locator('.conv-list .conv').count(), 1);
    await page.emulateMedia({ colorScheme: 'dark' });
    await shot(page, 'chat-reply-dark');
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('a long prompt shows its reading progress, then the figures; the context meter and the limit flow', async () => {
    const { page, context, errors } = await openPage(browser, spool.base, 'chat');
    await page.getByTestId('chat-model').filter({ hasText: 'glm52-demo' }).waitFor();
    await page.getByRole('button', { name: '+ New chat' }).click();
    await page.evaluate(() => {
      window.__prefill = [];
      window.__firstText = null;
      new MutationObserver(() => {
        const p = document.querySelector('[data-testid=prefill]');
        if (p && p.textContent.startsWith('Reading prompt')) window.__prefill.push({ t: performance.now(), text: p.textContent });
        const body = document.querySelector('.turn.assistant:last-of-type .body');
        if (window.__firstText === null && body && body.textContent.trim()) window.__firstText = performance.now();
      }).observe(document.querySelector('[data-testid=transcript]'), { subtree: true, childList: true, characterData: true });
    });
    const long = 'Explain how shutil.copytree handles symlinks, ignore patterns and existing directories. '.repeat(48);
    await send(page, long);
    // The observer records the progress; waiting to see it could miss a
    // quick prefill between two polls.
    await page.waitForFunction(() => window.__prefill.length > 0, null, { timeout: 20000 });
    await shot(page, 'chat-reading-prompt');
    await replyDone(page);
    const { prefill, firstText } = await page.evaluate(() => ({ prefill: window.__prefill, firstText: window.__firstText }));
    assert.ok(prefill.length > 0, 'no prompt progress was shown');
    const m = prefill[0].text.match(/Reading prompt — ([\d,]+) of ([\d,]+) tokens/);
    assert.ok(m, prefill[0].text);
    assert.ok(Number(m[1].replace(/,/g, '')) < Number(m[2].replace(/,/g, '')), 'the first progress already said done');
    assert.ok(firstText === null || prefill[0].t < firstText, 'the progress came after the first token');
    const meta = await page.getByTestId('turn-meta').last().innerText();
    // The decode speed needs two tokens; the prompt's speed is there anyway.
    // A sampled reply may run to the end of the 1,536-token context, which
    // the line before the figures says.
    assert.match(meta, /^(Cut at the token limit\n)?[\d,]+ tokens?( · [\d.]+ tok\/s)? · prompt [\d,]+ tokens read at [\d.]+ tok\/s/);
    // The meter counts the conversation.
    const meter = page.getByTestId('context-meter');
    const used = Number(await meter.getAttribute('aria-valuenow'));
    assert.equal(await meter.getAttribute('aria-valuemax'), '1536');
    assert.ok(used > 800, `the meter says ${used} tokens`);
    // The next turn reuses the cached prefix, and no longer fits with
    // the first: the oldest turn is left out, and the thread says so.
    await send(page, 'Now compare it with distutils.dir_util.copy_tree in a few words. '.repeat(12));
    await replyDone(page);
    await page.getByTestId('context-divider').waitFor();
    const banner = page.getByTestId('context-limit');
    await banner.waitFor();
    assert.match(await banner.innerText(), /1,536-token context/);
    await shot(page, 'chat-context-limit');
    await banner.getByRole('button', { name: 'New chat' }).click();
    await page.getByRole('heading', { name: 'Ask something' }).waitFor();
    assert.equal(await page.getByTestId('context-meter').getAttribute('aria-valuenow'), '0');
    // A reply that reused the cache says so.
    await send(page, 'What does the function re.compile do?');
    await replyDone(page);
    await page.getByRole('button', { name: 'Regenerate' }).click();
    await replyDone(page);
    assert.match(await page.getByTestId('turn-meta').last().innerText(), /cached prefix reused \([\d,]+ tokens\)/);
    // A message longer than the whole context is refused before it is sent.
    await page.getByRole('button', { name: '+ New chat' }).click();
    await send(page, 'Tell me about zipfile. '.repeat(400));
    await replyDone(page);
    assert.match(await page.locator('.turn.assistant .body').last().innerText(), /This message is [\d,]+ tokens long; the model's context holds 1,536 tokens/);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('stop ends a reply and keeps its token count', async () => {
    const { page, context, errors } = await openPage(browser, spool.base, 'chat');
    await page.getByTestId('chat-model').filter({ hasText: 'glm52-demo' }).waitFor();
    await page.getByRole('button', { name: '+ New chat' }).click();
    // A long prompt keeps the engine reading for a while: stop it there,
    // whatever (and however fast) the demo model would answer.
    await page.evaluate(() => {
      const t = document.querySelector('[data-testid=transcript]');
      const obs = new MutationObserver(() => {
        if (t.querySelector('[data-testid=prefill]')?.textContent.startsWith('Reading prompt')) {
          obs.disconnect();
          document.querySelector('[data-testid=send]').click();
        }
      });
      obs.observe(t, { subtree: true, childList: true, characterData: true });
    });
    await send(page, 'What does the method str.split do? Explain the separator and maxsplit arguments with examples. '.repeat(50));
    await replyDone(page, 30000);
    await page.locator('.turn.assistant .badge', { hasText: 'Stopped' }).waitFor({ timeout: 5000 });
    // The counts come from the engine's own summary of the request.
    const meta = page.getByTestId('turn-meta').last();
    await meta.filter({ hasText: /\d+ tokens? · prompt [\d,]+ tokens/ }).waitFor({ timeout: 5000 });
    const prompt = Number((await meta.innerText()).match(/prompt ([\d,]+) tokens/)[1].replace(/,/g, ''));
    assert.ok(prompt > 500, `the stopped reply counts a ${prompt}-token prompt`);
    assert.doesNotMatch(await meta.innerText(), /read at/, 'a prompt stopped while read has no reading speed');
    await shot(page, 'chat-stopped');
    // The server saw the client go and cancelled the generation.
    await until(async () => (await (await fetch(spool.base + '/stats')).json()).last_turn?.finish_reason === 'cancelled', { what: 'the cancelled request' });
    const r = await fetch(spool.base + '/v1/chat/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'spool', messages: [{ role: 'user', content: 'What does the function os.getcwd do?' }], max_tokens: 8 }),
    });
    assert.equal(r.status, 200);
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('regenerate, edit and resend, copy, rename, search, delete and undo', async () => {
    const { page, context, errors } = await openPage(browser, spool.base, 'chat', { permissions: ['clipboard-read', 'clipboard-write'] });
    await page.evaluate(() => {
      const turns = [{ role: 'user', content: 'What does the class collections.Counter do?' }, { role: 'assistant', content: 'It counts hashable objects.', finish: 'stop' }];
      localStorage.setItem('spool.conversations.v1', JSON.stringify([{ id: 'counter', title: 'Counting', updated: Date.now() - 1000, turns }]));
    });
    await page.reload();
    await page.getByTestId('chat-model').filter({ hasText: 'glm52-demo' }).waitFor();
    await page.getByRole('button', { name: '+ New chat' }).click();
    await send(page, 'What does the function os.path.join do?');
    await replyDone(page);
    // Regenerate replaces the reply.
    await page.getByRole('button', { name: 'Regenerate' }).click();
    await replyDone(page);
    assert.equal(await page.locator('.turn.assistant').count(), 1);
    assert.equal(await page.getByRole('button', { name: 'Regenerate' }).count(), 1);
    // Copy puts the reply's text on the clipboard.
    await page.locator('.turn.assistant').getByRole('button', { name: 'Copy' }).first().click();
    const clip = await page.evaluate(() => navigator.clipboard.readText());
    // The clipboard holds the reply's Markdown and the page its rendering:
    // compare their letters and digits only (a sampled reply may open with an
    // unmatched '*' that renders as itself, or a list marker that does not).
    const bare = (s) => s.replace(/[^\p{L}\p{N}]/gu, '');
    const shown = bare(await page.locator('.turn.assistant .body').innerText());
    assert.ok(clip.length > 10 && shown.includes(bare(clip.split('\n')[0].replace(/^\s*(?:[-+>]|\d+[.)])\s+/, '')).slice(0, 20)), `clipboard: ${clip}`);
    // Edit and resend: the question changes, the old reply goes.
    await page.locator('.turn.user').getByRole('button', { name: 'Edit' }).click();
    await page.getByLabel('Edit your message').fill('What does the function os.path.basename do?');
    await page.getByRole('button', { name: 'Save and send' }).click();
    await replyDone(page);
    assert.equal(await page.locator('.turn.user .body').innerText(), 'What does the function os.path.basename do?');
    assert.equal(await page.locator('.turn').count(), 2);
    // Rename.
    const list = page.getByTestId('conv-list');
    await list.getByRole('button', { name: /^Rename/ }).first().click();
    await page.getByLabel('Conversation name').fill('Path questions');
    await page.keyboard.press('Enter');
    await list.getByRole('button', { name: 'Path questions', exact: true }).waitFor();
    assert.equal(await page.locator('.chat-title').innerText(), 'Path questions');
    // Search finds conversations by title and by content.
    const total = await list.locator('.conv').count();
    assert.ok(total >= 2);
    const search = page.getByLabel('Search conversations');
    await search.fill('basename');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid=conv-list] .conv').length === 1);
    assert.match(await list.locator('.conv').innerText(), /Path questions/);
    await search.fill('no conversation has this');
    await list.getByText(/No conversation mentions/).waitFor();
    await search.fill('');
    // Delete, then undo.
    await list.getByRole('button', { name: 'Delete “Path questions”' }).click();
    assert.equal(await list.getByRole('button', { name: 'Path questions', exact: true }).count(), 0);
    await page.getByRole('button', { name: 'Undo' }).click();
    await list.getByRole('button', { name: 'Path questions', exact: true }).waitFor();
    assert.equal(await list.locator('.conv').count(), total);
    await page.reload();
    await page.getByTestId('conv-list').getByRole('button', { name: 'Path questions', exact: true }).waitFor();
    await shot(page, 'chat-actions');
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('links open in a browser window; images are not fetched and have alt text', async () => {
    const { page, context, errors } = await openPage(browser, spool.base, 'chat');
    const remote = [];
    await context.route(/^https?:\/\/(?!127\.0\.0\.1)/, (route) => {
      remote.push(route.request().url());
      route.fulfill({ status: 200, contentType: 'text/html', body: '<title>elsewhere</title>' });
    });
    const pixel = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    await page.evaluate((pixel) => {
      const reply = `See [the docs](https://docs.python.org/3/library/re.html) and a <a href="https://example.org/raw">raw link</a>.\n\n![A diagram of the cache](https://images.example.com/cache.png)\n\n![](https://images.example.com/no-alt.png)\n\n<img src="https://tracker.example.net/p.gif">\n\n![A red dot](${pixel})`;
      localStorage.setItem('spool.conversations.v1', JSON.stringify([{ id: 'links', title: 'Links', updated: Date.now(), turns: [{ role: 'user', content: 'links?' }, { role: 'assistant', content: reply, finish: 'stop' }] }]));
    }, pixel);
    await page.reload();
    const body = page.locator('.turn.assistant .body');
    await body.waitFor();
    await page.waitForTimeout(300);
    assert.deepEqual(remote, [], 'a remote resource was fetched');
    await body.getByRole('img', { name: 'Image not loaded: A diagram of the cache' }).waitFor();
    assert.equal(await body.getByRole('img', { name: 'Image not loaded: Image without a description' }).count(), 2);
    assert.equal(await body.getByRole('img', { name: 'A red dot' }).count(), 1);
    assert.equal(await body.locator('img:not([alt]), img[alt=""]').count(), 0);
    const url = page.url();
    for (const name of ['the docs', 'raw link']) {
      const [popup] = await Promise.all([context.waitForEvent('page'), body.getByRole('link', { name }).click()]);
      await popup.waitForLoadState();
      assert.match(popup.url(), /^https:\/\/(docs\.python\.org|example\.org)\//);
      assert.equal(await popup.evaluate(() => window.opener), null, 'the new window can reach the app');
      await popup.close();
    }
    assert.equal(page.url(), url, 'a link replaced the app');
    await shot(page, 'chat-links-images');
    assert.deepEqual(errors, []);
    await context.close();
  });

  test('a 1,500-token reply streams pinned to the bottom, with Jump to latest (its main-thread figures recorded)', async () => {
    const { page, context, errors } = await openPage(browser, spool.base, 'chat?simulate=1500');
    await page.evaluate(() => {
      window.__perf = { long: [], frames: [] };
      new PerformanceObserver((l) => window.__perf.long.push(...l.getEntries().map((e) => e.duration))).observe({ type: 'longtask' });
    });
    const cdp = await context.newCDPSession(page);
    await cdp.send('Performance.enable');
    const metrics = async () => Object.fromEntries((await cdp.send('Performance.getMetrics')).metrics.map((m) => [m.name, m.value]));
    const m0 = await metrics();
    await page.evaluate(() => {
      let last = performance.now();
      const f = (t) => {
        window.__perf.frames.push(t - last);
        last = t;
        if (!window.__perf.stop) requestAnimationFrame(f);
      };
      requestAnimationFrame(f);
    });
    await send(page, 'Explain re.compile at length');
    // Following: the view stays at the bottom as the reply grows.
    const transcript = page.getByTestId('transcript');
    await page.locator('.turn.assistant .md-frozen > *').nth(8).waitFor({ timeout: 20000 });
    const gap = await transcript.evaluate((t) => t.scrollHeight - t.scrollTop - t.clientHeight);
    assert.ok(gap < 60, `not following: ${gap} px from the bottom`);
    // Scrolled up: the view stays, "Jump to latest" is offered.
    await transcript.evaluate((t) => (t.scrollTop = 0));
    await page.getByRole('button', { name: /Jump to latest/ }).waitFor();
    assert.equal(await transcript.evaluate((t) => t.scrollTop), 0);
    await replyDone(page, 60000);
    const m1 = await metrics();
    const perf = await page.evaluate(() => {
      window.__perf.stop = true;
      const fr = window.__perf.frames.slice(1).sort((a, b) => a - b);
      return { longTasks: window.__perf.long.length, longestTaskMs: Math.round(Math.max(0, ...window.__perf.long)), longTaskMs: Math.round(window.__perf.long.reduce((a, b) => a + b, 0)), frames: fr.length, longestFrameMs: Math.round(fr.at(-1)), p95FrameMs: Math.round(fr[Math.floor(fr.length * 0.95)]) };
    });
    perf.mainThreadMs = Math.round((m1.TaskDuration - m0.TaskDuration) * 1000);
    perf.scriptMs = Math.round((m1.ScriptDuration - m0.ScriptDuration) * 1000);
    saveArtifact('streaming-1500-tokens.json', perf);
    console.log('# streaming a 1,500-token reply:', JSON.stringify(perf));
    // The figures are a measurement (saved above), not an assertion: a
    // test asserts no wall-clock bound.
    await page.getByRole('button', { name: /Jump to latest/ }).click();
    assert.ok((await transcript.evaluate((t) => t.scrollHeight - t.scrollTop - t.clientHeight)) < 60);
    // The incremental render equals a render of the whole reply (the
    // stored conversation after a reload).
    const rendered = () =>
      page.evaluate(() => {
        const body = document.querySelector('.turn.assistant:last-of-type .body');
        const tags = {};
        for (const el of body.querySelectorAll('*')) if (!el.classList.contains('md-frozen') && !el.classList.contains('md-live')) tags[el.tagName] = (tags[el.tagName] ?? 0) + 1;
        return { text: body.innerText, tags, code: body.querySelectorAll('.code').length, keywords: body.querySelectorAll('.hljs-keyword').length };
      });
    const streamed = await rendered();
    assert.ok(streamed.code > 3 && streamed.tags.TABLE > 1 && streamed.keywords > 10, `the streamed reply lacks code, tables or highlighting: ${JSON.stringify(streamed.tags)}`);
    await page.reload();
    await page.locator('.turn.assistant .body').last().waitFor();
    assert.deepEqual(await rendered(), streamed, 'the streamed render differs from the render of the whole reply');
    await shot(page, 'chat-streamed-1500');
    assert.deepEqual(errors, []);
    await context.close();
  });
});
