// What the client suites share: the server address and the schemas whose
// string constraints forced tool calls and structured output must honour.
import assert from 'node:assert/strict';
import { z } from 'zod';

export const baseURL = process.env.SPOOL_BASE_URL;
export const KEY = process.env.SPOOL_API_KEY;
if (!baseURL) throw new Error('SPOOL_BASE_URL is not set: run the suites with `node run.mjs`');

export const MODEL = 'glm52-demo';
export const QUESTION = 'What does the function os.path.join do?';

// Forecast has an enum, a const and a bounded string, all required, and a
// bounded integer that may be null (strict schemas make every key required):
// what issue 10 saw decoded as free text.
export const Forecast = z.object({
  city: z.string().min(1).max(10).describe('City name'),
  unit: z.enum(['c', 'f']),
  kind: z.literal('forecast'),
  days: z.number().int().min(1).max(16).nullable(),
});

// forecastJSON is Forecast as a plain JSON Schema.
export const forecastJSON = {
  type: 'object',
  properties: {
    city: { type: 'string', minLength: 1, maxLength: 10 },
    unit: { type: 'string', enum: ['c', 'f'] },
    kind: { type: 'string', const: 'forecast' },
    days: { type: 'integer', minimum: 1, maximum: 16 },
  },
  required: ['city', 'unit', 'kind'],
  additionalProperties: false,
};

// Answer is a small structured-output schema.
export const Answer = z.object({
  topic: z.enum(['os', 'path', 'other']),
  summary: z.string().max(40),
  sure: z.boolean(),
});

// checkForecast asserts that arguments (an object or JSON text) satisfy
// Forecast; days may be left out (forecastJSON makes it optional).
export function checkForecast(args) {
  const v = typeof args === 'string' ? JSON.parse(args) : args;
  v.days ??= null;
  const r = Forecast.safeParse(v);
  assert.ok(r.success, `arguments ${JSON.stringify(v)} violate the schema: ${r.error}`);
  return r.data;
}
