#!/usr/bin/env node
/*
 * Writes the tokenizer.json test data of tests/test_tokenizer_families.c:
 *
 *   1. tests/data/tokenizers/<family>/tokenizer.json: small tokenizers built here, each with the
 *      components of a real family (its pre-tokenizer regexes, normalizers, model settings,
 *      post-processor, decoders and added tokens) and a vocabulary + merges learned by a few
 *      hundred BPE steps on a small corpus (so the files are ours to publish).
 *   2. golden.txt beside each: the ids and decoded text that Hugging Face's tokenizers library
 *      itself gives for each test string: its Rust code, as the npm package `tokenizers` (the
 *      library's Node bindings, the same code transformers' fast tokenizers run) ships it.
 *   3. With real tokenizer.json files (argument REAL_DIR holding llama3/, qwen3/, llama2/ as
 *      tools/fetch-tokenizers.sh lays them out): tests/data/tokenizer-golden/<name>.txt, the same
 *      table for them (the files themselves are not committed: their licences are the models').
 *
 *   npm install --prefix /tmp/tokref tokenizers@0.23.2
 *   node tools/make_tokenizer_json_golden.js /tmp/tokref/node_modules/tokenizers [REAL_DIR]
 *
 * split_special_tokens=True is transformers' switch for the library's encode_special_tokens,
 * which the Node bindings do not expose: those ids come from the same tokenizer.json with the
 * special tokens taken out of added_tokens (the library then skips them in the same way: they
 * stay text; the test strings hold no other added token inside a special one), the ids of the
 * other added tokens mapped back by their content.
 *
 * golden.txt, one case a line, fields separated by a tab:
 *   NAME  TEXT (hex of its UTF-8)  ids (default)  ids (add_special_tokens=false)
 *   ids (split_special_tokens=true)  decode(default ids) (hex)
 * ids are comma-separated; an empty field is an empty list.  Lines starting with '#' are comments.
 */
'use strict';
const fs = require('fs');
const path = require('path');

const pkgDir = path.resolve(process.argv[2] || '/tmp/tokref/node_modules/tokenizers');
const realDir = process.argv[3] ? path.resolve(process.argv[3]) : null;
const repo = path.resolve(__dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf-8'));
const { Tokenizer } = require(pkgDir);

/* ---- the corpus the small vocabularies are learned from ---------------------------------- */
const corpus = [
  'The transformer reads a sequence of tokens and, at every layer, lets each position look back at the',
  'positions before it. Attention weights say how much each earlier token matters. Hello world, hello there!',
  "It's the model's job; they're sure we'll see what I'd do. DON'T SHOUT. Numbers: 0 1 2 3 4 5 6 7 8 9,",
  '12 345 6789 2024-12-02 3.14159 1,000,000 and 42. Café naïve résumé über straße façade.',
  '東京は日本の首都です。你好，世界！ 한국어 텍스트. Привет, мир! مرحبا',
  'def main():\n    return x + 1  # code\n\tindented\r\n  spaces   and    runs',
].join('\n');

/* GPT-2's bytes_to_unicode */
function byteChars() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const map = new Array(256);
  for (const b of bs) map[b] = String.fromCodePoint(b);
  let n = 0;
  for (let b = 0; b < 256; b++) if (map[b] === undefined) map[b] = String.fromCodePoint(256 + n++);
  return map;
}
const BYTE = byteChars();
const toByteLevel = (s) => Array.from(Buffer.from(s, 'utf-8'), (b) => BYTE[b]).join('');

/* Learns `steps` merges on words (arrays of symbols): the most frequent pair, ties to the
 * smaller pair in code-unit order, so the result never depends on iteration order. */
function learnMerges(words, steps) {
  const merges = [];
  for (let s = 0; s < steps; s++) {
    const counts = new Map();
    for (const w of words)
      for (let i = 0; i + 1 < w.length; i++) {
        const k = w[i] + '\u0000' + w[i + 1];
        counts.set(k, (counts.get(k) || 0) + 1);
      }
    let best = null, bestN = 1;
    for (const [k, n] of counts) if (n > bestN || (n === bestN && best !== null && k < best)) { best = k; bestN = n; }
    if (best === null) break;
    const [a, b] = best.split('\u0000');
    merges.push([a, b]);
    for (const w of words)
      for (let i = 0; i + 1 < w.length; i++)
        if (w[i] === a && w[i + 1] === b) w.splice(i, 2, a + b);
  }
  return merges;
}

