#!/usr/bin/env node
/*
 * `vkgraph serve` driven by OpenAI's official JavaScript client (the npm package `openai`, which
 * tools/fetch-openai-client.sh installs into models/openai-client; VKG_OPENAI_CLIENT names another
 * folder), as a user's program drives it: completions and chat completions, streamed and not,
 * logprobs and logit_bias, models.list and retrieve, and errors surfacing as the client's typed errors.
 *
 *   node tests/server_openai_test.mjs VKGRAPH
 *
 * The model: a random Llama model (vkgraph random, llama-tiny shape) with SmolLM2's small test
 * tokenizer (tests/data/tokenizers/smollm2, 326 tokens; the model gets --vocab 326 and <|im_end|>
 * as its eos) and SmolLM2's chat template in tokenizer_config.json, made here at run time.
 * Greedy answers are checked against `vkgraph generate` on the ids of the conversation as the
 * template renders it, written out by hand below.  Without the package the test fails when CI is
 * set and is skipped (exit 77) otherwise.
 */
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';

const VKG = process.argv[2];
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const clientDir = process.env.VKG_OPENAI_CLIENT || path.join(repo, 'models', 'openai-client');
const clientEntry = path.join(clientDir, 'node_modules', 'openai', 'index.js');
if (!fs.existsSync(clientEntry)) {
  const msg = `the openai npm package is not in ${clientDir} (run tools/fetch-openai-client.sh)`;
  if (process.env.CI) {
    console.log(`FAIL: ${msg}`);
    process.exit(1);
  }
  console.log(`SKIP: ${msg}`);
  process.exit(77);
}
const { default: OpenAI } = await import(pathToFileURL(clientEntry).href);

const KEY = 'test-key-1234';
const failures = [];
let passed = 0;
function check(cond, what) {
  if (cond) passed++;
  else {
    failures.push(what);
    console.log('FAIL:', what);
  }
}

