// The download of GLM-5.2 as a state machine, against a local stand-in for
// the Hugging Face Hub (frontend/e2e/standinhub, built on
// engine/download/fakehub; SPOOL_STANDIN_HUB names its binary). The hub
// serves the pinned repository and revision. First it lists the real
// artifact (357 GiB: more than this disk holds): "Not enough space", no
// Download. Then it serves the demo model's files, paced: progress, the
// indicator on another page, pause (no stale rate or time left), resume,
// cancel (confirmed), complete and packed (no Pause or Cancel), and Load
// GLM-5.2, after which the engine serves the download from Spool's store.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { statfsSync } from 'node:fs';
import { join } from 'node:path';
import { modelDir, openPage, repo, shot, startSpool, launchBrowser, until } from './helpers.mjs';

const standinBin = process.env.SPOOL_STANDIN_HUB ?? join(repo, 'bin', 'standinhub');

let hub;
let hubURL;
let spool;
let browser;

before(async () => {
  // About 4 s for the largest file of the demo model.
  hub = spawn(standinBin, ['-model', modelDir, '-rate', String(3 << 20)], { stdio: ['ignore', 'pipe', 'inherit'] });
  hubURL = await new Promise((ok, fail) => {
    hub.once('exit', (c) => fail(new Error(`standinhub exited with ${c}`)));
    hub.stdout.on('data', (d) => {
      const m = String(d).match(/listening (http:\/\/\S+)/);
      if (m) ok(m[1]);
    });
  });
  [spool, browser] = await Promise.all([startSpool({ env: { HF_ENDPOINT: hubURL, HF_HUB_OFFLINE: '' } }), launchBrowser()]);
});

after(async () => {
  await browser?.close();
  await spool?.stop();
  hub?.kill('SIGTERM');
});

const real = 383_760_077_466;
const listing = (mode) => fetch(`${hubURL}/_standin/mode?listing=${mode}`, { method: 'POST' }).then((r) => assert.equal(r.status, 200));

describe('the GLM-5.2 download', () => {
  test('not enough space, then progress, pause, resume, cancel, complete and load', async () => {
    // The real listing is more than this disk holds, or it gets a
    // padding file that makes it so.
    const st = statfsSync(spool.home);
    const pad = Math.max(0, st.bavail * st.bsize - real + 16e9);
    await listing(`real&pad=${pad}`);
    const { page, context, errors } = await openPage(browser, spool.base, 'model');
    page.on('dialog', (d) => errors.push(`a native dialog: ${d.message()}`));
    const actions = page.getByTestId('download-actions');
    await actions.getByRole('button', { name: 'Check plan and disk space' }).click();
    const verdict = page.getByTestId('preflight-verdict');
    await verdict.waitFor({ timeout: 20000 });
    assert.match(await verdict.innerText(), /^Not enough space/);
    if (pad === 0) assert.match(await page.locator('.card').filter({ hasText: 'Preflight' }).innerText(), /357 GiB \(384 GB\)/);
    assert.equal(await actions.getByRole('button', { name: /^(Download|Resume download)$/ }).count(), 0, 'Download is offered without the space');
    assert.equal(await actions.getByRole('button', { name: 'Choose another folder…' }).count(), 1);
    await shot(page, 'model-not-enough-space');

    // Another folder: the choice is kept, and planned there.
    await listing('content');
    await actions.getByRole('button', { name: 'Choose another folder…' }).click();
    const folder = join(spool.home, 'models');
    await page.getByLabel('Folder on a disk with room for the download').fill(folder);
    await page.getByRole('button', { name: 'Use this folder' }).click();
    await page.getByTestId('cache-dir').filter({ hasText: folder }).waitFor();
    await verdict.filter({ hasText: /^Enough space/ }).waitFor({ timeout: 20000 });
    // The model is packed as it downloads, unless the originals are kept:
    // the page says what each way takes on disk.
    await page.getByTestId('keep-original-cost').filter({ hasText: /packs the model as it downloads/ }).waitFor();
    assert.equal(await page.getByLabel('Keep the original files for other tools').isChecked(), false);

    await actions.getByRole('button', { name: 'Download', exact: true }).click();
    const state = page.getByTestId('download-state');
    await state.filter({ hasText: 'Downloading' }).waitFor();
    await page.getByTestId('download-rate').filter({ hasText: /\/s$/ }).waitFor({ timeout: 10000 });
    await shot(page, 'model-downloading');

    // On another page the sidebar says a download runs.
    await page.goto(`${spool.base}/#/chat`);
    const indicator = page.getByTestId('download-indicator');
    await indicator.waitFor();
    assert.match(await indicator.getAttribute('aria-label'), /Downloading GLM-5\.2/);
    await shot(page, 'chat-download-indicator');
    await indicator.click();
    await state.filter({ hasText: 'Downloading' }).waitFor();

    // Pause: no rate, no time left.
    await actions.getByRole('button', { name: 'Pause' }).click();
    await state.filter({ hasText: 'Paused' }).waitFor();
    await page.waitForTimeout(400);
    assert.equal(await page.getByTestId('download-rate').innerText(), '–');
    assert.equal(await page.getByTestId('download-eta').innerText(), '–');
    await shot(page, 'model-paused');
    await actions.getByRole('button', { name: 'Resume' }).click();
    await state.filter({ hasText: 'Downloading' }).waitFor();

    // Cancel asks first; keeping on downloads on.
    await actions.getByRole('button', { name: 'Cancel download…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Cancel the download?' });
    await dialog.waitFor();
    await shot(page, 'model-cancel-confirm');
    await dialog.getByRole('button', { name: 'Keep downloading' }).click();
    assert.match(await state.innerText(), /Downloading/);
    await actions.getByRole('button', { name: 'Cancel download…' }).click();
    await dialog.getByRole('button', { name: 'Cancel download' }).click();
    await state.filter({ hasText: 'Cancelled' }).waitFor();
    assert.equal(await page.getByTestId('download-rate').innerText(), '–');

    // The bytes are kept: downloading again resumes and completes.
    await actions.getByRole('button', { name: /^(Resume download|Download)$/ }).click();
    await state.filter({ hasText: 'Complete: every file verified' }).waitFor({ timeout: 60000 });
    assert.equal(await actions.getByRole('button', { name: /Pause|Cancel/ }).count(), 0, 'a finished download offers Pause or Cancel');
    assert.match(await page.getByTestId('download-packed').innerText(), /of \d+ shards/);
    const load = actions.getByRole('button', { name: 'Load GLM-5.2' });
    await load.waitFor();
    await shot(page, 'model-complete');

    // Load: the engine restarts on the download and the chat uses it.
    await load.click();
    await page.goto(`${spool.base}/#/chat`);
    await page.getByTestId('chat-model').filter({ hasText: 'GLM-5.2-colibri-int4-with-int8-mtp' }).waitFor({ timeout: 60000 });
    await until(async () => (await (await fetch(spool.base + '/v1/models')).json()).data[0].id === 'GLM-5.2-colibri-int4-with-int8-mtp', { what: 'the new model' });
    await page.getByLabel('Message', { exact: true }).fill('What does the function re.compile do?');
    await page.getByTestId('send').filter({ hasText: 'Send' }).and(page.locator(':enabled')).click();
    await page.getByTestId('send').filter({ hasText: 'Send' }).waitFor({ timeout: 60000 });
    assert.ok((await page.locator('.turn.assistant .body').innerText()).trim().length > 10);
    await shot(page, 'chat-downloaded-model');
    assert.deepEqual(errors, []);
    await context.close();
  });
});
