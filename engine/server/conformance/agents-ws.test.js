// The OpenAI Agents SDK (@openai/agents) on the Responses API's WebSocket
// mode (OpenAIResponsesWSModel), unmodified, against `spool serve`: a tool
// call and its result go round the one socket.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Agent, OpenAIResponsesWSModel, run, tool, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import { KEY, MODEL, baseURL } from './common.js';

setTracingDisabled(true);

test('agents: OpenAIResponsesWSModel completes a tool-call round trip over the socket', async () => {
  const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: KEY, maxRetries: 0 });
  const model = new OpenAIResponsesWSModel(client, MODEL);
  const calls = [];
  const getWeather = tool({
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: z.object({ city: z.string().max(16) }),
    execute: async ({ city }) => {
      calls.push(city);
      return `sunny in ${city}`;
    },
  });
  // The demo model does not call tools by itself: the first turn is
  // forced (toolChoice), and the SDK resets the choice after the call, so
  // the second turn answers with the tool's result in its input.
  const agent = new Agent({
    name: 'weather', instructions: 'Answer with the weather.', model, tools: [getWeather],
    modelSettings: { toolChoice: 'get_weather', temperature: 0, maxTokens: 160 },
  });
  try {
    const result = await run(agent, 'What is the weather in Oslo?', { maxTurns: 3 });
    assert.equal(calls.length, 1, `tool calls ${JSON.stringify(calls)}`);
    const items = result.newItems.map((i) => i.type);
    assert.deepEqual(items.slice(0, 2), ['tool_call_item', 'tool_call_output_item'], items.join(','));
    assert.equal(typeof result.finalOutput, 'string');
    assert.equal(result.rawResponses.length, 2);
  } finally {
    await model.close();
  }
});