function vkg(...args) {
  return execFileSync(VKG, args, { encoding: 'utf-8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/* A model folder: the random model, the tokenizer, and (chat) the template. */
function makeModel(dir, chat) {
  vkg('random', dir, '--shape', 'llama-tiny', '--vocab', '326', '--eos', '325', '--ctx', '256');
  fs.copyFileSync(path.join(repo, 'tests/data/tokenizers/smollm2/tokenizer.json'), path.join(dir, 'tokenizer.json'));
  if (chat) fs.copyFileSync(path.join(repo, 'tests/data/templates/smollm2.json'), path.join(dir, 'tokenizer_config.json'));
}

const servers = [];
async function startServer(dir, ...args) {
  const proc = spawn(VKG, ['serve', '-m', dir, '--port', '0', '--device', 'cpu', '--api-key', KEY, ...args],
                     { stdio: ['ignore', 'ignore', 'pipe'] });
  servers.push(proc);
  let log = '';
  const port = await new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) resolve(Number(m[1]));
    });
    proc.on('exit', (code) => reject(new Error(`vkgraph serve exited ${code}: ${log}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(base + '/health')).status === 200) return { proc, base, log: () => log };
    } catch (e) { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the server did not become ready: ' + log);
}

async function post(base, route, body) {
  const r = await fetch(base + route, { method: 'POST', headers: { Authorization: `Bearer ${KEY}` },
                                        body: JSON.stringify(body) });
  return r.json();
}

/* What `vkgraph generate` continues ids with, greedy, as text (through the server's /detokenize). */
async function generateText(base, dir, ids, n) {
  const out = vkg('generate', '-m', dir, '--ids', JSON.stringify(ids), '-n', String(n), '--device', 'cpu', '--ids-out');
  const lists = out.split('\n').filter((l) => l.startsWith('[')).map((l) => JSON.parse(l));
  let gen = lists[lists.length - 1];
  if (JSON.stringify(gen.slice(0, ids.length)) === JSON.stringify(ids)) gen = gen.slice(ids.length);
  gen = gen.filter((id) => id !== 325);  /* the eos that ends the turn is not text */
  return (await post(base, '/detokenize', { tokens: gen })).content;
}

async function expectError(promise, Klass, status, what, code) {
  try {
    await promise;
    check(false, `${what}: no error`);
  } catch (e) {
    check(e instanceof Klass && e instanceof OpenAI.APIError && e.status === status && (!code || e.code === code),
          `${what}: ${e.constructor.name} ${e.status} ${e.code} (${e.message})`);
  }
}

async function main() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'vkg-openai-'));
  const chatDir = path.join(tmp, 'smol-chat');
  const plainDir = path.join(tmp, 'smol-plain');
  makeModel(chatDir, true);
  makeModel(plainDir, false);
  const s = await startServer(chatDir, '--parallel', '2');
  const client = new OpenAI({ baseURL: s.base + '/v1', apiKey: KEY, maxRetries: 0, timeout: 60000 });

  // ---- models.list
  const models = [];
  for await (const m of client.models.list()) models.push(m);
  check(models.length === 1 && models[0].id === 'smol-chat' && models[0].object === 'model',
        `models.list: ${JSON.stringify(models)}`);
  const one = await client.models.retrieve('smol-chat');
  check(one.id === 'smol-chat' && one.object === 'model' && one.created === models[0].created,
        `models.retrieve: ${JSON.stringify(one)}`);

  // ---- completions, whole and streamed, against vkgraph generate
  const promptIds = (await post(s.base, '/tokenize', { content: 'Hello world' })).tokens;
  const want = await generateText(s.base, chatDir, promptIds, 12);
  const c = await client.completions.create({ model: 'smol-chat', prompt: 'Hello world', max_tokens: 12, temperature: 0 });
  check(c.object === 'text_completion' && c.choices[0].text === want,
        `completion ${JSON.stringify(c.choices[0].text)} equals vkgraph generate's ${JSON.stringify(want)}`);
  check(c.usage.prompt_tokens === promptIds.length && c.usage.total_tokens === c.usage.prompt_tokens + c.usage.completion_tokens,
        `completion usage ${JSON.stringify(c.usage)}`);
  check(c.choices[0].finish_reason === (c.usage.completion_tokens === 12 ? 'length' : 'stop'),
        `completion finish_reason ${c.choices[0].finish_reason} with ${c.usage.completion_tokens} tokens`);
  const cs = await client.completions.create({ model: 'smol-chat', prompt: 'Hello world', max_tokens: 12, temperature: 0,
                                               stream: true, stream_options: { include_usage: true } });
  let text = '', last = null, usage = null;
  for await (const chunk of cs) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices.length) {
      text += chunk.choices[0].text;
      last = chunk.choices[0].finish_reason;
    }
  }
  check(text === c.choices[0].text && last === c.choices[0].finish_reason, `streamed completion ${JSON.stringify(text)}`);
  check(usage && usage.completion_tokens === c.usage.completion_tokens, `streamed completion usage ${JSON.stringify(usage)}`);

  // ---- chat: the template's rendering, written out by hand, continued by vkgraph generate
  const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Hi there' }];
  const rendered = '<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n';
  const chatIds = (await post(s.base, '/tokenize', { content: rendered })).tokens;
  check(chatIds.filter((id) => id === 324).length === 3 && chatIds.filter((id) => id === 325).length === 2,
        `the special tokens of the rendered text are read as themselves: ${JSON.stringify(chatIds)}`);
  const wantChat = await generateText(s.base, chatDir, chatIds, 40);
  const r = await client.chat.completions.create({ model: 'smol-chat', messages, max_tokens: 40, temperature: 0 });
  check(r.object === 'chat.completion' && r.choices[0].message.role === 'assistant' &&
        r.choices[0].message.content === wantChat,
        `chat ${JSON.stringify(r.choices[0].message.content)} equals vkgraph generate's ${JSON.stringify(wantChat)}`);
  check(r.usage.prompt_tokens === chatIds.length, `chat usage.prompt_tokens ${r.usage.prompt_tokens} = ${chatIds.length}`);
  check(r.choices[0].finish_reason === (r.usage.completion_tokens === 40 ? 'length' : 'stop'),
        `chat finish_reason ${r.choices[0].finish_reason} with ${r.usage.completion_tokens} tokens`);
  // the same conversation with content as a list of text parts, and max_completion_tokens
  const parts = [{ role: 'system', content: [{ type: 'text', text: 'You are terse.' }] },
                 { role: 'user', content: [{ type: 'text', text: 'Hi' }, { type: 'text', text: 'there' }] }];
  const rp = await client.chat.completions.create({ model: 'smol-chat', messages: parts, max_completion_tokens: 40,
                                                    temperature: 0 });
  const partsIds = (await post(s.base, '/tokenize', { content: rendered.replace('Hi there', 'Hi\nthere') })).tokens;
  check(rp.usage.prompt_tokens === partsIds.length, `text parts joined with a newline: ${rp.usage.prompt_tokens} tokens`);

  // streamed chat: the role first, content deltas, finish_reason, the usage chunk
  const stream = await client.chat.completions.create({ model: 'smol-chat', messages, max_tokens: 40, temperature: 0,
                                                        stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  const withChoices = chunks.filter((k) => k.choices.length);
  check(chunks.every((k) => k.object === 'chat.completion.chunk' && k.id === chunks[0].id), 'chunk objects and ids');
  check(withChoices[0].choices[0].delta.role === 'assistant', `the first chunk names the role: ${JSON.stringify(withChoices[0])}`);
  const streamed = withChoices.map((k) => k.choices[0].delta.content || '').join('');
  check(streamed === r.choices[0].message.content, `streamed chat ${JSON.stringify(streamed)} equals the whole answer`);
  const fin = withChoices.filter((k) => k.choices[0].finish_reason);
  check(fin.length === 1 && fin[0] === withChoices[withChoices.length - 1] &&
        fin[0].choices[0].finish_reason === r.choices[0].finish_reason, 'one finish_reason, on the last chunk');
  const u = chunks[chunks.length - 1];
  check(u.choices.length === 0 && u.usage && u.usage.completion_tokens === r.usage.completion_tokens &&
        u.usage.prompt_tokens === chatIds.length, `the usage chunk: ${JSON.stringify(u)}`);
  // a stop string; seeded sampling with every field repeats
  const ascii = /[A-Za-z]{2}/.exec(wantChat.slice(1));  /* a stop string of whole characters */
  check(ascii !== null, `the greedy answer has two letters in a row to stop at: ${JSON.stringify(wantChat)}`);
  if (ascii) {
    const stop = ascii[0];
    const rs = await client.chat.completions.create({ model: 'smol-chat', messages, max_tokens: 40, temperature: 0, stop });
    check(rs.choices[0].finish_reason === 'stop' && rs.choices[0].message.content === wantChat.slice(0, wantChat.indexOf(stop)),
          `chat with stop ${JSON.stringify(stop)}: ${JSON.stringify(rs.choices[0])}`);
  }
  // a second turn resends the first: its prompt is found in the slot's cache (prompt caching)
  const history = [...messages, { role: 'assistant', content: r.choices[0].message.content },
                   { role: 'user', content: 'More' }];
  const turn2 = await client.chat.completions.create({ model: 'smol-chat', max_tokens: 4, temperature: 0,
                                                       messages: history });
  const cachedTokens = turn2.usage.prompt_tokens_details && turn2.usage.prompt_tokens_details.cached_tokens;
  check(cachedTokens >= r.usage.prompt_tokens && cachedTokens < turn2.usage.prompt_tokens,
        `the second turn finds the first's prompt cached: ${JSON.stringify(turn2.usage)} after ` +
        JSON.stringify(r.usage));
  // logprobs as the client reads them: chat's content entries, whose bytes make up the answer, the
  // most likely first (greedy); completions' parallel lists; logit_bias banning the greedy token
  const lp = await client.chat.completions.create({ model: 'smol-chat', messages, max_tokens: 8, temperature: 0,
                                                    logprobs: true, top_logprobs: 3 });
  const entries = (lp.choices[0].logprobs && lp.choices[0].logprobs.content) || [];
  check(entries.length === lp.usage.completion_tokens &&
        Buffer.from(entries.flatMap((e) => e.bytes)).toString('utf-8') === lp.choices[0].message.content &&
        entries.every((e) => e.logprob <= 0 && e.top_logprobs.length === 3 && e.top_logprobs[0].token === e.token &&
                             e.top_logprobs[0].logprob === e.logprob &&
                             e.top_logprobs.every((t, i) => i === 0 || t.logprob <= e.top_logprobs[i - 1].logprob)),
        `chat logprobs: ${JSON.stringify(lp.choices[0].logprobs).slice(0, 300)}`);
  const cl = await client.completions.create({ model: 'smol-chat', prompt: 'Hello world', max_tokens: 4, temperature: 0,
                                               logprobs: 2 });
  const clp = cl.choices[0].logprobs;
  check(clp && clp.tokens.length === 4 && clp.token_logprobs.length === 4 && clp.text_offset.length === 4 &&
        clp.top_logprobs.every((t) => Object.keys(t).length >= 1 && Object.keys(t).length <= 3) &&
        clp.text_offset[0] === 0, `completions logprobs: ${JSON.stringify(clp)}`);
  // echo with logprobs and no generation: a prompt's log-likelihood, as evaluation harnesses ask
  const ev = await client.completions.create({ model: 'smol-chat', prompt: 'Hello world', max_tokens: 0, echo: true,
                                               logprobs: 1 });
  const evl = ev.choices[0].logprobs;
  check(ev.choices[0].text === 'Hello world' && evl && evl.token_logprobs.length === ev.usage.prompt_tokens &&
        evl.token_logprobs[0] === null && evl.top_logprobs[0] === null &&
        evl.token_logprobs.slice(1).every((v) => v < 0) && ev.usage.completion_tokens === 0,
        `echo: ${JSON.stringify(ev.choices[0])}`);
  const first = entries.length ? entries[0].top_logprobs : [];
  if (first.length === 3) {
    const banned = (await post(s.base, '/tokenize', { content: first[0].token })).tokens;
    const nb = await client.chat.completions.create({ model: 'smol-chat', messages, max_tokens: 1, temperature: 0,
                                                      logit_bias: { [banned[0]]: -100 }, logprobs: true });
    check(banned.length === 1 && nb.choices[0].logprobs.content[0].token === first[1].token,
          `logit_bias -100 on ${JSON.stringify(first[0].token)}: the second choice ${JSON.stringify(first[1].token)} ` +
          `comes first: ${JSON.stringify(nb.choices[0].logprobs)}`);
  }
  const sampled = { model: 'smol-chat', messages, max_tokens: 20, temperature: 0.8, top_p: 0.9, top_k: 50, min_p: 0.01,
                    seed: 11, presence_penalty: 0.5, frequency_penalty: 0.3 };
  const a = await client.chat.completions.create(sampled), b = await client.chat.completions.create(sampled);
  check(a.choices[0].message.content === b.choices[0].message.content, 'the same seed gives the same sample');

  // ---- errors as the client's typed errors
  await expectError(client.chat.completions.create({ model: 'x', messages, n: 2 }), OpenAI.BadRequestError, 400, 'n = 2');
  await expectError(client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }] }),
                    OpenAI.BadRequestError, 400, 'an image part');
  await expectError(client.chat.completions.create({ model: 'x', messages, max_tokens: 100000 }), OpenAI.BadRequestError, 400,
                    'max_tokens beyond the context', 'context_length_exceeded');
  await expectError(client.completions.create({ model: 'x', prompt: 'hi', temperature: 'hot' }), OpenAI.BadRequestError, 400,
                    'a string temperature');
  const wrongKey = new OpenAI({ baseURL: s.base + '/v1', apiKey: 'nope', maxRetries: 0 });
  await expectError(wrongKey.models.list(), OpenAI.AuthenticationError, 401, 'a wrong API key');
  await expectError(client.models.retrieve('no-such-model'), OpenAI.NotFoundError, 404, 'an unknown model',
                    'model_not_found');

  // ---- a model without a chat template: chat is a 400, completions still work
  const p = await startServer(plainDir);
  const plain = new OpenAI({ baseURL: p.base + '/v1', apiKey: KEY, maxRetries: 0 });
  await expectError(plain.chat.completions.create({ model: 'x', messages }), OpenAI.BadRequestError, 400,
                    'chat without a template', 'chat_template_missing');
  const pc = await plain.completions.create({ model: 'x', prompt: 'Hello world', max_tokens: 12, temperature: 0 });
  check(pc.choices[0].text === want, 'the model without a template completes as the other');

  for (const srv of [s, p]) {
    const exited = new Promise((resolve) => srv.proc.on('exit', (code) => resolve(code)));
    srv.proc.kill('SIGTERM');
    check((await exited) === 0, 'SIGTERM: exit 0');
  }
  fs.rmSync(tmp, { recursive: true, force: true });
}

try {
  await main();
} catch (e) {
  failures.push(String(e && e.stack || e));
  console.log('FAIL:', e);
} finally {
  for (const proc of servers) if (proc.exitCode === null) proc.kill('SIGKILL');
}
console.log(`server_openai: ${passed} passed, ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);
