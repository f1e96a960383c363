#!/usr/bin/env node
/*
 * Writes tests/data/tokenizer_cases.txt: GPT-2 token ids computed by the reference tokenizer, the
 * npm package gpt-3-encoder 1.1.4 (a port of OpenAI's encoder.py), for tests/test_tokenizer.c.
 *
 *   npm install --prefix /tmp/tokref gpt-3-encoder@1.1.4
 *   node tools/make_tokenizer_golden.js /tmp/tokref/node_modules/gpt-3-encoder
 *
 * The package's encoder.json and vocab.bpe must be byte-identical to data/gpt2-tokenizer/ (checked
 * below), so the ids are those our own data files give.
 *
 * Output format, one case a line, fields separated by a tab:
 *   NAME  TEXT as lowercase hex of its UTF-8 bytes (empty for "")  ids, comma-separated
 * Lines starting with '#' are comments.
 */
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const pkgDir = path.resolve(process.argv[2] || '/tmp/tokref/node_modules/gpt-3-encoder');
const repo = path.resolve(__dirname, '..');
const outPath = process.argv[3] || path.join(repo, 'tests', 'data', 'tokenizer_cases.txt');
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf-8'));
const { encode, decode } = require(pkgDir);

const sha = (p) => crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');
for (const name of ['encoder.json', 'vocab.bpe']) {
  const ours = path.join(repo, 'data', 'gpt2-tokenizer', name);
  if (sha(path.join(pkgDir, name)) !== sha(ours)) {
    console.error(`${name} in ${pkgDir} differs from ${ours}: the ids would not match our data`);
    process.exit(1);
  }
}

const paragraph =
  'The transformer reads a sequence of tokens and, at every layer, lets each position look back ' +
  'at the positions before it. Attention weights say how much each earlier token matters: in ' +
  '"The animal didn\'t cross the street because it was too tired", the word "it" attends mostly ' +
  'to "animal"; change "tired" to "wide" and it attends to "street" instead. GPT-2 (124M ' +
  'parameters, 12 layers, 12 heads, 768 channels) was trained on 40GB of web text -- about 8 ' +
  'million documents -- and its vocabulary has 50,257 entries: 256 bytes, 50,000 merges and ' +
  '<|endoftext|>.\n\nNothing here is magic; it\'s matrix multiplications, a softmax, and a lot ' +
  'of bookkeeping. We\'ll see each step, one at a time.';

const asciiPrintable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('');

