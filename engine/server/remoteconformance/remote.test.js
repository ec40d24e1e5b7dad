// The official openai and @anthropic-ai/sdk clients, unmodified, against
// `spool serve --remote`, with two remotes:
//
//   - the vLLM stand-in (engine/remote/standin: vLLM's error shapes,
//     max_model_len, reasoning field, tool-call deltas split across chunks,
//     usage in a last chunk) behind its own key;
//   - a second `spool serve` on the demo model;
//
// and a remote that is down. Started here on free ports:
//
//   SPOOL_BIN=../../../bin/spool SPOOL_MODEL=../../../assets/models/glm52-demo \
//   STANDIN_BIN=../../../bin/vllm-standin node --test
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');
const bin = process.env.SPOOL_BIN ?? path.join(root, 'bin/spool');
const model = process.env.SPOOL_MODEL ?? path.join(root, 'assets/models/glm52-demo');
const standinBin = process.env.STANDIN_BIN ?? path.join(root, 'bin/vllm-standin');

const FRONT_KEY = 'front-key-0123456789';
const VLLM_KEY = 'vllm-secret-key-ABCDEF';
const INNER_KEY = 'inner-spool-key-GHIJKL';
const QUESTION = 'What does the function os.path.join do?';
const WEATHER = {
  name: 'get_weather',
  description: 'Current weather of a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city', 'days'] },
};

const procs = [];
const logs = [];

/** start runs a command and resolves with the URL it prints "on http://...". */
function start(cmd, args) {
  const p = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  procs.push(p);
  const log = { text: '' };
  logs.push(log);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${cmd} ${args.join(' ')} did not start: ${log.text}`)), 60000);
    p.stderr.on('data', (d) => {
      log.text += d;
      const m = /listening on (http:\/\/\S+)|\bon (http:\/\/\S+) \(web UI/.exec(log.text);
      if (m) {
        clearTimeout(timer);
        resolve(m[1] ?? m[2]);
      }
    });
    p.on('exit', (code) => reject(new Error(`${cmd} exited with ${code}: ${log.text}`)));
  });
}

function closedPort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

const front = (remote, key) => start(bin, ['serve', '--port', '0', '--api-key', FRONT_KEY, '--remote', remote, '--remote-key', key]);
const clients = (url) => ({
  openai: new OpenAI({ baseURL: `${url}/v1`, apiKey: FRONT_KEY, maxRetries: 0 }),
  anthropic: new Anthropic({ baseURL: url, apiKey: FRONT_KEY, maxRetries: 0 }),
  url,
});

let vllm; // the front of the stand-in
let spool; // the front of the second spool serve
let down; // the front of a remote that is down
let standinURL;

before(async () => {
  const [s, inner, port] = await Promise.all([
    start(standinBin, ['--key', VLLM_KEY]),
    start(bin, ['serve', '--model', model, '--port', '0', '--api-key', INNER_KEY, '--max-batch', '4']),
    closedPort(),
  ]);
  standinURL = s;
  const [a, b, c] = await Promise.all([front(`${s}/v1`, VLLM_KEY), front(inner, INNER_KEY), front(`http://127.0.0.1:${port}`, 'unused-key-000')]);
  vllm = clients(a);
  spool = clients(b);
  down = clients(c);
});

after(() => {
  for (const p of procs) p.kill('SIGTERM');
  // No process printed a remote key.
  for (const log of logs) {
    for (const key of [VLLM_KEY, INNER_KEY]) assert.ok(!log.text.includes(key), `a key in the log: ${log.text}`);
  }
});

const standinStats = async () => (await fetch(`${standinURL}/standin/stats`)).json();

test('models: the remotes\' own, with their context', async () => {
  const a = await vllm.openai.models.list();
  assert.deepEqual(a.data.map((m) => m.id), ['glm-5.2-fp8']);
  assert.equal(a.data[0].max_model_len, 131072);
  assert.equal(a.data[0].context_length, 131072);
  const b = await spool.openai.models.list();
  assert.equal(b.data[0].id, 'glm52-demo');
  assert.ok(b.data[0].context_length > 0);
  await assert.rejects(vllm.openai.models.retrieve('gpt-9'), OpenAI.NotFoundError);
});

