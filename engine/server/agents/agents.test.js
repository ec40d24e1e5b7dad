// Codex CLI, Claude Code, opencode and GitHub Copilot CLI (BYOK) in their default configurations,
// pointed at `spool serve` (run by run.mjs), each complete one turn
// without an error from Spool. The demo model's text is not meaningful:
// what is checked is that the agent exits cleanly, reports no API error,
// and that Spool served its request (the default system prompts and tools
// are 9-20k tokens, which is what makes these slow).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const baseURL = process.env.SPOOL_BASE_URL;
const KEY = process.env.SPOOL_API_KEY;
const bin = (name) => path.join(here, 'node_modules/.bin', name);
const TIMEOUT = 15 * 60 * 1000;

// A fresh home and working directory, so that no user configuration leaks in.
function sandbox(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `spool-${name}-`));
  const home = path.join(dir, 'home');
  const work = path.join(dir, 'work');
  fs.mkdirSync(home);
  fs.mkdirSync(work);
  fs.writeFileSync(path.join(work, 'README.md'), '# demo\n');
  return { dir, home, work };
}

function run(cmd, args, opts) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let stdout = '';
    p.stdout.on('data', (d) => {
      out += d;
      stdout += d;
    });
    p.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), TIMEOUT);
    p.on('error', reject);
    p.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, out, stdout });
    });
  });
}

async function stats() {
  const r = await fetch(`${baseURL}/stats`, { headers: { authorization: `Bearer ${KEY}` } });
  return (await r.json()).engine.scheduler;
}

test('codex exec completes a turn', { timeout: TIMEOUT }, async () => {
  const box = sandbox('codex');
  const codexHome = path.join(box.home, '.codex');
  fs.mkdirSync(codexHome);
  // The provider is the only setting a local model needs; update checks
  // and analytics are off, and retries too (each would be a new prefill).
  fs.writeFileSync(path.join(codexHome, 'config.toml'), `model = "glm52-demo"
model_provider = "spool"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.spool]
name = "Spool"
base_url = "${baseURL}/v1"
env_key = "SPOOL_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`);
  const before = (await stats()).requests;
  const r = await run(bin('codex'), ['exec', '--skip-git-repo-check', 'Say hello.'], {
    cwd: box.work, env: { PATH: process.env.PATH, HOME: box.home, CODEX_HOME: codexHome, SPOOL_API_KEY: KEY },
  });
  fs.rmSync(box.dir, { recursive: true, force: true });
  assert.equal(r.code, 0, r.out);
  assert.doesNotMatch(r.out, /^ERROR/m, r.out);
  assert.ok((await stats()).requests > before, 'spool served no request');
});

test('claude -p completes a turn', { timeout: TIMEOUT }, async () => {
  const box = sandbox('claude');
  const before = (await stats()).requests;
  const r = await run(bin('claude'), ['-p', 'Say hello.'], {
    cwd: box.work,
    env: {
      PATH: process.env.PATH, HOME: box.home,
      ANTHROPIC_BASE_URL: baseURL, ANTHROPIC_API_KEY: KEY,
      // Claude Code's switch for everything but the model: no telemetry,
      // error reports, update checks or feedback.
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    },
  });
  fs.rmSync(box.dir, { recursive: true, force: true });
  assert.equal(r.code, 0, r.out);
  assert.doesNotMatch(r.out, /API Error|prompt is too long/, r.out);
  assert.ok((await stats()).requests > before, 'spool served no request');
});