// [name, text]: names are single words so a failing test can say which case broke.
const cases = [
  ['lesson_tired', "The animal didn't cross the street because it was too tired"],
  ['lesson_wide', "The animal didn't cross the street because it was too wide"],
  ['hello_world', 'Hello world'],
  ['hello_leading_space', ' Hello'],
  ['uppercase_word', 'HELLO WORLD'],
  ['contractions', "it's don't they're we've I'm we'll he'd"],
  ['contractions_upper', "IT'S DON'T THEY'RE WE'VE I'M WE'LL HE'D"],
  ['contraction_upper_s', "John'S car"],
  ['contractions_bare', "'s 't 're 've 'm 'll 'd"],
  ['contraction_prefix', "'sup 'til 'rex 'llama"],
  ['apostrophe_runs', "''s rock 'n' roll '''"],
  ['curly_apostrophe', 'don\u2019t it\u2019s'],
  ['digit', '0'],
  ['digits_short', '123'],
  ['digits_long', '1234567890123456789012345678901234567890'],
  ['numbers_mixed', 'pi is 3.14159, e is 2.71828 and 1,000,000 is a million'],
  ['date_version', 'on 2024-01-31 we shipped v1.2.3-rc4'],
  ['digits_spaced', ' 42  7   0 '],
  ['digits_other_scripts', '\u0663\u0664\u0665 \u00bd \u00b2 \u216b \u0968\u0966'],
  ['punct_bang', '!!!'],
  ['punct_ellipsis', 'Wait... what?!?!'],
  ['punct_sentence', 'Hello, world! How are you?'],
  ['punct_math', '(a+b)*c=d/e-f%g'],
  ['punct_symbols', '#$%&@^~`|\\[]{}<>'],
  ['punct_html', '<html><body class="x">hi</body></html>'],
  ['punct_quotes', '"quoted" and \u201csmart\u201d'],
  ['punct_dashes', '---===--- \u2014 \u2013'],
  ['ascii_printable', asciiPrintable],
  ['spaces_two', 'a  b'],
  ['spaces_many', 'a         b'],
  ['spaces_leading', '   leading'],
  ['spaces_trailing', 'trailing   '],
  ['spaces_only', '     '],
  ['space_single', ' '],
  ['newline', '\n'],
  ['newlines', '\n\n\n'],
  ['lines', 'line1\nline2\n\nline3\n'],
  ['indented', 'def f(x):\n    return x ** 2\n\n\nprint(f(3))\n'],
  ['tab', '\t'],
  ['tabs', 'a\tb\t\tc\t'],
  ['crlf', 'one\r\ntwo\r\n'],
  ['whitespace_mix', 'mixed \t\n  spaces \n\t end'],
  ['unicode_spaces', 'a\u00a0b\u3000c\u2003d\u202fe'],
  ['unicode_space_runs', 'x \u00a0 \u3000y'],
  ['line_separators', 'a\u2028b\u2029c\u000bd\u000ce'],
  ['bom_leading', '\ufeffbom at the start'],
  ['bom_and_nel', 'x\ufeffbom \u0085nel'],
  ['bom_after_space', 'a \ufeffb \u180ec'],
  ['control_chars', 'a\u0000b\u0007c\u001bd\u007f'],
  ['accents', 'caf\u00e9 na\u00efve r\u00e9sum\u00e9'],
  ['german', '\u00dcber die Stra\u00dfe'],
  ['combining', 'cafe\u0301 n\u0303'],
  ['latin1', '\u00a1\u00a2\u00a3\u00a4\u00a5\u00a6\u00a7\u00a8\u00a9\u00aa\u00ab\u00ac\u00ad\u00ae\u00af\u00b0\u00bf\u00d7\u00f7\u00ff'],
  ['cjk_chinese', '\u4f60\u597d\uff0c\u4e16\u754c'],
  ['cjk_japanese', '\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8'],
  ['korean', '\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8'],
  ['emoji', '\u{1f600}'],
  ['emoji_text', 'I \u2764\ufe0f NY \u{1f5fd}'],
  ['emoji_zwj_family', '\u{1f468}\u200d\u{1f469}\u200d\u{1f467}\u200d\u{1f466}'],
  ['emoji_skin_tone', '\u{1f44d}\u{1f3fd} ok'],
  ['emoji_rainbow_flag', '\u{1f3f3}\ufe0f\u200d\u{1f308}'],
  ['emoji_flags', '\u{1f1eb}\u{1f1f7}\u{1f1ef}\u{1f1f5}'],
  ['mixed_scripts', 'Hello \u041f\u0440\u0438\u0432\u0435\u0442 \u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd \u0928\u092e\u0938\u094d\u0924\u0947 \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac'],
  ['astral_letters', '\u{1d518}\u{1d52b}\u{1d526} \u{10348}'],
  ['empty', ''],
  ['endoftext', '<|endoftext|>'],
  ['endoftext_inside', 'Hello<|endoftext|>World <|endoftext|>'],
  ['url_email', 'see https://example.com/path?q=1&r=2 or mail user@example.org'],
  ['long_word', 'Supercalifragilisticexpialidocious antidisestablishmentarianism'],
  ['repeated_letter', 'a'.repeat(100)],
  ['repeated_pair', 'ab'.repeat(60)],
  ['paragraph', paragraph],
];

const lines = [
  `# GPT-2 tokenizer golden cases: ids from ${pkg.name} ${pkg.version} (Node ${process.version}).`,
  '# Generated by tools/make_tokenizer_golden.js; do not edit by hand.',
  '# One case a line, tab-separated: NAME, TEXT as hex of its UTF-8 bytes, ids comma-separated.',
];
const seen = new Set();
for (const [name, text] of cases) {
  if (seen.has(name)) throw new Error(`duplicate case name ${name}`);
  seen.add(name);
  const ids = encode(text);
  // The reference's decode (TextDecoder) drops a leading byte order mark; ours keeps every byte.
  const expected = text.startsWith('\ufeff') ? text.slice(1) : text;
  if (decode(ids) !== expected) throw new Error(`reference does not round-trip case ${name}`);
  lines.push(`${name}\t${Buffer.from(text, 'utf8').toString('hex')}\t${ids.join(',')}`);
}
fs.writeFileSync(outPath, lines.join('\n') + '\n');
console.log(`wrote ${cases.length} cases to ${outPath}`);
