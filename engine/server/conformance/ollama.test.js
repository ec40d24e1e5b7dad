// The `ollama` npm client (ollama-js), unmodified, against Ollama's API on
// `spool serve` (/api/...): what editors with an "Ollama" provider use.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { z } from 'zod';
import { KEY, MODEL, QUESTION, baseURL } from './common.js';

const ollama = new Ollama({ host: baseURL, headers: { Authorization: `Bearer ${KEY}` } });
const greedy = { temperature: 0, num_predict: 24 };
const ask = (extra = {}) => ({ model: MODEL, messages: [{ role: 'user', content: QUESTION }], options: greedy, ...extra });

test('ollama: version, tags, show, ps', async () => {
  const { version } = await ollama.version();
  assert.match(version, /^\d+\.\d+\.\d+$/);
  const { models } = await ollama.list();
  assert.deepEqual(models.map((m) => m.name), [MODEL]);
  const show = await ollama.show({ model: models[0].name });
  const arch = show.model_info['general.architecture'];
  assert.equal(show.model_info[`${arch}.context_length`], 8192);
  assert.deepEqual(show.capabilities, ['completion', 'tools', 'thinking']);
  assert.equal(show.details.family, arch);
  const ps = await ollama.ps();
  assert.equal(ps.models[0].name, MODEL);
  assert.ok(new Date(ps.models[0].expires_at) > new Date(), ps.models[0].expires_at);
});

test('ollama: chat, streamed text equals the whole reply', async () => {
  const whole = await ollama.chat(ask());
  assert.equal(whole.done, true);
  assert.equal(whole.message.role, 'assistant');
  assert.ok(whole.message.content.length > 0);
  assert.ok(['stop', 'length'].includes(whole.done_reason), whole.done_reason);
  for (const k of ['total_duration', 'prompt_eval_count', 'prompt_eval_duration', 'eval_count', 'eval_duration']) {
    assert.ok(whole[k] > 0, `${k} = ${whole[k]}`);
  }
  let text = '';
  let last;
  for await (const part of await ollama.chat(ask({ stream: true }))) {
    text += part.message.content;
    last = part;
  }
  assert.equal(text, whole.message.content);
  assert.equal(last.done, true);
  assert.equal(last.eval_count, whole.eval_count);
});

test('ollama: generate, streamed and not', async () => {
  const req = { model: MODEL, prompt: QUESTION, options: greedy };
  const whole = await ollama.generate(req);
  assert.ok(whole.response.length > 0);
  assert.equal(whole.context.length, whole.prompt_eval_count + whole.eval_count);
  let text = '';
  for await (const part of await ollama.generate({ ...req, stream: true })) text += part.response;
  assert.equal(text, whole.response);
  // The chat template makes generate the same turn as chat.
  const chatted = await ollama.chat({ ...ask(), options: greedy });
  assert.equal(whole.response, chatted.message.content);
});

test('ollama: format, a JSON schema and "json"', async () => {
  const Answer = z.object({ topic: z.enum(['os', 'path', 'other']), summary: z.string().max(40), sure: z.boolean() });
  const r = await ollama.chat(ask({ format: z.toJSONSchema(Answer), options: { temperature: 0.7, seed: 3, num_predict: 160 } }));
  const parsed = Answer.safeParse(JSON.parse(r.message.content));
  assert.ok(parsed.success, r.message.content);
  const j = await ollama.generate({ model: MODEL, prompt: QUESTION, format: 'json', options: { temperature: 0.7, seed: 3, num_predict: 160 } });
  assert.equal(typeof JSON.parse(j.response), 'object', j.response);
});

test('ollama: tools and a tool turn with tool_name', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const r = await ollama.chat(ask({
    tools,
    messages: [
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Oslo' } } }] },
      { role: 'tool', tool_name: 'get_weather', content: 'sunny, 21 degrees' },
    ],
  }));
  assert.equal(r.done, true);
  assert.equal(r.message.role, 'assistant');
  for (const c of r.message.tool_calls ?? []) assert.equal(typeof c.function.arguments, 'object');
});

