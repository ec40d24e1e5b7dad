// Runs Codex CLI, Claude Code, opencode and GitHub Copilot CLI, unmodified, against one
// `spool serve` on the demo model at its default context:
//
//   node run.mjs
//
// As root with unshare(1) available, the server and the agents run in a
// network namespace of their own that has only loopback, so nothing can
// leave the machine; otherwise the agents' own switches turn their
// outbound traffic off (see agents.test.js).
import { execFileSync, spawnSync } from 'node:child_process';
import { runSuites } from '../conformance/spool.mjs';

function canIsolate() {
  if (process.env.SPOOL_NETNS || process.getuid?.() !== 0) return false;
  try {
    execFileSync('unshare', ['-n', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

if (canIsolate()) {
  process.stderr.write('agents: spool serve and the agents run in a network namespace with only loopback\n');
  const r = spawnSync('unshare', ['-n', 'sh', '-c', 'ip link set lo up && exec "$0" run.mjs', process.execPath], {
    stdio: 'inherit', env: { ...process.env, SPOOL_NETNS: '1' },
  });
  process.exit(r.status ?? 1);
}
if (!process.env.SPOOL_NETNS) process.stderr.write('agents: no network namespace (needs root and unshare); the agents\' own switches keep them off the network\n');
await runSuites(['agents.test.js'], ['--max-batch', '2']);