test('opencode run completes a turn', { timeout: TIMEOUT }, async () => {
  const box = sandbox('opencode');
  const configDir = path.join(box.home, '.config/opencode');
  fs.mkdirSync(configDir, { recursive: true });
  // Spool as a custom provider through the AI SDK's OpenAI-compatible
  // provider, which opencode bundles (nothing is installed at run time).
  // The limit is the demo model's context and an output cap (opencode asks
  // for 32k tokens otherwise), so a rambling reply cannot take minutes.
  fs.writeFileSync(path.join(configDir, 'opencode.json'), JSON.stringify({
    autoupdate: false,
    share: 'disabled',
    model: 'spool/glm52-demo',
    provider: {
      spool: {
        npm: '@ai-sdk/openai-compatible',
        name: 'Spool',
        options: { baseURL: `${baseURL}/v1`, apiKey: '{env:SPOOL_API_KEY}' },
        models: { 'glm52-demo': { name: 'glm52-demo', limit: { context: 32768, output: 4096 } } },
      },
    },
  }));
  const before = (await stats()).requests;
  const r = await run(bin('opencode'), ['run', '--format', 'json', 'Say hello.'], {
    cwd: box.work,
    env: {
      PATH: process.env.PATH, HOME: box.home, SPOOL_API_KEY: KEY,
      // opencode's switches for what is not the model: the models.dev
      // catalogue, update checks, session sharing and language-server
      // downloads. npm stays offline, so the plugin SDK that opencode
      // installs into its config directory in the background is skipped
      // (a warning in its log).
      OPENCODE_DISABLE_MODELS_FETCH: '1',
      OPENCODE_DISABLE_AUTOUPDATE: '1',
      OPENCODE_DISABLE_SHARE: '1',
      OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
      npm_config_offline: 'true',
    },
  });
  fs.rmSync(box.dir, { recursive: true, force: true });
  assert.equal(r.code, 0, r.out);
  // --format json prints one event per line: the model's text parts and a
  // step_finish when its answer ends.
  const events = r.stdout.split('\n').filter((l) => l.trim()).map((l) => {
    try {
      return JSON.parse(l);
    } catch {
      assert.fail(`not a JSON event: ${l}\n${r.out}`);
    }
  });
  assert.deepEqual(events.filter((e) => e.type === 'error'), [], r.out);
  assert.ok(events.some((e) => e.type === 'text' && e.part.text.length > 0), `no text event:\n${r.out}`);
  const finish = events.at(-1);
  assert.equal(finish?.type, 'step_finish', r.out);
  assert.match(finish.part.reason, /^(stop|length)$/, r.out);
  assert.ok(finish.part.tokens.output > 0, r.out);
  assert.ok((await stats()).requests > before, 'spool served no request');
});

// GitHub Copilot CLI in BYOK mode: COPILOT_PROVIDER_BASE_URL points it at
// Spool, and COPILOT_OFFLINE turns off everything else (GitHub sign-in,
// telemetry, web tools, the GitHub MCP server, updates). It runs on the
// chat completions wire, and on the Responses wire over Spool's WebSocket
// mode (which it would otherwise drop to HTTP).
for (const [wire, extra] of [
  ['chat completions', {}],
  ['responses over a websocket', { COPILOT_PROVIDER_WIRE_API: 'responses', COPILOT_PROVIDER_TRANSPORT: 'websockets' }],
]) {
  test(`copilot -p completes a turn (BYOK, ${wire})`, { timeout: TIMEOUT }, async () => {
    const box = sandbox('copilot');
    const logs = path.join(box.dir, 'logs');
    const before = (await stats()).requests;
    const r = await run(bin('copilot'), ['-p', 'Say hello.', '--allow-all-tools', '--log-level', 'debug', '--log-dir', logs], {
      cwd: box.work,
      env: {
        PATH: process.env.PATH, HOME: box.home,
        COPILOT_OFFLINE: 'true', COPILOT_AUTO_UPDATE: 'false',
        COPILOT_PROVIDER_BASE_URL: `${baseURL}/v1`, COPILOT_PROVIDER_API_KEY: KEY, COPILOT_MODEL: 'glm52-demo',
        // The demo model rambles: an output cap keeps the turn short.
        COPILOT_PROVIDER_MAX_OUTPUT_TOKENS: '256',
        ...extra,
      },
    });
    const log = fs.existsSync(logs) ? fs.readdirSync(logs).map((f) => fs.readFileSync(path.join(logs, f), 'utf8')).join('\n') : '';
    fs.rmSync(box.dir, { recursive: true, force: true });
    assert.equal(r.code, 0, r.out);
    assert.doesNotMatch(r.out, /^(Error|✗)|API error|Failed to/m, r.out);
    assert.ok((await stats()).requests > before, 'spool served no request');
    if (extra.COPILOT_PROVIDER_TRANSPORT) {
      // Its debug log names the socket it served the turn on.
      assert.match(log, /WebSocket responses connection established/, 'the turn did not go over the websocket');
    }
  });
}
