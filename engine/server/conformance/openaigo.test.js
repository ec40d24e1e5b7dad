// openai-go v1.x (the Go SDK that Genkit, mods and fabric are built on)
// streams chat completions and a Responses answer: its decoder dispatches
// an event on every blank line, so this is the strictest client of the
// suite's event streams. The client is a Go module of its own (openaigo/),
// run with `go run` against the suite's server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KEY, baseURL } from './common.js';

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'openaigo');

test('openai-go v1: chat completion and Responses streams', { timeout: 600000 }, () => {
  const r = spawnSync('go', ['run', '.'], {
    cwd: dir,
    env: { ...process.env, SPOOL_BASE_URL: baseURL, SPOOL_API_KEY: KEY },
    encoding: 'utf8',
  });
  assert.equal(r.error, undefined, `go run: ${r.error}`);
  assert.equal(r.status, 0, `openai-go v1 failed:\n${r.stdout}${r.stderr}`);
  assert.match(r.stdout, /ok: chat completion stream\nok: responses stream\n/);
});