test('chat through the stand-in: reasoning, stream, tools split across chunks', async () => {
  const r = await vllm.openai.chat.completions.create({ model: 'spool', messages: [{ role: 'user', content: 'hello [[think]]' }], max_tokens: 20 });
  assert.equal(r.model, 'glm-5.2-fp8');
  assert.equal(r.choices[0].message.content, 'You said: hello');
  assert.equal(r.choices[0].message.reasoning, 'Let me think about that.');
  const stream = await vllm.openai.chat.completions.create({ messages: [{ role: 'user', content: 'a b c' }], stream: true });
  let text = '';
  for await (const chunk of stream) {
    assert.equal(chunk.usage, undefined, 'a usage chunk the client did not ask for');
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, 'You said: a b c');
  // The SDK's stream helper reassembles the split arguments.
  const tools = [{ type: 'function', function: { name: WEATHER.name, parameters: WEATHER.input_schema } }];
  const final = await vllm.openai.chat.completions.stream({ messages: [{ role: 'user', content: 'weather?' }], tools, stream_options: { include_usage: true } }).finalChatCompletion();
  const call = final.choices[0].message.tool_calls[0];
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris', days: 3 });
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.ok(final.usage.completion_tokens > 0);
});

test('chat through a second spool serve equals the figures it reports', async () => {
  const ask = { messages: [{ role: 'user', content: QUESTION }], max_tokens: 24, temperature: 0 };
  const whole = await spool.openai.chat.completions.create(ask);
  assert.ok(whole.choices[0].message.content.length > 0);
  const stream = await spool.openai.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
  const stats = await (await fetch(`${spool.url}/stats`, { headers: { authorization: `Bearer ${FRONT_KEY}` } })).json();
  assert.equal(stats.engine.kind, 'remote');
  assert.equal(stats.engine.remote.reachable, true);
  assert.equal(stats.last_turn.completion_tokens, usage.completion_tokens);
  assert.ok(stats.last_turn.decode_tokens_per_second > 0);
  assert.ok(!JSON.stringify(stats).includes(INNER_KEY));
});

test('completions and responses pass through', async () => {
  const c = await vllm.openai.completions.create({ model: 'glm-5.2-fp8', prompt: 'x y', max_tokens: 8 });
  assert.equal(c.choices[0].text, 'You said: x y');
  const r = await vllm.openai.responses.create({ input: 'x y z' });
  assert.equal(r.output_text, 'You said: x y z');
  let text = '';
  for await (const ev of await vllm.openai.responses.create({ input: 'x y z', stream: true })) {
    if (ev.type === 'response.output_text.delta') text += ev.delta;
  }
  assert.equal(text, 'You said: x y z');
  const got = await vllm.openai.responses.retrieve(r.id);
  assert.equal(got.id, r.id);
  const s = await spool.openai.responses.create({ input: QUESTION, max_output_tokens: 12, temperature: 0 });
  assert.ok(s.output_text.length > 0);
});

