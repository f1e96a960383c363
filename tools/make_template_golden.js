#!/usr/bin/env node
/*
 * Writes tests/data/templates/golden.json: the chat templates in tests/data/templates/*.json
 * rendered over the conversations of tests/data/templates/conversations.json by an independent
 * implementation, Hugging Face's own JavaScript Jinja for chat templates (npm @huggingface/jinja),
 * for tests/test_template.c.
 *
 *   npm install --prefix /tmp/jinjaref @huggingface/jinja
 *   node tools/make_template_golden.js /tmp/jinjaref/node_modules/@huggingface/jinja
 *
 * Each case is rendered as apply_chat_template(messages, add_generation_prompt=..., tokenize=False)
 * with bos_token / eos_token from the config (a string or {"content": ...}) and, where the
 * conversation is an object, its other keys as extra variables.  strftime_now is fixed to
 * NOW_SECONDS (UTC) so the outputs do not depend on the day they were made.
 * A case whose render raises (raise_exception) is recorded as {"error": true}.
 */
'use strict';
const fs = require('fs');
const path = require('path');

const pkgDir = path.resolve(process.argv[2] || '/tmp/jinjaref/node_modules/@huggingface/jinja');
const repo = path.resolve(__dirname, '..');
const dir = path.join(repo, 'tests', 'data', 'templates');
const { Template, Environment, Interpreter } = require(pkgDir);
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf-8'));

const NOW_SECONDS = 1796208000; /* 2026-12-02 00:00:00 UTC */
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
function strftimeNow(fmt) {
  const d = new Date(NOW_SECONDS * 1000);
  const two = (n) => String(n).padStart(2, '0');
  return fmt.replace(/%([dbYmHMS%])/g, (_, c) => ({
    d: two(d.getUTCDate()), b: MONTHS[d.getUTCMonth()], Y: String(d.getUTCFullYear()),
    m: two(d.getUTCMonth() + 1), H: two(d.getUTCHours()), M: two(d.getUTCMinutes()),
    S: two(d.getUTCSeconds()), '%': '%' })[c]);
}
/* Template.render() with the package's own globals, but strftime_now fixed */
function render(tpl, ctx) {
  const env = new Environment();
  const globals = { false: false, true: true, none: null, False: false, True: true, None: null,
                    raise_exception: (m) => { throw new Error(m); }, strftime_now: strftimeNow };
  for (const [k, v] of Object.entries({ ...globals, ...ctx })) env.set(k, v);
  return new Interpreter(env).run(tpl.parsed).value;
}
const token = (t) => (t == null ? '' : typeof t === 'string' ? t : t.content);

const conversations = JSON.parse(fs.readFileSync(path.join(dir, 'conversations.json'), 'utf-8'));
const names = fs.readdirSync(dir).filter((f) => f.endsWith('.json') && f !== 'conversations.json' && f !== 'golden.json').sort();
const cases = [];
for (const file of names) {
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf-8'));
  const tpl = new Template(cfg.chat_template);
  for (const [conv, value] of Object.entries(conversations)) {
    for (const gen of [true, false]) {
      const extra = Array.isArray(value) ? { messages: value } : value;
      const ctx = { bos_token: token(cfg.bos_token), eos_token: token(cfg.eos_token), add_generation_prompt: gen, ...extra };
      const c = { template: file, conversation: conv, add_generation_prompt: gen, input: JSON.stringify(value) };
      try {
        c.output = render(tpl, ctx);
      } catch (e) {
        if (process.env.DEBUG) console.error(file, conv, e.message);
        c.error = true;
      }
      cases.push(c);
    }
  }
}
const out = { generator: `${pkg.name} ${pkg.version} via tools/make_template_golden.js`, now: NOW_SECONDS, cases };
fs.writeFileSync(path.join(dir, 'golden.json'), JSON.stringify(out, null, 1) + '\n');
console.log(`${cases.length} cases, ${cases.filter((c) => c.error).length} errors`);
