// A simulated reply for rendering checks (like the heat map's
// ?simulate=glm52): #/chat?simulate=1500 streams a markdown reply of about
// 1,500 tokens (prose, lists, a table and highlighted code) through the
// chat's own stream handlers at a fast model's pace, with no engine. It
// exercises the renderer at the size where re-rendering everything per
// frame would show.

import type { StreamHandlers } from './api';

const sections = [
  (i: number) => `## ${i + 1}. Compiling patterns\n\nThe function \`re.compile(pattern, flags=0)\` turns a regular expression into a **pattern object** whose methods (\`match\`, \`search\`, \`findall\`, \`sub\`) run without parsing the expression again. Compile once when a pattern is used in a loop; the module also caches recent patterns, so one-off calls cost little.\n\n`,
  () => `- \`re.IGNORECASE\` matches letters in either case.\n- \`re.MULTILINE\` lets \`^\` and \`$\` match at every line.\n- \`re.DOTALL\` lets \`.\` match a newline as well.\n- \`re.VERBOSE\` allows whitespace and comments in the pattern.\n\n`,
  (i: number) =>
    '```python\nimport re\n\nWORD = re.compile(r"\\b(\\w+)\\b", re.IGNORECASE)\n\n\ndef count_words(text: str) -> dict[str, int]:\n    """Count each word of text, ignoring case."""\n    counts: dict[str, int] = {}\n    for match in WORD.finditer(text):\n        word = match.group(1).lower()\n        counts[word] = counts.get(word, 0) + 1\n    return counts\n\n\nif __name__ == "__main__":\n    sample = "The cat and the hat" * ' +
    (i + 2) +
    '\n    for word, n in sorted(count_words(sample).items()):\n        print(f"{word:>8} {n:3d}")\n```\n\n',
  (i: number) => '```\n$ python count_words.py\n' + Array.from({ length: 8 + i }, (_, k) => `${['and', 'cat', 'hat', 'the'][k % 4].padStart(8)} ${String(k + 2).padStart(3)}`).join('\n') + '\n```\n\n',
  () => `| method | returns | when nothing matches |\n|---|---|---|\n| \`match\` | a match at the start | \`None\` |\n| \`search\` | the first match anywhere | \`None\` |\n| \`findall\` | a list of strings | \`[]\` |\n| \`sub\` | the new string | the string unchanged |\n\n`,
  () => `> A compiled pattern is immutable and safe to share between threads; keep it at module level, named like a constant.\n\nGroups can be named with \`(?P<name>...)\` and read back with \`match.group("name")\` or \`match.groupdict()\`, which makes long expressions easier to maintain than numbered groups.\n\n`,
];

/** simulatedPieces splits a long markdown reply into about n token-sized
 * pieces. */
function simulatedPieces(n: number): string[] {
  const pieces: string[] = [];
  for (let i = 0; pieces.length < n; i++) {
    const text = sections[i % sections.length](Math.floor(i / sections.length));
    for (const m of text.matchAll(/\s*[A-Za-z]{1,7}|\s*\d{1,3}|\s*[^\sA-Za-z\d]|\s+/g)) pieces.push(m[0]);
  }
  return pieces.slice(0, n);
}

/** simulateChat feeds n pieces to the handlers at rate per second, in
 * timer ticks the way a network stream delivers them. */
export async function simulateChat(n: number, rate: number, signal: AbortSignal, on: StreamHandlers): Promise<void> {
  const pieces = simulatedPieces(n);
  const tick = 16;
  const perTick = Math.max(1, Math.round((rate * tick) / 1000));
  on.onStart?.('simulated');
  let i = 0;
  await new Promise<void>((done, fail) => {
    const timer = window.setInterval(() => {
      if (signal.aborted) {
        window.clearInterval(timer);
        fail(new DOMException('aborted', 'AbortError'));
        return;
      }
      on.onContent(pieces.slice(i, i + perTick).join(''));
      i += perTick;
      if (i >= pieces.length) {
        window.clearInterval(timer);
        done();
      }
    }, tick);
  });
  on.onFinish('stop', { prompt_tokens: 12, completion_tokens: pieces.length });
}