test('errors: the remote\'s mapped, the gateway\'s own', async () => {
  const ask = (content) => ({ messages: [{ role: 'user', content }], max_tokens: 10 });
  await assert.rejects(vllm.openai.chat.completions.create(ask('[[status 400]]')), (e) => e instanceof OpenAI.BadRequestError && e.message.includes('stand-in error 400'));
  await assert.rejects(vllm.openai.chat.completions.create(ask('[[status 429]]')), OpenAI.RateLimitError);
  await assert.rejects(vllm.openai.chat.completions.create(ask('[[status 500]]')), (e) => e instanceof OpenAI.InternalServerError && e.status === 502 && e.code === 'remote_error');
  await assert.rejects(vllm.openai.chat.completions.create({ ...ask('x'), model: 'gpt-9' }), (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
  await assert.rejects(vllm.openai.chat.completions.create({ ...ask('x'), max_tokens: 200000 }), (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded');
  await assert.rejects(down.openai.chat.completions.create(ask('x')), (e) => e instanceof OpenAI.InternalServerError && e.status === 502 && e.code === 'remote_unreachable');
  await assert.rejects(down.anthropic.messages.create({ model: 'claude-x', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }), (e) => e instanceof Anthropic.InternalServerError && e.status === 502);
  const anon = new OpenAI({ baseURL: `${vllm.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(anon.models.list(), OpenAI.AuthenticationError);
  // A stream that breaks ends with an error the SDK raises.
  await assert.rejects(async () => {
    for await (const _ of await vllm.openai.chat.completions.create({ ...ask('go [[cut]]'), stream: true }));
  }, (e) => e instanceof OpenAI.APIError && /not reachable|broke/.test(e.message));
});

test('cancelling a stream ends it at the remote', async () => {
  const before = await standinStats();
  const ac = new AbortController();
  const stream = await vllm.openai.chat.completions.create({ messages: [{ role: 'user', content: 'go [[stall]]' }], stream: true }, { signal: ac.signal });
  try {
    for await (const _ of stream) ac.abort();
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', `${e}`);
  }
  for (let i = 0; i < 100; i++) {
    const s = await standinStats();
    if (s.cancelled === before.cancelled + 1 && s.active === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail('the remote kept generating');
});

test('anthropic SDK through the translation: tools, thinking, system, stop reasons (stand-in)', async () => {
  const messages = [{ role: 'user', content: 'Weather in Paris? [[think]]' }];
  const m = await vllm.anthropic.messages.create({ model: 'claude-code-model', system: 'Be brief.', max_tokens: 64, tools: [WEATHER], messages });
  assert.equal(m.model, 'glm-5.2-fp8');
  assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'tool_use']);
  assert.deepEqual(m.content[1].input, { city: 'Paris', days: 3 });
  assert.equal(m.stop_reason, 'tool_use');
  // The stream: thinking deltas, then the tool input from split partial JSON.
  const events = [];
  const stream = vllm.anthropic.messages.stream({ model: 'claude-code-model', max_tokens: 64, tools: [WEATHER], messages });
  stream.on('streamEvent', (e) => events.push(e.type));
  const final = await stream.finalMessage();
  assert.deepEqual(final.content.map((b) => b.type), ['thinking', 'tool_use']);
  assert.equal(final.content[0].thinking, 'Let me think about that. ');
  assert.deepEqual(final.content[1].input, { city: 'Paris', days: 3 });
  assert.equal(final.stop_reason, 'tool_use');
  assert.ok(final.usage.output_tokens > 0);
  assert.ok(final.usage.input_tokens > 0, 'the input tokens of message_delta');
  assert.equal(events[0], 'message_start');
  assert.equal(events.at(-1), 'message_stop');
  assert.ok(events.filter((e) => e === 'content_block_delta').length >= 5);
  // The tool result goes back; the reply ends its turn.
  messages.push({ role: 'assistant', content: final.content });
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: final.content[1].id, content: 'Sunny' }] });
  const next = await vllm.anthropic.messages.create({ model: 'claude-code-model', max_tokens: 64, tools: [WEATHER], messages });
  assert.equal(next.content[0].text, 'The tool said: Sunny');
  assert.equal(next.stop_reason, 'end_turn');
  const stop = await vllm.anthropic.messages.create({ model: 'claude-x', max_tokens: 64, stop_sequences: ['c d'], messages: [{ role: 'user', content: 'a b c d e' }] });
  assert.equal(stop.stop_reason, 'stop_sequence');
  assert.equal(stop.stop_sequence, 'c d');
  const count = await vllm.anthropic.messages.countTokens({ model: 'claude-x', messages: [{ role: 'user', content: 'one two three' }] });
  assert.equal(count.input_tokens, 7);
  // An output limit past the server's context is capped; a prompt past it is "prompt is too long".
  const capped = await vllm.anthropic.messages.stream({ model: 'claude-x', max_tokens: 200000, messages: [{ role: 'user', content: 'x' }] }).finalMessage();
  assert.equal(capped.stop_reason, 'end_turn');
  await assert.rejects(vllm.anthropic.messages.create({ model: 'claude-x', max_tokens: 8, messages: [{ role: 'user', content: 'word '.repeat(140000) }] }),
    (e) => e instanceof Anthropic.BadRequestError && /^prompt is too long: 140004 tokens > 131072 maximum$/.test(e.error.error.message));
  await assert.rejects(vllm.anthropic.messages.create({ model: 'claude-x', max_tokens: 5, messages: [{ role: 'user', content: '[[status 503]]' }] }), Anthropic.InternalServerError);
});

test('anthropic SDK through the translation to a second spool serve', async () => {
  const params = { model: 'claude-local', max_tokens: 24, temperature: 0, messages: [{ role: 'user', content: QUESTION }] };
  const m = await spool.anthropic.messages.create(params);
  assert.equal(m.model, 'glm52-demo');
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
  const final = await spool.anthropic.messages.stream(params).finalMessage();
  assert.deepEqual(final.content, m.content);
  assert.equal(final.usage.output_tokens, m.usage.output_tokens);
  assert.equal(final.usage.input_tokens, m.usage.input_tokens);
  assert.ok(m.usage.input_tokens > 0);
  const level = { name: 'set_level', input_schema: { type: 'object', properties: { level: { type: 'integer' } }, required: ['level'] } };
  const t = await spool.anthropic.messages.stream({ ...params, max_tokens: 60, tools: [level], tool_choice: { type: 'tool', name: 'set_level' } }).finalMessage();
  const use = t.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'set_level');
  assert.ok(Number.isInteger(use.input.level));
  assert.equal(t.stop_reason, 'tool_use');
  // Spool has no /tokenize: said plainly.
  await assert.rejects(spool.anthropic.messages.countTokens({ model: 'claude-x', messages: params.messages }), Anthropic.NotFoundError);
});
