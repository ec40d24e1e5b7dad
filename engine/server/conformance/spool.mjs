// Starts `spool serve` for the client suites and runs node's test runner
// against it. Used by run.mjs here and by ../agents/run.mjs.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

// startSpool starts the server on a free loopback port and resolves with
// its base URL once it listens.
export function startSpool(args = []) {
  const bin = process.env.SPOOL_BIN ?? path.join(root, 'bin/spool');
  const model = process.env.SPOOL_MODEL ?? path.join(root, 'assets/models/glm52-demo');
  const server = spawn(bin, ['serve', '--model', model, '--port', '0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`spool serve did not start within 120 s:\n${log}`)), 120000);
    server.stderr.on('data', (d) => {
      log += d;
      const m = /on (http:\/\/\S+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    server.on('exit', (code) => reject(new Error(`spool serve exited with ${code}:\n${log}`)));
  });
  return { server, ready, log: () => log };
}

// runSuites starts spool serve with args, runs the test files against it
// (SPOOL_BASE_URL, SPOOL_API_KEY) and exits with the runner's status.
export async function runSuites(files, args = [], env = {}) {
  const key = process.env.SPOOL_API_KEY ?? 'conformance-key';
  let baseURL = process.env.SPOOL_BASE_URL;
  let spool;
  if (!baseURL) {
    spool = startSpool(['--api-key', key, ...args]);
    baseURL = await spool.ready;
  }
  const runner = spawn(process.execPath, ['--test', '--test-concurrency=1', ...files], {
    stdio: 'inherit',
    env: { ...process.env, ...env, SPOOL_BASE_URL: baseURL, SPOOL_API_KEY: key },
  });
  const code = await new Promise((resolve) => runner.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0))));
  if (spool) {
    spool.server.kill('SIGTERM');
    if (code !== 0) process.stderr.write(`spool serve log:\n${spool.log()}\n`);
  }
  process.exit(code);
}