const GPT2_SPLIT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

function added(id, content, special, extra = {}) {
  return Object.assign({ id, content, single_word: false, lstrip: false, rstrip: false,
                         normalized: !special, special }, extra);
}

/* A byte-level vocabulary: the 256 byte symbols, then the merges' tokens. */
function byteLevelModel(steps, ignoreMerges) {
  const words = (corpus.match(GPT2_SPLIT) || []).map((w) => Array.from(toByteLevel(w)));
  const merges = learnMerges(words, steps);
  const vocab = {};
  let next = 0;
  for (let b = 0; b < 256; b++) vocab[BYTE[b]] = next++;
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = next++;
  return { model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
                    end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: ignoreMerges,
                    vocab, merges }, size: next };
}

/* A SentencePiece-style vocabulary: <unk> <s> </s>, the 256 <0xNN> byte tokens, the corpus'
 * characters (▁ for a space), then the merges' tokens. */
function pieceModel(steps) {
  const text = corpus.replace(/ /g, '\u2581');
  const words = text.split(/(?=\u2581)|\n/u).filter((w) => w.length).map((w) => Array.from(w));
  const vocab = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  let next = 3;
  for (let b = 0; b < 256; b++) vocab['<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>'] = next++;
  const chars = Array.from(new Set(Array.from(text.replace(/\n/g, '')))).sort();
  for (const c of chars) if (!(c in vocab)) vocab[c] = next++;
  const merges = learnMerges(words, steps);
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = next++;
  return { model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
                    end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, vocab, merges }, size: next };
}

