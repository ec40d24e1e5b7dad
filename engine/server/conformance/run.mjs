// Runs the client suites against one `spool serve` on the demo model:
//
//   node_modules/.bin/node run.mjs
//
// SPOOL_BIN and SPOOL_MODEL choose the binary and model; SPOOL_BASE_URL
// (with SPOOL_API_KEY) uses a server already running instead.
import { runSuites } from './spool.mjs';

await runSuites(['conformance.test.js', 'aisdk.test.js', 'langchain.test.js', 'ollama.test.js', 'agents-ws.test.js', 'openaigo.test.js'], ['--max-batch', '4', '--context', '8192']);
