// Regenerates oracle-cases.json with the reference implementation, HF
// tokenizers 0.23.2 (npm package "tokenizers"):
//
//   npm install tokenizers@0.23.2
//   node gen_oracle.js ../../../../shared/fixtures/glm52-mini/tokenizer.json > oracle-cases.json
//
// Each variant patches fields of the fixture tokenizer.json; the Go test
// applies the same patch before comparing.
const { Tokenizer } = require('tokenizers');
const fs = require('fs');

const base = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

// Deterministic PRNG (mulberry32).
let seed = 20260502;
function rnd() {
  seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];

const atoms = [
  'the', ' the', 'Hello', 'world', 'naïve', 'café', 'Ümlaut', 'ſ', 'K', 'ǅ', 'ß',
  "'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'x", "'", "''", "'ſ", "'ſt",
  '0', '12', '1234567', '3.14', '²', '½', 'Ⅻ', '٣', '१२३',
  ' ', '  ', '   ', '\t', '\n', '\r', '\r\n', '\n\n', ' \n ', '\u00a0', '\u3000', '\u2028', '\u0085', '\u000b', '\u000c', '\u200b', '\u180e',
  '.', ',', '!', '?', '...', '(', ')', '{', '}', '**', '->', '#', '@', '_', '-', '"', '`', '—', '。', '，', '¿',
  '中文', '测试', '日本語', 'カタカナ', '한국어', 'Ελληνικά', 'Русский', 'العربية', 'עברית', 'हिन्दी', 'ไทย',
  '🚀', '😀', '👍🏽', '🇫🇷', '👨‍👩‍👧', 'e\u0301', 'a\u0308', '\u0301',
  '<think>', '</think>', '<tool_call>', '</tool_call>', '<arg_key>', '</arg_key>', '<arg_value>', '</arg_value>',
  '<tool_response>', '</tool_response>', '/nothink', '<|user|>', '<|assistant|>', '<|system|>', '<|observation|>',
  '[gMASK]', '<sop>', '<eop>', '[MASK]', '[sMASK]', '<|endoftext|>', '<|begin_of_image|>', '<|end_of_image|>',
  '<thi', '<|user', '|>', '<', '>', '[g', 'MASK]',
  'ab', 'abc', 'xabcx', ' zz', 'zz', '★Ġ', 'Ġ', 'é', 'q', 'zqab', 'qa',
  '\u{13460}\u{13461}', '\u{10D40}\u{10D41}', '\u{2EBF0}', '\u{1E5F1}\u{1E5F2}\u{1E5F3}\u{1E5F4}', 'ß\u{11380}',
  'def f(x):\n    return x', 'json.dumps', 'http://example.com/a?b=c', 'snake_case', 'CamelCase', 'x86_64',
];

function randomCodePoint() {
  for (;;) {
    const r = rnd();
    let c;
    if (r < 0.5) c = Math.floor(rnd() * 0x3000);
    else if (r < 0.8) c = Math.floor(rnd() * 0x30000);
    else c = Math.floor(rnd() * 0x110000);
    if (c >= 0xd800 && c <= 0xdfff) continue;
    return String.fromCodePoint(c);
  }
}

function randomText(maxAtoms) {
  const n = Math.floor(rnd() * (maxAtoms + 1));
  let s = '';
  for (let i = 0; i < n; i++) s += rnd() < 0.15 ? randomCodePoint() : pick(atoms);
  return s;
}

// addToken appends an added token with the id HF tokenizers assigns: its
// vocabulary id, or the next one after the vocabulary and the added tokens.
function addToken(list, content, opts) {
  const maxID = Math.max(...list.map((t) => t.id));
  const vocabLen = Object.keys(base.model.vocab).length;
  const id = content in base.model.vocab ? base.model.vocab[content] : maxID >= vocabLen ? maxID + 1 : vocabLen;
  list.push(Object.assign({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: false }, opts));
}

function variants() {
  const out = [{ name: 'fixture', patch: {} }];

  const added = JSON.parse(JSON.stringify(base.added_tokens));
  const set = (content, opts) => Object.assign(added.find((t) => t.content === content), opts);
  set('<think>', { lstrip: true });
  set('</think>', { rstrip: true });
  set('<tool_call>', { single_word: true });
  set('<arg_key>', { lstrip: true, rstrip: true });
  set('[MASK]', { single_word: true });
  set('<tool_response>', { rstrip: true });
  set('/nothink', { normalized: true });
  addToken(added, 'ab', { normalized: true });
  addToken(added, 'abc', {});
  addToken(added, 'zqa', { normalized: true });
  addToken(added, 'qab', {});
  addToken(added, ' zz', {});
  addToken(added, '★Ġ', {});
  addToken(added, 'é', { normalized: true, single_word: true, special: true });
  out.push({ name: 'added-flags', patch: { added_tokens: added } });

  out.push({ name: 'prefix-space', patch: { pre_tokenizer: { type: 'Sequence', pretokenizers: [
    base.pre_tokenizer.pretokenizers[0],
    { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: false }] } } });
  out.push({ name: 'bytelevel-only', patch: { pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false } } });
  out.push({ name: 'no-ignore-merges', patch: { model: { ignore_merges: false } } });
  return out;
}

function applyPatch(obj, patch) {
  const o = JSON.parse(JSON.stringify(obj));
  for (const [k, v] of Object.entries(patch)) {
    if (k === 'model') Object.assign(o.model, v);
    else o[k] = v;
  }
  return o;
}

(async () => {
  const result = { generator: 'HF tokenizers 0.23.2 (npm)', variants: [] };
  for (const v of variants()) {
    const tok = Tokenizer.fromString(JSON.stringify(applyPatch(base, v.patch)));
    const count = v.name === 'fixture' ? 1200 : 300;
    const cases = [];
    for (let i = 0; i < count; i++) {
      const text = randomText(i < count / 2 ? 6 : 24);
      const enc = await tok.encode(text, null, { addSpecialTokens: false });
      const ids = enc.getIds();
      const decoded = await tok.decode(ids, false);
      const decodedSkip = await tok.decode(ids, true);
      cases.push({ text, ids, decoded, decoded_skip: decodedSkip });
    }
    result.variants.push({ name: v.name, patch: v.patch, cases });
  }
  process.stdout.write(JSON.stringify(result) + '\n');
})();