const byteLevelPre = (useRegex) => ({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: useRegex });
const byteLevelDecoder = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true };
const template = (bos, id) => ({
  type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
  pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
         { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
  special_tokens: { [bos]: { id: bos, ids: [id], tokens: [bos] } },
});
const pieceDecoders = { type: 'Sequence', decoders: [
  { type: 'Replace', pattern: { String: '\u2581' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' },
  { type: 'Strip', content: ' ', start: 1, stop: 0 }] };

function tokenizerJson(m, rest) {
  return Object.assign({ version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
                         pre_tokenizer: null, post_processor: null, decoder: null }, rest, { model: m.model });
}

/* ---- the families ------------------------------------------------------------------------- */
function families() {
  const out = {};
  let m = byteLevelModel(300, false);
  out.gpt2 = tokenizerJson(m, {
    added_tokens: [added(m.size, '<|endoftext|>', true, { normalized: true })],
    pre_tokenizer: byteLevelPre(true), post_processor: { type: 'ByteLevel', add_prefix_space: true,
    trim_offsets: false, use_regex: true }, decoder: byteLevelDecoder });

  m = byteLevelModel(300, true);
  out.llama3 = tokenizerJson(m, {
    added_tokens: [added(m.size, '<|begin_of_text|>', true), added(m.size + 1, '<|end_of_text|>', true),
                   added(m.size + 2, '<|eot_id|>', true), added(m.size + 3, '<|start_header_id|>', true)],
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: LLAMA3_REGEX }, behavior: 'Isolated', invert: false }, byteLevelPre(false)] },
    post_processor: { type: 'Sequence', processors: [
      { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
      template('<|begin_of_text|>', m.size)] },
    decoder: byteLevelDecoder });

  m = byteLevelModel(300, false);
  out.qwen2 = tokenizerJson(m, {
    added_tokens: [added(m.size, '<|endoftext|>', true), added(m.size + 1, '<|im_start|>', true),
                   added(m.size + 2, '<|im_end|>', true), added(m.size + 3, '<think>', false, { normalized: false })],
    normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: QWEN_REGEX }, behavior: 'Isolated', invert: false }, byteLevelPre(false)] },
    post_processor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    decoder: byteLevelDecoder });

  m = byteLevelModel(300, false);
  out.smollm2 = tokenizerJson(m, {
    added_tokens: [added(m.size, '<|endoftext|>', true), added(m.size + 1, '<|im_start|>', true),
                   added(m.size + 2, '<|im_end|>', true)],
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Digits', individual_digits: true }, byteLevelPre(true)] },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: byteLevelDecoder });

  m = pieceModel(250);
  out.llama2 = tokenizerJson(m, {
    added_tokens: [added(0, '<unk>', true, { normalized: false }), added(1, '<s>', true, { normalized: false }),
                   added(2, '</s>', true, { normalized: false })],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '\u2581' },
                                                  { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
    post_processor: template('<s>', 1), decoder: pieceDecoders });

  m = pieceModel(250);
  m.model.ignore_merges = false;
  out.mistral = tokenizerJson(m, {
    added_tokens: [added(0, '<unk>', true, { normalized: false }), added(1, '<s>', true, { normalized: false }),
                   added(2, '</s>', true, { normalized: false }),
                   added(m.size, '[INST]', true, { normalized: false }),
                   added(m.size + 1, '<mask>', true, { normalized: false, lstrip: true }),
                   added(m.size + 2, '[/X]', false, { normalized: false, rstrip: true }),
                   added(m.size + 3, 'hello', false, { normalized: false, single_word: true })],
    pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false },
    post_processor: template('<s>', 1),
    decoder: { type: 'Sequence', decoders: [{ type: 'ByteFallback' }, { type: 'Metaspace', replacement: '\u2581',
                                                                         prepend_scheme: 'first', split: false },
                                            { type: 'Fuse' }] } });
  /* Components no family above uses, each in a byte-level tokenizer of its own. */
  const split = (behavior, pattern, invert) => ({ type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern, behavior, invert }, byteLevelPre(false)] });
  const plainBL = (pre, rest = {}) => {
    const b = byteLevelModel(200, false);
    return tokenizerJson(b, Object.assign({ pre_tokenizer: pre, decoder: byteLevelDecoder,
      added_tokens: [added(b.size, '<|endoftext|>', true)] }, rest));
  };
  out.split_removed = plainBL(split('Removed', { Regex: '\\p{L}+|\\p{N}+' }, true));
  out.split_previous = plainBL(split('MergedWithPrevious', { String: ' ' }, false));
  out.split_next = plainBL(split('MergedWithNext', { Regex: '\\s' }, false));
  out.split_contiguous = plainBL(split('Contiguous', { Regex: '[.,!?\\s]' }, false));
  out.digits_runs = plainBL({ type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: false },
                                                                { type: 'ByteLevel', add_prefix_space: true,
                                                                  trim_offsets: true, use_regex: true }] },
                            { post_processor: { type: 'RobertaProcessing', sep: ['<|endoftext|>', 0],
                                                cls: ['<|endoftext|>', 0], trim_offsets: true,
                                                add_prefix_space: true } });
  out.digits_runs.post_processor.sep[1] = out.digits_runs.added_tokens[0].id;
  out.digits_runs.post_processor.cls[1] = out.digits_runs.added_tokens[0].id;
  out.normalizers = plainBL(byteLevelPre(true), { normalizer: { type: 'Sequence', normalizers: [
    { type: 'NFKD' }, { type: 'Lowercase' }, { type: 'Strip', strip_left: true, strip_right: true },
    { type: 'Replace', pattern: { Regex: '[0-9]' }, content: '#' }] } });
  out.nfd_whitespace = plainBL({ type: 'Sequence', pretokenizers: [{ type: 'Whitespace' }, byteLevelPre(false)] },
                               { normalizer: { type: 'NFD' } });
  out.lowercase = plainBL(byteLevelPre(true), { normalizer: { type: 'Lowercase' } });
  out.nfkc_wsplit = plainBL({ type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, byteLevelPre(false)] },
                            { normalizer: { type: 'NFKC' } });
  m = pieceModel(250);
  out.metaspace_split = tokenizerJson(m, {
    added_tokens: [added(0, '<unk>', true, { normalized: false }), added(1, '<s>', true, { normalized: false }),
                   added(2, '</s>', true, { normalized: false })],
    pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true },
    post_processor: { type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
               { SpecialToken: { id: '</s>', type_id: 0 } }],
      pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
      special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] }, '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] } } },
    decoder: { type: 'Sequence', decoders: [{ type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always',
                                              split: true }, { type: 'ByteFallback' }, { type: 'Fuse' },
                                            { type: 'Strip', content: '!', start: 0, stop: 2 }] } });
  return out;
}

