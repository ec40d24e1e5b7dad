// The Vercel AI SDK against `spool serve`: the openai (chat and responses),
// openai-compatible and anthropic providers, unmodified. The SDK validates
// tool inputs and objects against the zod schemas itself.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ToolChoiceViolationError, generateObject, generateText, streamText, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createAnthropic } from '@ai-sdk/anthropic';
import { Answer, Forecast, KEY, MODEL, QUESTION, baseURL, checkForecast } from './common.js';

const openai = createOpenAI({ baseURL: `${baseURL}/v1`, apiKey: KEY });
const compatible = createOpenAICompatible({ name: 'spool', baseURL: `${baseURL}/v1`, apiKey: KEY, supportsStructuredOutputs: true });
const anthropic = createAnthropic({ baseURL: `${baseURL}/v1`, apiKey: KEY });

const providers = {
  'openai chat': openai.chat(MODEL),
  'openai responses': openai.responses(MODEL),
  'openai-compatible': compatible.chatModel(MODEL),
  anthropic: anthropic('claude-sonnet-4-5'),
};
const tools = { forecast: tool({ description: 'Weather forecast', inputSchema: Forecast }) };
const base = { prompt: QUESTION, maxRetries: 0, temperature: 1 };

for (const [name, model] of Object.entries(providers)) {
  test(`${name}: forced tool calls, required and named`, async () => {
    for (const toolChoice of ['required', { type: 'tool', toolName: 'forecast' }]) {
      const r = await generateText({ ...base, model, tools, toolChoice, maxOutputTokens: 150 });
      assert.equal(r.finishReason, 'tool-calls', `${JSON.stringify(toolChoice)}: ${r.text}`);
      assert.equal(r.toolCalls.length, 1);
      checkForecast(r.toolCalls[0].input);
    }
  });

  test(`${name}: a forced call cut by the budget is no call`, async () => {
    // The reply finishes with length and holds no call, which the SDK
    // reports as a violated tool choice rather than a call with keys
    // missing.
    await assert.rejects(generateText({ ...base, model, tools, toolChoice: 'required', maxOutputTokens: 4 }), ToolChoiceViolationError);
    const r = await generateText({ ...base, model, tools, toolChoice: 'auto', maxOutputTokens: 4 });
    assert.equal(r.finishReason, 'length');
  });

  test(`${name}: streamed forced call`, async () => {
    const r = streamText({ ...base, model, tools, toolChoice: { type: 'tool', toolName: 'forecast' }, maxOutputTokens: 150 });
    const calls = await r.toolCalls;
    assert.equal(calls.length, 1);
    checkForecast(calls[0].input);
  });
}

// Structured output: json_schema (response_format, text.format,
// output_format) and, on Anthropic, a forced "json" tool.
// For Anthropic's output format the AI SDK moves string bounds into the
// description ("max length: 40."), since that API takes none; the server
// reads them back and enforces them (issue 26).
const objectModels = [
  ['openai chat, json_schema', providers['openai chat'], {}, Answer],
  ['openai responses, json_schema', providers['openai responses'], {}, Answer],
  ['openai-compatible, json_schema', providers['openai-compatible'], {}, Answer],
  ['anthropic, output format', providers.anthropic, { anthropic: { structuredOutputMode: 'outputFormat' } }, Answer],
  ['anthropic, json tool', providers.anthropic, { anthropic: { structuredOutputMode: 'jsonTool' } }, Answer],
];
for (const [name, model, providerOptions, schema] of objectModels) {
  test(`generateObject: ${name}`, async () => {
    const r = await generateObject({ ...base, model, schema, maxOutputTokens: 160, providerOptions });
    assert.ok(schema.safeParse(r.object).success);
  });
}
