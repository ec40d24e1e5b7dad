// LangChain JS (ChatOpenAI, ChatAnthropic) against `spool serve`,
// unmodified: forced tool calls and withStructuredOutput by function
// calling and by JSON schema.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatOpenAI } from '@langchain/openai';
import { ChatAnthropic } from '@langchain/anthropic';
import { Answer, Forecast, KEY, MODEL, QUESTION, baseURL, checkForecast } from './common.js';

const common = { apiKey: KEY, maxTokens: 160, maxRetries: 0, temperature: 1 };
const models = {
  ChatOpenAI: new ChatOpenAI({ ...common, model: MODEL, configuration: { baseURL: `${baseURL}/v1` } }),
  'ChatOpenAI (responses)': new ChatOpenAI({ ...common, model: MODEL, configuration: { baseURL: `${baseURL}/v1` }, useResponsesApi: true }),
  ChatAnthropic: new ChatAnthropic({ ...common, model: 'claude-sonnet-4-5', anthropicApiUrl: baseURL }),
};
const forecast = { name: 'forecast', description: 'Weather forecast', schema: Forecast };

for (const [name, model] of Object.entries(models)) {
  test(`${name}: bindTools with a forced tool`, async () => {
    // ChatOpenAI on the Responses API does not send tool_choice "required"
    // (1.6.0), so only the named choice is forced there.
    const choices = { ChatOpenAI: ['forecast', 'required'], 'ChatOpenAI (responses)': ['forecast'], ChatAnthropic: ['forecast', 'any'] }[name];
    for (const tool_choice of choices) {
      const msg = await model.bindTools([forecast], { tool_choice }).invoke(QUESTION);
      assert.equal(msg.tool_calls.length, 1, JSON.stringify(msg.content));
      assert.equal(msg.tool_calls[0].name, 'forecast');
      checkForecast(msg.tool_calls[0].args);
    }
  });

  for (const method of ['functionCalling', 'jsonSchema']) {
    // ChatAnthropic's jsonSchema method moves maxLength into the
    // description ("{maxLength: 40}", Anthropic's strict-schema transform);
    // the server enforces it as if it were in the schema (issue 26).
    test(`${name}: withStructuredOutput, ${method}`, async () => {
      const out = await model.withStructuredOutput(Answer, { method }).invoke(QUESTION);
      assert.ok(Answer.safeParse(out).success, JSON.stringify(out));
    });
  }
}