/* ---- the test strings --------------------------------------------------------------------- */
const cases = [
  ['empty', ''],
  ['hello', 'Hello world'],
  ['sentence', "The animal didn't cross the street because it was too tired."],
  ['contractions', "It's THEY'RE we'll I'D you've"],
  ['digits', '1 12 123 1234 12345 3.14159 2024-12-02 ١٢٣ ½'],
  ['spaces', 'a  b   c    d\t\te\n\nf \n g  \n\n  h   '],
  ['leading_spaces', '   indented text'],
  ['only_spaces', '     '],
  ['newlines', 'line one\r\nline two\n\n\nline three\n'],
  ['cjk', '東京は日本の首都です。你好，世界！'],
  ['hangul', '한국어 텍스트'],
  ['emoji', 'I ❤️ 🦙 and 👩‍👩‍👧‍👦 family 👍🏽!'],
  ['combining', 'Cafe\u0301 nai\u0308ve e\u0301\u0302 A\u030a'],
  ['precomposed', 'Café naïve Å ﬁ ①'],
  ['accents', 'über straße façade résumé'],
  ['code', 'def main():\n    return x + 1  # code\n\tindented'],
  ['punctuation', '!!! ... ??? ,,, --- (a) [b] {c} "q" \'s'],
  ['special_eot', 'before<|endoftext|>after'],
  ['special_im', '<|im_start|>user\nhi<|im_end|>\n'],
  ['special_llama3', '<|begin_of_text|><|start_header_id|>user hi<|eot_id|>'],
  ['special_s', '<s> Hello </s> world <unk>'],
  ['special_inst', '[INST] hello there [/INST]'],
  ['lstrip_mask', 'fill the   <mask> here'],
  ['rstrip', 'a [/X]   b'],
  ['single_word', 'hello hellos ahello hello.'],
  ['think', 'x<think>y</think>'],
  ['partial_special', '<|endoftext| <|im_start <s'],
  ['nbsp', 'a\u00a0b\u3000c\u2009d'],
  ['nel_bom', 'a\u0085b \ufeffc \u0085 d\u2028e\u180ef'],
  ['turkish_sharp', 'İstanbul ß ẞ ǅ ﬀ'],
  ['long_word', 'Pneumonoultramicroscopicsilicovolcanoconiosis'],
  ['mixed', 'Привет, мир! مرحبا 123abc ABC_def'],
];

const hex = (s) => Buffer.from(s, 'utf-8').toString('hex');

async function goldenTable(json, title) {
  const plain = Tokenizer.fromString(JSON.stringify(json));
  const noSpecial = Object.assign({}, json, { added_tokens: json.added_tokens.filter((t) => !t.special) });
  const split = Tokenizer.fromString(JSON.stringify(noSpecial));
  const kept = new Set(noSpecial.added_tokens.map((t) => t.content));
  const lines = [`# ${title}`, `# ids from ${pkg.name} ${pkg.version} (tools/make_tokenizer_json_golden.js)`,
                 '# NAME\tTEXT hex\tids\tids add_special_tokens=false\tids split_special_tokens=true\tdecode hex'];
  for (const [name, text] of cases) {
    const ids = (await plain.encode(text)).getIds();
    const bare = (await plain.encode(text, null, { addSpecialTokens: false })).getIds();
    /* the library numbers added tokens afresh: map the remaining ones back to their ids */
    const sp = (await split.encode(text)).getIds().map((id) => {
      const tok = split.idToToken(id);
      return kept.has(tok) ? plain.tokenToId(tok) : id;
    });
    const back = await plain.decode(ids, false);
    lines.push([name, hex(text), ids.join(','), bare.join(','), sp.join(','), hex(back)].join('\t'));
  }
  return lines.join('\n') + '\n';
}

async function main() {
const fam = families();
for (const [name, json] of Object.entries(fam)) {
  const dir = path.join(repo, 'tests', 'data', 'tokenizers', name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(json, null, 1) + '\n');
  fs.writeFileSync(path.join(dir, 'golden.txt'), await goldenTable(json, `test tokenizer "${name}": ${name}'s components`));
  console.log(`wrote ${dir}`);
}
if (realDir) {
  const out = path.join(repo, 'tests', 'data', 'tokenizer-golden');
  fs.mkdirSync(out, { recursive: true });
  for (const name of fs.readdirSync(realDir).sort()) {
    const file = path.join(realDir, name, 'tokenizer.json');
    if (!fs.existsSync(file)) continue;
    const json = JSON.parse(fs.readFileSync(file, 'utf-8'));
    const sha = require('crypto').createHash('sha256').update(fs.readFileSync(file)).digest('hex');
    fs.writeFileSync(path.join(out, name + '.txt'), await goldenTable(json, `${name}/tokenizer.json sha256 ${sha}`));
    console.log(`wrote ${path.join(out, name + '.txt')}`);
  }
}
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
