// Conformance of `spool serve` with the official OpenAI and Anthropic
// clients, unmodified (run by run.mjs, which starts the server).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat, zodResponsesFunction } from 'openai/helpers/zod';
import Anthropic from '@anthropic-ai/sdk';
import { zodOutputFormat } from '@anthropic-ai/sdk/helpers/zod';
import { Answer, Forecast, KEY, MODEL, QUESTION, baseURL, checkForecast, forecastJSON } from './common.js';

const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 16 }, days: { type: 'integer' } },
      required: ['city'],
    },
  },
};
const FORECAST = { type: 'function', function: { name: 'forecast', description: 'Weather forecast', parameters: forecastJSON } };

const openai = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: KEY, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL, apiKey: KEY, maxRetries: 0 });

const ask = (extra = {}) => ({
  model: MODEL,
  messages: [{ role: 'user', content: QUESTION }],
  temperature: 0,
  max_tokens: 24,
  ...extra,
});

test('models list and retrieve', async () => {
  const list = await openai.models.list();
  const ids = list.data.map((m) => m.id);
  assert.ok(ids.includes('glm52-demo'), `ids ${ids}`);
  const m = await openai.models.retrieve('glm52-demo');
  assert.equal(m.object, 'model');
  await assert.rejects(openai.models.retrieve('gpt-9'), OpenAI.NotFoundError);
});

test('anthropic models list and retrieve in Anthropic\'s shape', async () => {
  const page = await anthropic.models.list();
  assert.equal(page.data.length, 1);
  const m = page.data[0];
  assert.equal(m.id, 'glm52-demo');
  assert.equal(m.type, 'model');
  assert.equal(m.display_name, 'glm52-demo');
  assert.ok(!Number.isNaN(Date.parse(m.created_at)), `created_at ${m.created_at}`);
  assert.equal(m.max_input_tokens, 8192);
  assert.equal(page.has_more, false);
  const one = await anthropic.models.retrieve('glm52-demo');
  assert.equal(one.display_name, 'glm52-demo');
  await assert.rejects(anthropic.models.retrieve('gpt-9'), Anthropic.NotFoundError);
});

test('chat completion, non-streaming, with usage', async () => {
  const r = await openai.chat.completions.create(ask());
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.ok(['single', 'batched'].includes(r.usage.lane));
});