test('ollama: think gives a thinking field or none, never markup in content', async () => {
  const r = await ollama.chat(ask({ think: true, options: { temperature: 0, num_predict: 48 } }));
  assert.ok(!r.message.content.includes('<think>') && !r.message.content.includes('</think>'), r.message.content);
  assert.ok(r.message.thinking === undefined || typeof r.message.thinking === 'string');
});

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

test('ollama: embed gives unit vectors of the hidden size, the same alone and in a batch', async () => {
  const show = await ollama.show({ model: MODEL });
  const hidden = show.model_info[`${show.model_info['general.architecture']}.embedding_length`];
  const one = await ollama.embed({ model: MODEL, input: 'hello' });
  assert.equal(one.embeddings.length, 1);
  assert.equal(one.embeddings[0].length, hidden);
  assert.ok(Math.abs(norm(one.embeddings[0]) - 1) < 1e-5, norm(one.embeddings[0]));
  assert.ok(one.prompt_eval_count > 0 && one.total_duration > 0, JSON.stringify(one));
  const batch = await ollama.embed({ model: MODEL, input: ['hello', 'a different text', 'hello'] });
  assert.equal(batch.embeddings.length, 3);
  assert.deepEqual(batch.embeddings[0], one.embeddings[0]);
  assert.deepEqual(batch.embeddings[2], one.embeddings[0]);
  assert.notDeepEqual(batch.embeddings[1], one.embeddings[0]);
  const legacy = await ollama.embeddings({ model: MODEL, prompt: 'hello' });
  assert.deepEqual(legacy.embedding, one.embeddings[0]);
  await assert.rejects(ollama.embed({ model: MODEL, input: 'word '.repeat(20000), truncate: false }), (e) => e.status_code === 400 && /exceeds the context length/.test(e.error));
});

test('ollama: unknown models are 404', async () => {
  await assert.rejects(ollama.chat({ model: 'llama3.2', messages: [{ role: 'user', content: 'hi' }] }), (e) => e.status_code === 404 && /not found/.test(e.error));
  await assert.rejects(ollama.show({ model: 'llama3.2' }), (e) => e.status_code === 404);
});

test('ollama: pull of the served model succeeds; of another is refused', async () => {
  const done = await ollama.pull({ model: MODEL });
  assert.equal(done.status, 'success');
  await assert.rejects(ollama.pull({ model: 'llama3.2' }), (e) => e.status_code === 404);
});

// VS Code Copilot Chat's Ollama provider (github.copilot.chat.byok.ollamaEndpoint)
// discovers models with these requests, then chats over the OpenAI
// endpoint with the name /api/tags lists (its key header is added here
// only because the suite's server has one).
test('VS Code Copilot Ollama discovery: version, tags, show, then chat', async () => {
  const headers = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };
  const get = async (p, init = {}) => {
    const r = await fetch(`${baseURL}${p}`, { headers, ...init });
    assert.equal(r.status, 200, `${p}: ${r.status}`);
    return r.json();
  };
  // It refuses servers older than Ollama 0.6.4.
  const { version } = await get('/api/version');
  const [major, minor, patch] = version.split('.').map(Number);
  assert.ok(major > 0 || minor > 6 || (minor === 6 && patch >= 4), version);
  const { models } = await get('/api/tags');
  for (const m of models) {
    const info = await get('/api/show', { method: 'POST', body: JSON.stringify({ model: m.model }) });
    const arch = info.model_info['general.architecture'];
    const context = info.model_info[`${arch}.context_length`] ?? 4096;
    assert.equal(context, 8192);
    assert.ok(info.capabilities.includes('tools'));
    const chat = await get('/v1/chat/completions', {
      method: 'POST',
      body: JSON.stringify({ model: m.model, messages: [{ role: 'user', content: QUESTION }], max_tokens: Math.min(4096, context / 2), temperature: 0, stream: false }),
    });
    assert.ok(chat.choices[0].message.content.length > 0);
  }
});