test('chat completion, streaming, equals non-streaming; usage chunk last', async () => {
  const whole = await openai.chat.completions.create(ask());
  const stream = await openai.chat.completions.create(ask({ stream: true, stream_options: { include_usage: true } }));
  let text = '';
  let finish = null;
  let usage = null;
  let first = true;
  for await (const chunk of stream) {
    if (first) {
      assert.equal(chunk.choices[0].delta.role, 'assistant');
      first = false;
    }
    if (chunk.usage) {
      assert.deepEqual(chunk.choices, []);
      usage = chunk.usage;
      continue;
    }
    text += chunk.choices[0].delta.content ?? '';
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

test('stop strings, logprobs, seed', async () => {
  const whole = await openai.chat.completions.create(ask());
  const words = whole.choices[0].message.content.split(' ');
  const stop = words[Math.min(2, words.length - 1)];
  const cut = await openai.chat.completions.create(ask({ stop: [stop] }));
  assert.ok(!cut.choices[0].message.content.includes(stop));
  assert.equal(cut.choices[0].finish_reason, 'stop');
  const lp = await openai.chat.completions.create(ask({ logprobs: true, top_logprobs: 2, max_tokens: 4 }));
  assert.ok(lp.choices[0].logprobs.content.length > 0);
  assert.equal(lp.choices[0].logprobs.content[0].top_logprobs.length, 2);
  const a = await openai.chat.completions.create(ask({ temperature: 0.9, seed: 42 }));
  const b = await openai.chat.completions.create(ask({ temperature: 0.9, seed: 42 }));
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
});

test('tools round trip', async () => {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const r = await openai.chat.completions.create({
    model: 'glm52-demo', messages, tools: [WEATHER], max_tokens: 120,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const calls = r.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].function.name, 'get_weather');
  assert.match(calls[0].id, /^call_/);
  const args = JSON.parse(calls[0].function.arguments);
  assert.equal(typeof args.city, 'string');
  messages.push(r.choices[0].message);
  messages.push({ role: 'tool', tool_call_id: calls[0].id, content: 'Sunny, 21 C' });
  const next = await openai.chat.completions.create({ model: 'glm52-demo', messages, tools: [WEATHER], max_tokens: 16 });
  assert.equal(next.choices[0].message.role, 'assistant');

  // Streamed: one call with index 0 and a stable id.
  const stream = await openai.chat.completions.create({
    model: 'glm52-demo', messages: messages.slice(0, 1), tools: [WEATHER], max_tokens: 120, tool_choice: 'required', stream: true,
  });
  const seen = new Map();
  let finish = null;
  for await (const chunk of stream) {
    for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
      const cur = seen.get(tc.index) ?? { id: tc.id, name: '', args: '' };
      if (tc.id) assert.equal(cur.id, tc.id);
      cur.name += tc.function?.name ?? '';
      cur.args += tc.function?.arguments ?? '';
      seen.set(tc.index, cur);
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(seen.size, 1);
  assert.equal(seen.get(0).name, 'get_weather');
  JSON.parse(seen.get(0).args);
  assert.ok(['tool_calls', 'length'].includes(finish));
});

test('response_format json_schema is enforced', async () => {
  const r = await openai.chat.completions.create(ask({
    max_tokens: 200, temperature: 0.7, seed: 1,
    response_format: {
      type: 'json_schema',
      json_schema: {
        name: 'answer', strict: true,
        schema: { type: 'object', properties: { summary: { type: 'string' }, score: { type: 'integer' } }, required: ['summary', 'score'], additionalProperties: false },
      },
    },
  }));
  const v = JSON.parse(r.choices[0].message.content);
  assert.equal(typeof v.summary, 'string');
  assert.ok(Number.isInteger(v.score));
  const o = await openai.chat.completions.create(ask({ max_tokens: 200, response_format: { type: 'json_object' } }));
  assert.equal(typeof JSON.parse(o.choices[0].message.content), 'object');
});

test('cancellation frees the slot', async () => {
  const ac = new AbortController();
  // The end-of-sequence tokens are banned so that only the abort ends it.
  const noEOS = { 8169: -100, 8176: -100, 8178: -100 };
  const stream = await openai.chat.completions.create(ask({ stream: true, max_tokens: 4000, temperature: 1, logit_bias: noEOS }), { signal: ac.signal });
  let n = 0;
  try {
    for await (const _ of stream) {
      if (++n === 3) ac.abort();
    }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', `${e}`);
  }
  assert.equal(n, 3);
  // Every slot is free again soon after.
  for (let i = 0; i < 50; i++) {
    const stats = await (await fetch(`${baseURL}/stats`, { headers: { authorization: `Bearer ${KEY}` } })).json();
    if (stats.engine.scheduler.active === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail('the cancelled request still holds a slot');
});

test('errors in the OpenAI envelope', async () => {
  await assert.rejects(openai.chat.completions.create(ask({ model: 'gpt-9' })), (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
  await assert.rejects(openai.chat.completions.create(ask({ temperature: 7 })), (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
  const bad = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), OpenAI.AuthenticationError);
});

test('embeddings: vectors of the hidden size, float and base64 alike', async () => {
  // The SDK asks for base64 by default and decodes it.
  const b64 = await openai.embeddings.create({ model: MODEL, input: ['hello', 'hello'] });
  assert.equal(b64.object, 'list');
  assert.equal(b64.data.length, 2);
  assert.equal(b64.data[0].embedding.length, 256);
  assert.deepEqual(b64.data[1].embedding, b64.data[0].embedding);
  assert.ok(b64.usage.prompt_tokens > 0 && b64.usage.total_tokens === b64.usage.prompt_tokens);
  const flt = await openai.embeddings.create({ model: MODEL, input: 'hello', encoding_format: 'float' });
  // JSON carries the float32 values' shortest decimals: rounded to float32 they are the base64 bits.
  assert.deepEqual(flt.data[0].embedding.map(Math.fround), Array.from(b64.data[0].embedding));
  await assert.rejects(openai.embeddings.create({ model: MODEL, input: '' }), (e) => e.status === 400);
});

test('completions', async () => {
  const r = await openai.completions.create({ model: 'glm52-demo', prompt: 'The for statement', max_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.ok(r.choices[0].text.length > 0);
});

test('responses: create, stream, previous_response_id', async () => {
  const r = await openai.responses.create({ model: 'glm52-demo', input: QUESTION, max_output_tokens: 24, temperature: 0 });
  assert.ok(r.output_text.length > 0);
  const stream = await openai.responses.create({ model: 'glm52-demo', input: QUESTION, max_output_tokens: 24, temperature: 0, stream: true });
  let text = '';
  let done = null;
  for await (const ev of stream) {
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') done = ev.response;
  }
  assert.equal(text, r.output_text);
  assert.equal(done.output_text, r.output_text);
  const next = await openai.responses.create({ model: 'glm52-demo', input: 'And os.path.split?', previous_response_id: r.id, max_output_tokens: 8 });
  assert.ok(next.usage.input_tokens > r.usage.input_tokens);
});

test('anthropic messages: create and stream', async () => {
  const params = { model: 'claude-local', max_tokens: 24, temperature: 0, messages: [{ role: 'user', content: QUESTION }] };
  const m = await anthropic.messages.create(params);
  assert.equal(m.type, 'message');
  assert.equal(m.content[0].type, 'text');
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
  const final = await anthropic.messages.stream(params).finalMessage();
  assert.equal(final.content[0].text, m.content[0].text);
  assert.equal(final.usage.output_tokens, m.usage.output_tokens);
  const count = await anthropic.messages.countTokens({ model: params.model, messages: params.messages });
  assert.ok(count.input_tokens > 0);
});

test('anthropic tools round trip and errors', async () => {
  const tools = [{ name: 'get_weather', description: 'weather', input_schema: WEATHER.function.parameters }];
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const m = await anthropic.messages.create({ model: 'claude-x', max_tokens: 120, tools, tool_choice: { type: 'tool', name: 'get_weather' }, messages });
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  assert.equal(typeof use.input.city, 'string');
  messages.push({ role: 'assistant', content: m.content });
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny' }] });
  const next = await anthropic.messages.create({ model: 'claude-x', max_tokens: 16, tools, messages });
  assert.equal(next.role, 'assistant');
  const streamed = await anthropic.messages.stream({ model: 'claude-x', max_tokens: 120, tools, tool_choice: { type: 'any' }, messages: messages.slice(0, 1) }).finalMessage();
  assert.ok(streamed.content.some((b) => b.type === 'tool_use' && typeof b.input.city === 'string'));
  await assert.rejects(anthropic.messages.create({ model: 'gpt-9', max_tokens: 5, messages }), Anthropic.NotFoundError);
});

test('forced tool calls honour enum, const, maxLength and required', async () => {
  for (const [i, tool_choice] of [{ type: 'function', function: { name: 'forecast' } }, 'required'].entries()) {
    const r = await openai.chat.completions.create(ask({ tools: [FORECAST], tool_choice, max_tokens: 120, temperature: 1, seed: i }));
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    checkForecast(r.choices[0].message.tool_calls[0].function.arguments);
  }
  // Streamed, the one call arrives whole.
  const stream = await openai.chat.completions.create(ask({ tools: [FORECAST], tool_choice: 'required', max_tokens: 120, stream: true }));
  let args = '';
  for await (const chunk of stream) for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) args += tc.function?.arguments ?? '';
  checkForecast(args);
});

test('a forced call cut by max_tokens is reported incomplete, not as a call', async () => {
  const r = await openai.chat.completions.create(ask({ tools: [FORECAST], tool_choice: 'required', max_tokens: 4 }));
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.choices[0].message.tool_calls, undefined);
  await assert.rejects(
    openai.chat.completions.parse(ask({ tools: [zodFunction({ name: 'forecast', parameters: Forecast })], tool_choice: 'required', max_tokens: 4 })),
    OpenAI.LengthFinishReasonError,
  );
});

test('openai parse: zodFunction and zodResponseFormat', async () => {
  const r = await openai.chat.completions.parse(ask({
    tools: [zodFunction({ name: 'forecast', parameters: Forecast })], tool_choice: { type: 'function', function: { name: 'forecast' } }, max_tokens: 120,
  }));
  checkForecast(r.choices[0].message.tool_calls[0].function.parsed_arguments);
  const j = await openai.chat.completions.parse(ask({ response_format: zodResponseFormat(Answer, 'answer'), max_tokens: 120, temperature: 1 }));
  assert.ok(Answer.safeParse(j.choices[0].message.parsed).success, JSON.stringify(j.choices[0].message));
});

test('responses: namespace and hosted tools, forced namespaced call', async () => {
  const tools = [
    { type: 'namespace', name: 'weather', description: 'Weather tools', tools: [{ type: 'function', name: 'forecast', parameters: forecastJSON, strict: false }] },
    { type: 'web_search', external_web_access: false },
    zodResponsesFunction({ name: 'lookup', parameters: Answer }),
  ];
  const auto = await openai.responses.create({ model: MODEL, input: QUESTION, tools, max_output_tokens: 16 });
  assert.ok(['completed', 'incomplete'].includes(auto.status));
  const r = await openai.responses.create({ model: MODEL, input: QUESTION, tools, max_output_tokens: 120, tool_choice: { type: 'function', name: 'weather.forecast' } });
  const call = r.output.find((o) => o.type === 'function_call');
  assert.equal(call.name, 'forecast');
  assert.equal(call.namespace, 'weather');
  checkForecast(call.arguments);
  // The call and its output go back in the next turn.
  const next = await openai.responses.create({
    model: MODEL, tools, max_output_tokens: 8,
    input: [{ role: 'user', content: QUESTION }, call, { type: 'function_call_output', call_id: call.call_id, output: 'Sunny' }],
  });
  assert.ok(next.usage.input_tokens > r.usage.input_tokens);
});

test('anthropic: forced tools honour the schema; system turns and adaptive thinking', async () => {
  const tools = [{ name: 'forecast', description: 'Weather forecast', input_schema: forecastJSON }];
  for (const tool_choice of [{ type: 'tool', name: 'forecast' }, { type: 'any' }]) {
    const m = await anthropic.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 120, tools, tool_choice, messages: [{ role: 'user', content: QUESTION }] });
    assert.equal(m.stop_reason, 'tool_use');
    checkForecast(m.content.find((b) => b.type === 'tool_use').input);
  }
  const cut = await anthropic.messages.create({ model: 'claude-x', max_tokens: 4, tools, tool_choice: { type: 'any' }, messages: [{ role: 'user', content: QUESTION }] });
  assert.equal(cut.stop_reason, 'max_tokens');
  assert.ok(!cut.content.some((b) => b.type === 'tool_use'));
  const params = {
    model: 'claude-opus-4-1', max_tokens: 24, thinking: { type: 'adaptive' },
    messages: [{ role: 'user', content: QUESTION }, { role: 'assistant', content: 'It joins paths.' }, { role: 'system', content: 'Be brief.' }, { role: 'user', content: 'And os.path.split?' }],
  };
  const m = await anthropic.messages.create(params);
  assert.equal(m.type, 'message');
  const streamed = await anthropic.messages.stream(params).finalMessage();
  assert.ok(['end_turn', 'max_tokens'].includes(streamed.stop_reason));
});

test('anthropic: messages.parse with output_config.format; output_format', async () => {
  // The SDK moves string constraints (Answer's max length) into
  // descriptions before sending ("{maxLength: 40}"); the server enforces
  // them as if they were in the schema (issue 26).
  const m = await anthropic.messages.parse({
    model: 'claude-sonnet-4-5', max_tokens: 160, messages: [{ role: 'user', content: QUESTION }], output_config: { format: zodOutputFormat(Answer) },
  });
  assert.ok(Answer.safeParse(m.parsed_output).success, JSON.stringify(m.content));
  const old = await anthropic.messages.create({
    model: 'claude-sonnet-4-5', max_tokens: 160, messages: [{ role: 'user', content: QUESTION }], output_format: { type: 'json_schema', schema: forecastJSON },
  });
  checkForecast(old.content[0].text);
  await assert.rejects(
    anthropic.messages.create({ model: 'claude-x', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }], output_config: { format: { type: 'yaml' } } }),
    Anthropic.BadRequestError,
  );
});

test('anthropic: overflow says "prompt is too long"', async () => {
  const long = 'word '.repeat(9000);
  await assert.rejects(
    anthropic.messages.create({ model: 'claude-x', max_tokens: 8, messages: [{ role: 'user', content: long }] }),
    (e) => e instanceof Anthropic.BadRequestError && /^prompt is too long: \d+ tokens > 8192 maximum$/.test(e.error.error.message),
  );
  await assert.rejects(openai.chat.completions.create(ask({ messages: [{ role: 'user', content: long }] })), (e) => e.code === 'context_length_exceeded');
});

test('models report the served context', async () => {
  const m = await openai.models.retrieve(MODEL);
  assert.equal(m.context_length, 8192);
  assert.equal(m.max_model_len, 8192);
  const head = await fetch(`${baseURL}/`, { method: 'HEAD' });
  assert.equal(head.status, 200);
});
