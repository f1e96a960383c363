#!/usr/bin/env python3
"""`vkgraph serve` against its HTTP clients: every endpoint, the errors, hostile clients and
concurrent greedy clients, on 127.0.0.1 with random GPT-2 models (vkgraph gpt2-random) and the
GPT-2 tokenizer, and chat requests on a random Llama model with SmolLM2's test tokenizer and chat
template.  Usage: server_test.py VKGRAPH.  The requests are written as a client writes them (the
standard library; raw sockets where a client misbehaves); NumPy recomputes the penalties."""
import array
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from serve_client import check, failures  # noqa: E402  (tools/serve_client.py)

VKG = sys.argv[1]
KEY = "s3cret-key"
servers = []  # killed at exit whatever happens, so that no server outlives the test


class Server:
    def __init__(self, model, *args, key=KEY, device="cpu", env=None):
        cmd = [VKG, "serve", "-m", model, "--port", "0", "--device", device] + list(args)
        if key:
            cmd += ["--api-key", key]
        self.key = key
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **env) if env else None)
        servers.append(self.proc)
        self.log = []
        line = self.proc.stderr.readline()
        self.log.append(line)
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert m, "no port in: " + line
        self.base = "http://127.0.0.1:%s" % m.group(1)
        self.port = int(m.group(1))
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.time() + 60
        while self.request("GET", "/health")[0] != 200:
            assert time.time() < deadline and self.proc.poll() is None, "the server did not become ready"
            time.sleep(0.05)

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def request(self, method, path, body=None, key="default", raw=None, timeout=60):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method)
        key = self.key if key == "default" else key
        if key:
            req.add_header("Authorization", "Bearer " + key)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def json(self, method, path, body=None, **kw):
        status, text = self.request(method, path, body, **kw)
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def stream(self, body):
        """The events of a streamed completion, as parsed JSON, and whether [DONE] ended it."""
        status, text = self.request("POST", "/v1/completions", dict(body, stream=True))
        assert status == 200, (status, text)
        events, done = [], False
        for block in text.split("\n\n"):
            if not block.startswith("data: "):
                continue
            payload = block[6:]
            if payload == "[DONE]":
                done = True
            else:
                events.append(json.loads(payload))
        return events, done

    def stop(self, sig=signal.SIGTERM):
        t = time.time()
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = None
        return rc, time.time() - t


def error_of(status, body, want_status, param=None, code=None):
    ok = status == want_status and isinstance(body, dict) and "error" in body
    err = body.get("error", {}) if isinstance(body, dict) else {}
    ok = ok and set(err) == {"message", "type", "param", "code"} and err["message"]
    if param is not None:
        ok = ok and err.get("param") == param
    if code is not None:
        ok = ok and err.get("code") == code
    return ok


def raw_status(port, data):
    """The status a request written byte for byte gets (the body may stay unsent)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        head = sock.recv(4096).decode(errors="replace")
    m = re.match(r"HTTP/1\.[01] (\d+)", head)
    return int(m.group(1)) if m else None


def generate_cli(model, ids, n):
    """What `vkgraph generate` continues the ids with (greedy), as text."""
    out = subprocess.run([VKG, "generate", "-m", model, "--ids", json.dumps(ids), "-n", str(n), "--device", "cpu",
                          "--ids-out"], capture_output=True, text=True, check=True).stdout
    lists = [json.loads(l) for l in out.splitlines() if l.startswith("[")]
    return lists[-1][len(ids):] if lists[-1][:len(ids)] == ids else lists[-1]


def all_logits_of(model, ids, tmp):
    """The logits after every position by `vkgraph logits --all`, [T, V]."""
    out = os.path.join(tmp, "all-logits.npy")
    subprocess.run([VKG, "logits", "-m", model, "--ids", json.dumps(ids), "-o", out, "--all", "--device", "cpu"],
                   check=True, capture_output=True)
    return np.load(out).reshape(len(ids), -1).astype(np.float64)


def logits_of(model, ids, tmp):
    """The last position's logits by `vkgraph logits`."""
    out = os.path.join(tmp, "logits.npy")
    subprocess.run([VKG, "logits", "-m", model, "--ids", json.dumps(ids), "-o", out, "--device", "cpu"], check=True,
                   capture_output=True)
    return np.load(out).reshape(-1).astype(np.float64)


def check_penalties(s, model, tmp):
    """presence_penalty and frequency_penalty reach the sampler: the first greedy token with them
    equals the argmax of the logits lowered, in NumPy, by frequency * count + presence for every id
    in the context (prompt included).  The prompt is a greedy run's prefix that its next token
    repeats, so that the penalties have something to act on."""
    start = [15496, 995, 11, 314]
    run = start + generate_cli(model, start, 24)
    ks = [k for k in range(len(start), len(run)) if run[k] in run[:k]] or [len(run) - 1]
    changed = False
    for k in ks[:3]:
        prompt = run[:k]
        logits = logits_of(model, prompt, tmp)
        ids, counts = np.unique(prompt, return_counts=True)
        for presence, frequency in [(1.5, 0.0), (0.0, 0.7), (0.4, -0.3)]:
            want = logits.copy()
            want[ids] -= frequency * counts + presence
            want_id = int(np.argmax(want))
            st, body = s.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 1, "temperature": 0,
                                                          "presence_penalty": presence,
                                                          "frequency_penalty": frequency})
            got = s.json("POST", "/tokenize", {"content": body["choices"][0]["text"]})[1]["tokens"] if st == 200 else None
            check(got == [want_id], "penalties %.1f/%.1f after %d ids: token %r, NumPy's %d" %
                  (presence, frequency, k, got, want_id))
            changed = changed or want_id != int(np.argmax(logits))
    check(changed, "the penalties changed at least one greedy choice (else the check above proves little)")


def log_softmax(logits):
    x = logits - logits.max()
    return x - np.log(np.exp(x).sum())


def check_logprobs(s, model, tmp):
    """logprobs: every generated token's logprob and the top alternatives equal NumPy's float64
    log-softmax of the logits `vkgraph logits` gives for the same ids (within 2e-5), greedy and
    sampled (the logprobs are the model's, before the temperature); the streamed events add up
    to the whole answer's."""
    prompt = [15496, 995, 11, 314]
    for temperature in [0, 1.5]:
        req = {"prompt": prompt, "max_tokens": 5, "temperature": temperature, "seed": 3, "logprobs": 3,
               "return_tokens": True}
        st, body = s.json("POST", "/v1/completions", req)
        ch = body["choices"][0] if st == 200 else {}
        lp = ch.get("logprobs") or {}
        ids = ch.get("tokens", [])
        check(st == 200 and len(ids) == 5 and len(lp.get("token_logprobs", [])) == 5 and
              len(lp["tokens"]) == 5 and len(lp["top_logprobs"]) == 5, "logprobs' shape: %r" % body)
        if st != 200:
            continue
        texts = [s.json("POST", "/detokenize", {"tokens": [i]})[1]["content"] for i in ids]
        check(lp["tokens"] == texts and "".join(texts) == ch["text"], "logprobs' tokens are the text's: %r" % lp)
        offsets = [len("".join(texts[:k])) for k in range(5)]
        check(lp["text_offset"] == offsets, "text_offset %r, want %r" % (lp["text_offset"], offsets))
        for k in range(5):
            want = log_softmax(logits_of(model, prompt + ids[:k], tmp))
            order = np.argsort(-want, kind="stable")[:3]
            top = lp["top_logprobs"][k]
            want_top = {texts[k]: want[ids[k]]}
            for i in order:
                want_top.setdefault(s.json("POST", "/detokenize", {"tokens": [int(i)]})[1]["content"], want[i])
            check(abs(lp["token_logprobs"][k] - want[ids[k]]) < 2e-5,
                  "temperature %g token %d: logprob %.7f, NumPy's %.7f" % (temperature, k, lp["token_logprobs"][k],
                                                                         want[ids[k]]))
            check(set(top) == set(want_top) and all(abs(top[t] - want_top[t]) < 2e-5 for t in top),
                  "temperature %g token %d: top_logprobs %r, NumPy's %r" % (temperature, k, top, want_top))
            if temperature == 0:
                check(ids[k] == int(order[0]), "greedy chooses the most likely token")
        events, done = s.stream(req)
        parts = [e["choices"][0]["logprobs"] for e in events if e["choices"] and e["choices"][0]["logprobs"]]
        check(done and [v for p in parts for v in p["token_logprobs"]] == lp["token_logprobs"] and
              [v for p in parts for v in p["text_offset"]] == lp["text_offset"],
              "streamed logprobs add up to the whole answer's: %r" % parts)
    st, body = s.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 2, "logprobs": 0})
    lp = body["choices"][0]["logprobs"]
    check(st == 200 and all(list(t) == [w] for t, w in zip(lp["top_logprobs"], lp["tokens"])),
          "logprobs 0: the chosen token alone in top_logprobs: %r" % lp)
    st, body = s.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 2})
    check(st == 200 and body["choices"][0]["logprobs"] is None, "no logprobs unasked")


def check_prompt_cache(s):
    """Prompt caching: a second turn that resends the first's prompt and answer runs only what is
    new (usage's cached_tokens: the first prompt and all but the last answer token); its answer
    and logprobs are those of a cold run (cache_prompt false) within 1e-4; two conversations
    alternating, and four one after another, each find their cache again; /metrics counts the
    cached tokens."""
    P = "/v1/completions"
    turns = [[(101 + 13 * t + 977 * c) % 50257 for t in range(20)] for c in range(2)]
    firsts = []
    for c in range(2):
        st, body = s.json("POST", P, {"prompt": turns[c], "max_tokens": 8, "temperature": 0, "return_tokens": True,
                                      "cache_prompt": False})
        firsts.append(body["choices"][0]["tokens"] if st == 200 else [])
        check(st == 200 and body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, "cache_prompt false: %r" %
              body.get("usage"))
    for c in (0, 1, 0):  # the conversations alternate: each finds its slot again
        second = turns[c] + firsts[c] + [7, 8, 9]
        req = {"prompt": second, "max_tokens": 6, "temperature": 0, "return_tokens": True, "logprobs": 0}
        st, warm = s.json("POST", P, req)
        st2, cold = s.json("POST", P, dict(req, cache_prompt=False))
        if st != 200 or st2 != 200:
            check(False, "second turns: %r %r" % (warm, cold))
            continue
        cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
        check(cached >= len(turns[c]) + 7, "conversation %d's second turn found %d tokens cached, %d expected at least"
              % (c, cached, len(turns[c]) + 7))
        w, k = warm["choices"][0], cold["choices"][0]
        check(w["tokens"] == k["tokens"] and
              max(abs(a - b) for a, b in zip(w["logprobs"]["token_logprobs"], k["logprobs"]["token_logprobs"])) < 1e-4,
              "a cached prefix gives a cold run's answer: %r, %r" % (w["logprobs"], k["logprobs"]))
    # Four conversations one after another: each request runs in the lowest free slot (the
    # smallest decode plan), and the cache it displaces moves to the least recently used slot,
    # so with four slots every conversation finds its first turn again.
    four = [[(3 + 7 * t + 1009 * c) % 50257 for t in range(12)] for c in range(4)]
    answers = []
    for c in range(4):
        st, body = s.json("POST", P, {"prompt": four[c], "max_tokens": 4, "temperature": 0, "return_tokens": True})
        answers.append(body["choices"][0]["tokens"] if st == 200 else [])
    for c in range(4):
        st, body = s.json("POST", P, {"prompt": four[c] + answers[c] + [5], "max_tokens": 1, "temperature": 0})
        cached = body["usage"]["prompt_tokens_details"]["cached_tokens"] if st == 200 else -1
        check(cached >= len(four[c]) + 3, "conversation %d of 4 found %d tokens cached, %d expected at least"
              % (c, cached, len(four[c]) + 3))
    st, metrics = s.request("GET", "/metrics")
    n = re.search(r"\nvkgraph_prompt_tokens_cached_total (\d+)\n", metrics)
    check(st == 200 and n and int(n.group(1)) >= 3 * 27, "/metrics counts cached tokens: %r" % (n and n.group(0)))


def check_logit_bias(s, model, tmp):
    """logit_bias is added to the logits before the sampler: the greedy choice is NumPy's argmax
    of the logits plus the bias, for a ban (-100) of the favourite and a push (+8) of another."""
    prompt = [15496, 995, 11, 314]
    logits = logits_of(model, prompt, tmp)
    best, tenth = int(np.argmax(logits)), int(np.argsort(-logits)[9])
    for bias in [{best: -100}, {tenth: 8.0}, {best: -100, tenth: -100}]:
        want = logits.copy()
        for i, b in bias.items():
            want[i] += b
        st, body = s.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 1, "temperature": 0,
                                                      "return_tokens": True, "logprobs": 0,
                                                      "logit_bias": {str(i): b for i, b in bias.items()}})
        got = body["choices"][0]["tokens"] if st == 200 else None
        check(got == [int(np.argmax(want))], "logit_bias %r: token %r, NumPy's %d" % (bias, got, int(np.argmax(want))))
        if st == 200:  # the logprob is the model's, without the bias
            check(abs(body["choices"][0]["logprobs"]["token_logprobs"][0] - log_softmax(logits)[got[0]]) < 2e-5,
                  "logit_bias leaves the logprobs the model's")


CHAT_CTX = 160  # room for the template's default system message (88 tokens) and an answer


def chat_model(tmp, name, template=True):
    """A random Llama model with SmolLM2's test tokenizer (326 tokens, <|im_end|> = 325 its eos)
    and, with template, SmolLM2's chat template."""
    d = os.path.join(tmp, name)
    subprocess.run([VKG, "random", d, "--shape", "llama-tiny", "--vocab", "326", "--eos", "325", "--ctx", str(CHAT_CTX)],
                   check=True, capture_output=True)
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
    with open(os.path.join(data, "tokenizers", "smollm2", "tokenizer.json"), "rb") as f:
        tok = f.read()
    with open(os.path.join(d, "tokenizer.json"), "wb") as f:
        f.write(tok)
    if template:
        with open(os.path.join(data, "templates", "smollm2.json"), "rb") as f:
            cfg = f.read()
        with open(os.path.join(d, "tokenizer_config.json"), "wb") as f:
            f.write(cfg)
    return d


def check_stop_ids(tmp, rendered):
    """Every id of generation_config.json's eos_token_id list ends a chat turn: the list gets a
    token the greedy answer chooses, and the answer ends just before it with finish_reason stop."""
    d = chat_model(tmp, "stops")
    s = Server(d, key=None)
    ids = s.json("POST", "/tokenize", {"content": rendered})[1]["tokens"]
    gen = generate_cli(d, ids, 12)
    k = next((k for k in range(1, len(gen)) if gen[k] not in gen[:k] and gen[k] != 325), 0)
    s.stop()
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [325, gen[k]]}, f)
    s = Server(d, key=None)
    st, body = s.json("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                       "max_tokens": 12, "temperature": 0})
    want = s.json("POST", "/detokenize", {"tokens": gen[:k]})[1]["content"] if k else ""
    check(st == 200 and body["choices"][0]["finish_reason"] == "stop" and body["usage"]["completion_tokens"] == k and
          body["choices"][0]["message"]["content"] == want,
          "generation_config.json's second stop id %d ends the turn after %d tokens: %r" % (gen[k], k, body))
    s.stop()


def check_chat_logprobs(s, model, tmp, prompt):
    """Chat's logprobs (logprobs true, top_logprobs 2): an entry per generated token whose bytes
    make up the answer, its logprob and alternatives NumPy's log-softmax of `vkgraph logits`."""
    req = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0, "logprobs": True,
           "top_logprobs": 2, "return_tokens": True}
    st, body = s.json("POST", "/v1/chat/completions", req)
    ch = body["choices"][0] if st == 200 else {}
    content = (ch.get("logprobs") or {}).get("content", [])
    ids = ch.get("tokens", [])
    check(st == 200 and len(content) == len(ids) == body["usage"]["completion_tokens"] > 0,
          "chat logprobs: an entry per token: %r" % body)
    check(bytes(b for e in content for b in e["bytes"]).decode(errors="replace") == ch["message"]["content"],
          "chat logprobs' bytes make up the answer")
    for k, e in enumerate(content):
        want = log_softmax(logits_of(model, prompt + ids[:k], tmp))
        order = [int(i) for i in np.argsort(-want, kind="stable")[:2]]
        tops = e["top_logprobs"]
        check(abs(e["logprob"] - want[ids[k]]) < 2e-5 and len(tops) == 2 and ids[k] == order[0] and
              all(abs(t["logprob"] - want[i]) < 2e-5 for t, i in zip(tops, order)) and tops[0]["token"] == e["token"],
              "chat token %d: %r, NumPy's %r" % (k, e, [(i, want[i]) for i in order]))
    st, body = s.json("POST", "/v1/chat/completions", dict(req, top_logprobs=None))
    check(st == 200 and all(e["top_logprobs"] == [] for e in body["choices"][0]["logprobs"]["content"]),
          "chat logprobs without top_logprobs: no alternatives")
    status, text = s.request("POST", "/v1/chat/completions", dict(req, stream=True))
    events = [json.loads(b[6:]) for b in text.split("\n\n") if b.startswith("data: {")]
    streamed = [e for ev in events for c in ev["choices"] for e in ((c.get("logprobs") or {}).get("content") or [])]
    check(status == 200 and streamed == content, "streamed chat logprobs add up to the whole answer's")


def check_chat(tmp):
    """/v1/chat/completions: the answer's shape and every way a chat request can be wrong."""
    d = chat_model(tmp, "chat")
    s = Server(d, "--parallel", "2")
    C = "/v1/chat/completions"
    msgs = [{"role": "user", "content": "Hi"}]
    st, body = s.json("POST", C, {"messages": msgs, "max_tokens": 5, "temperature": 0})
    check(st == 200 and body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-") and
          body["choices"][0]["message"]["role"] == "assistant" and
          body["choices"][0]["finish_reason"] in ("stop", "length"), "a chat completion: %r" % body)
    rendered = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    n_rendered = len(s.json("POST", "/tokenize", {"content": rendered})[1]["tokens"])
    check(body["usage"]["prompt_tokens"] == n_rendered, "the template's default system message is rendered (%d, %d)" %
          (body["usage"]["prompt_tokens"], n_rendered))
    check_chat_logprobs(s, d, tmp, s.json("POST", "/tokenize", {"content": rendered})[1]["tokens"])
    st, dev = s.json("POST", C, {"messages": [{"role": "developer", "content": "Be brief."}] + msgs, "max_tokens": 0})
    n_sys = len(s.json("POST", "/tokenize", {"content": "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi"
                                                        "<|im_end|>\n<|im_start|>assistant\n"})[1]["tokens"])
    check(st == 200 and dev["usage"]["prompt_tokens"] == n_sys, "a developer message is the system's: %r" % dev)
    st, body = s.json("POST", C, {"messages": msgs, "temperature": 0})
    check(st == 200 and body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"] <= CHAT_CTX,
          "chat's default max_tokens is the room left: %r" % body.get("usage"))
    wrong = [
        ({"messages": "hi"}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [5]}, "messages"),
        ({"messages": [{"content": "hi"}]}, "messages"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages"),
        ({"messages": [{"role": "user"}]}, "messages"),
        ({"messages": [{"role": "user", "content": 7}]}, "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages"),
        ({"max_tokens": 3}, "messages"),
        ({"messages": msgs, "max_completion_tokens": "3"}, "max_completion_tokens"),
        ({"messages": msgs, "max_completion_tokens": 3, "max_tokens": "x"}, "max_tokens"),
        ({"messages": msgs, "n": 3}, "n"),
        ({"messages": msgs, "logprobs": "yes"}, "logprobs"),
        ({"messages": msgs, "top_logprobs": 2}, "top_logprobs"),
        ({"messages": msgs, "logprobs": False, "top_logprobs": 2}, "top_logprobs"),
        ({"messages": msgs, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"messages": msgs, "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"messages": msgs, "response_format": {"type": "json_object"}}, "response_format"),
        ({"messages": msgs, "stream_options": {"include_usage": True}}, "stream_options"),
        ({"messages": msgs, "stop": [1]}, "stop"),
        ({"messages": msgs, "seed": 1.5}, "seed"),
    ]
    for req, param in wrong:
        check(error_of(*s.json("POST", C, req), 400, param), "chat %r: 400 naming %s" % (req, param))
    st, body = s.json("POST", C, {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]})
    check(error_of(st, body, 400, "messages") and "image_url" in body["error"]["message"],
          "an image part is refused by its type's name: %r" % body)
    check(error_of(*s.json("POST", C, {"messages": [{"role": "user", "content": "x" * CHAT_CTX}]}), 400, "messages",
                   "context_length_exceeded"), "a conversation longer than the context")
    check(error_of(*s.json("POST", C, {"messages": msgs, "max_completion_tokens": CHAT_CTX - n_rendered + 1}), 400, "max_completion_tokens",
                   "context_length_exceeded"), "max_completion_tokens beyond the context")
    check(s.json("POST", C, {"messages": msgs, "max_completion_tokens": CHAT_CTX - n_rendered})[0] == 200,
          "max_completion_tokens that just fits")
    rc, _ = s.stop()
    check(rc == 0, "the chat server stops with 0")
    check_stop_ids(tmp, rendered)
    # a model with a tokenizer but no tokenizer_config.json: chat is a 400 that says so
    s = Server(chat_model(tmp, "plain", template=False))
    st, body = s.json("POST", C, {"messages": msgs})
    check(error_of(st, body, 400, "messages", "chat_template_missing") and "tokenizer_config.json" in body["error"]["message"],
          "no template: %r" % body)
    s.stop()


def forced_model(tiny, tmp, token):
    """A copy of the random GPT-2 `tiny` whose greedy choice is `token` at every step: ln_f's scale
    zeroed and its bias 3 times the token's (tied) embedding row, tripled too, so every position's
    logits are that row's dot products with the others, the token's own by far the largest."""
    d = os.path.join(tmp, "forced-%d" % token)
    shutil.copytree(tiny, d)
    path = os.path.join(d, "model.safetensors")
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n

        def tensor(name):
            lo, hi = header[name]["data_offsets"]
            f.seek(base + lo)
            return array.array("f", f.read(hi - lo))

        def store(name, values):
            f.seek(base + header[name]["data_offsets"][0])
            f.write(values.tobytes())
        width = header["wte.weight"]["shape"][1]
        wte = tensor("wte.weight")
        row = array.array("f", [3 * x for x in wte[token * width:(token + 1) * width]])
        wte[token * width:(token + 1) * width] = row
        store("wte.weight", wte)
        store("ln_f.weight", array.array("f", [0.0] * width))
        store("ln_f.bias", row)
    return d


def check_split_characters(tiny, tmp):
    """A token that ends inside a UTF-8 character waits, unsent, for the token that completes it,
    and the stream sends nothing meanwhile: keep-alive comments come only after a second without
    text (a writer that did not wait would spin, sending them back to back).  Token 447 is the
    bytes e2 80, the first two of three of '\u2019' (and of many other punctuation marks)."""
    model = forced_model(tiny, tmp, 447)
    check(generate_cli(model, [15496, 995], 4) == [447] * 4, "the forced model chooses token 447")
    srv = Server(model)
    try:
        for _ in range(3):
            t0 = time.time()
            status, text = srv.request("POST", "/v1/completions", {"prompt": [15496, 995], "max_tokens": 40,
                                                                   "temperature": 0, "stream": True})
            took = time.time() - t0
            comments = [b for b in text.split("\n\n") if b.startswith(":")]
            check(status == 200 and text.endswith("data: [DONE]\n\n"), "the stream of split characters ends")
            check(took >= 1 or not comments, "no keep-alive comment in a stream of %.2f s (%d sent)" %
                  (took, len(comments)))
        # with return_tokens, a token's id goes out at once, its text still held back (the first
        # token's bytes end inside a character); ids that come while the writer is busy share an
        # event, and the last event may hold none (finish_reason alone).  On a busy machine all six
        # tokens may come before the writer's first event, which then ends the stream too (its
        # text the flush), or several before it: the holding back shows in a first event of one
        # token, so other runs are tried again.
        for attempt in range(5):
            events, done = srv.stream({"prompt": [15496, 995], "max_tokens": 6, "temperature": 0,
                                       "return_tokens": True})
            check(done and [t for e in events for t in e["choices"][0]["tokens"]] == [447] * 6,
                  "every id of a stream of split characters goes out: %r" % events)
            with_tokens = [e["choices"][0] for e in events if e["choices"][0]["tokens"]]
            if len(with_tokens) >= 2 and len(with_tokens[0]["tokens"]) == 1:
                check(with_tokens[0]["text"] == "" and with_tokens[0]["tokens"] == [447],
                      "the ids go out while their text waits: %r" % events)
                break
        else:
            print("note: no stream of 6 tokens began with an event of one: the holding back not exercised")
    finally:
        srv.stop()


def check_no_tokenizer(tmp):
    """A folder without a tokenizer takes prompts as ids and answers with the generated ids (its
    text is empty): those `vkgraph generate` gives, whole and streamed."""
    d = os.path.join(tmp, "bare")
    subprocess.run([VKG, "random", d, "--shape", "llama-tiny", "--ctx", "64"], check=True, capture_output=True)
    want = generate_cli(d, [5, 6, 7], 6)
    srv = Server(d, key=None)
    try:
        st, body = srv.json("POST", "/v1/completions", {"prompt": [5, 6, 7], "max_tokens": 6, "temperature": 0})
        choice = body["choices"][0] if st == 200 else {}
        check(choice.get("tokens") == want and choice.get("text") == "",
              "a folder without a tokenizer answers with the ids %r: %r" % (want, body))
        events, done = srv.stream({"prompt": [5, 6, 7], "max_tokens": 6, "temperature": 0})
        check(done and [t for e in events for t in e["choices"][0]["tokens"]] == want,
              "streamed ids without a tokenizer: %r" % events)
        check(error_of(*srv.json("POST", "/v1/completions", {"prompt": "some text"}), 400, "prompt"),
              "a text prompt without a tokenizer")
    finally:
        srv.stop()


def check_chunked_prefill(tiny, tmp):
    """Prompts of 41 and 29 tokens prefilled in chunks of 5 while short ones decode: every answer
    is `vkgraph generate`'s.  The two long ones and a short one echo their prompts with logprobs:
    each prompt token's is NumPy's float64 log-softmax of the row before it in `vkgraph logits
    --all` (within 2e-5), across the chunks' edges; the first token's is null."""
    s = Server(tiny, "--parallel", "4", "--prefill-chunk", "5", key=None)
    prompts = [[(37 * i + 11 * t) % 50257 for t in range(n)] for i, n in enumerate((41, 2, 29, 3))]
    got, echoed = [None] * 4, [None] * 4

    def client(i):
        echo = {"echo": True, "logprobs": 2} if i != 3 else {}
        st, body = s.json("POST", "/v1/completions", dict({"prompt": prompts[i], "max_tokens": 6,
                                                           "temperature": 0}, **echo))
        got[i] = body["choices"][0]["text"] if st == 200 else None
        echoed[i] = body["choices"][0]["logprobs"] if st == 200 else None
    threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cli = [s.json("POST", "/detokenize", {"tokens": generate_cli(tiny, p, 6)})[1]["content"] for p in prompts]
    cli = [(s.json("POST", "/detokenize", {"tokens": p})[1]["content"] if i != 3 else "") + c
           for i, (p, c) in enumerate(zip(prompts, cli))]
    check(got == cli, "answers with prompts in chunks of 5 equal vkgraph generate's (echoed prompts first)")
    for i in (0, 1, 2):
        lp, p = echoed[i], prompts[i]
        if not lp:
            continue
        logits = all_logits_of(tiny, p, tmp)
        want = [log_softmax(logits[k])[p[k + 1]] for k in range(len(p) - 1)]
        got_lp = lp["token_logprobs"][:len(p)]
        check(len(lp["token_logprobs"]) == len(p) + 6 and got_lp[0] is None and lp["top_logprobs"][0] is None and
              lp["text_offset"][:2] == [0, len(s.json("POST", "/detokenize", {"tokens": p[:1]})[1]["content"])] and
              max(abs(a - b) for a, b in zip(got_lp[1:], want)) < 2e-5,
              "echoed prompt %d's logprobs: %r, NumPy's %r" % (i, got_lp, want))
    rc, _ = s.stop(signal.SIGTERM)
    check(rc == 0, "SIGTERM: exit 0")
    bad = subprocess.run([VKG, "serve", "-m", tiny, "--prefill-chunk", "-1"], capture_output=True, text=True)
    check(bad.returncode == 1 and "--prefill-chunk" in bad.stderr, "--prefill-chunk -1 refused: %r" % bad.stderr)


def check_device_timeout(tmp):
    """A Vulkan run past its timeout (VKG_TIMEOUT_MS=1): the request gets a 500 error object.  The
    next request waits for that run once more with the same 1 ms; a run that is still going then
    counts as a lost device, and from there on every request and /health answer 503 (code
    device_lost), so that a load balancer or orchestrator takes the replica out.  The server,
    whose timed-out work may still be running when it stops, exits 0 on SIGTERM."""
    model = os.path.join(tmp, "wide")  # a 1000-token prompt runs for tens of ms on lavapipe
    subprocess.run([VKG, "gpt2-random", model, "--ctx", "1024", "--embd", "256"], check=True, capture_output=True)
    s = Server(model, key=None, device="vulkan", env={"VKG_TIMEOUT_MS": "1"})
    request = {"prompt": list(range(1000)), "max_tokens": 4}
    st, body = s.json("POST", "/v1/completions", request)
    if st == 200:
        print("note: the device ran a 1000-token prompt within 1 ms: the timeout not exercised")
    else:
        check(error_of(st, body, 500) and "did not finish" in body["error"]["message"],
              "a run past its timeout: a 500 error object: %r %r" % (st, body))
        for _ in range(4):
            st, body = s.json("POST", "/v1/completions", request)
            if st == 503:
                break
            check(error_of(st, body, 500), "a request while the device catches up: a 500 error object: %r" % body)
        if st != 503:
            print("note: the device caught up with every timed-out run within 1 ms: a lost device not exercised")
        else:
            check(error_of(st, body, 503, code="device_lost") and "restart" in body["error"]["message"],
                  "a device lost for good: 503 device_lost: %r" % body)
            st, body = s.json("GET", "/health")
            check(error_of(st, body, 503, code="device_lost"), "/health once the device is lost: 503: %r %r" % (st, body))
            st, body = s.json("POST", "/v1/completions", {"prompt": [1, 2], "max_tokens": 1})
            check(error_of(st, body, 503, code="device_lost"), "every later request: 503 device_lost: %r" % body)
            st, metrics = s.request("GET", "/metrics")
            check(st == 200 and "\nvkgraph_device_lost 1\n" in metrics, "/metrics: vkgraph_device_lost 1")
    rc, _ = s.stop(signal.SIGTERM)
    check(rc == 0, "SIGTERM after a run past its timeout: exit 0 (rc %r)" % rc)


def main():
    tmp = tempfile.mkdtemp(prefix="vkg-server-")
    tiny = os.path.join(tmp, "tiny")  # 64 positions, GPT-2's vocabulary
    subprocess.run([VKG, "gpt2-random", tiny], check=True, capture_output=True)
    long_ctx = os.path.join(tmp, "long")  # 1024 positions: sequences that run long enough to meet
    subprocess.run([VKG, "gpt2-random", long_ctx, "--ctx", "1024", "--embd", "32", "--heads", "2"], check=True,
                   capture_output=True)

    s = Server(tiny, "--parallel", "4", "--queue", "4", "--timeout", "2")
    # ---- plain endpoints
    st, body = s.json("GET", "/health")
    check(st == 200 and body == {"status": "ok"}, "/health 200 when ready: %r" % body)
    st, body = s.json("GET", "/v1/models")
    check(st == 200 and body["object"] == "list" and body["data"][0]["id"] == "tiny", "/v1/models: %r" % body)
    st, one = s.json("GET", "/v1/models/tiny")
    check(st == 200 and one == body["data"][0], "/v1/models/tiny: %r" % one)
    check(error_of(*s.json("GET", "/v1/models/gpt-4"), 404, "model", "model_not_found"), "an unknown model")
    check(error_of(*s.json("GET", "/v1/models/"), 404), "/v1/models/ without a name")
    check(error_of(*s.json("GET", "/v1/models/tiny/x"), 404), "a path below the model")
    check(error_of(*s.json("POST", "/v1/models/tiny", {}), 405), "POST of a model")
    st, body = s.json("POST", "/tokenize", {"content": "Hello world"})
    check(st == 200 and body == {"tokens": [15496, 995]}, "/tokenize: %r" % body)
    st, body = s.json("POST", "/detokenize", {"tokens": [15496, 995]})
    check(st == 200 and body == {"content": "Hello world"}, "/detokenize: %r" % body)

    # ---- completions against `vkgraph generate`
    prompt_ids = [15496, 995, 11, 314]
    want_ids = generate_cli(tiny, prompt_ids, 12)
    st, det = s.json("POST", "/detokenize", {"tokens": want_ids})
    st, body = s.json("POST", "/v1/completions", {"prompt": prompt_ids, "max_tokens": 12, "temperature": 0})
    check(st == 200 and body["object"] == "text_completion", "completion: %r" % body)
    text = body["choices"][0]["text"]
    check(text == det["content"], "greedy completion %r equals vkgraph generate's %r" % (text, det["content"]))
    check(body["usage"] == {"prompt_tokens": 4, "completion_tokens": 12, "total_tokens": 16,
                            "prompt_tokens_details": {"cached_tokens": 0}}, "usage %r" % body["usage"])
    check(body["choices"][0]["finish_reason"] == "length", "finish_reason length")
    st, as_text = s.json("POST", "/v1/completions", {"prompt": "Hello world, I", "max_tokens": 12, "temperature": 0,
                                                      "unknown_field": {"ignored": True}, "user": "x"})
    check(st == 200 and as_text["choices"][0]["text"] == text, "a string prompt gives the ids' completion")

    # streamed: the chunks add up to the same text; finish_reason, usage, [DONE]
    events, done = s.stream({"prompt": prompt_ids, "max_tokens": 12, "temperature": 0,
                             "stream_options": {"include_usage": True}})
    chunks = [e for e in events if e["choices"]]
    check(done, "a stream ends with data: [DONE]")
    check("".join(e["choices"][0]["text"] for e in chunks) == text, "streamed text equals the whole one")
    check(chunks[-1]["choices"][0]["finish_reason"] == "length" and
          all(e["choices"][0]["finish_reason"] is None for e in chunks[:-1]), "finish_reason only on the last chunk")
    check(not events[-1]["choices"] and events[-1]["usage"]["completion_tokens"] == 12, "the usage chunk")
    events, done = s.stream({"prompt": prompt_ids, "max_tokens": 3, "temperature": 0})
    check(done and all("usage" not in e for e in events), "no usage chunk without include_usage")
    # return_tokens: the ids `vkgraph generate` gives, whole and streamed (and no ids unasked)
    st, body = s.json("POST", "/v1/completions", {"prompt": prompt_ids, "max_tokens": 12, "temperature": 0,
                                                  "return_tokens": True})
    check(st == 200 and body["choices"][0]["tokens"] == want_ids and body["choices"][0]["text"] == text,
          "return_tokens lists the generated ids: %r" % body)
    check("tokens" not in as_text["choices"][0], "no ids without return_tokens")
    events, done = s.stream({"prompt": prompt_ids, "max_tokens": 12, "temperature": 0, "return_tokens": True})
    check(done and [t for e in events for t in e["choices"][0]["tokens"]] == want_ids,
          "the streamed events' ids add up to the generated ids")

    # a stop string: the text ends before it, finish_reason "stop"
    stop = text[len(text) // 2:len(text) // 2 + 3]
    st, body = s.json("POST", "/v1/completions", {"prompt": prompt_ids, "max_tokens": 12, "temperature": 0,
                                                  "stop": [stop, "zzzz"]})
    check(st == 200 and body["choices"][0]["finish_reason"] == "stop" and
          body["choices"][0]["text"] == text[:text.index(stop)], "stop string: %r" % body)
    # seeded sampling repeats; max_tokens 0
    req = {"prompt": prompt_ids, "max_tokens": 10, "temperature": 0.9, "top_p": 0.95, "top_k": 40, "min_p": 0.01,
           "seed": 7}
    a, b = s.json("POST", "/v1/completions", req)[1], s.json("POST", "/v1/completions", req)[1]
    check(a["choices"][0]["text"] == b["choices"][0]["text"], "the same seed gives the same sample")
    st, body = s.json("POST", "/v1/completions", {"prompt": prompt_ids, "max_tokens": 0})
    check(st == 200 and body["usage"]["completion_tokens"] == 0, "max_tokens 0")

    # ---- errors
    P = "/v1/completions"
    check(error_of(*s.json("POST", P, {"prompt": "x", "max_tokens": "5"}), 400, "max_tokens"), "max_tokens a string")
    check(error_of(*s.json("POST", P, {"prompt": "x", "temperature": [1]}), 400, "temperature"), "temperature array")
    check(error_of(*s.json("POST", P, {"prompt": "x", "stream": 1}), 400, "stream"), "stream a number")
    check(error_of(*s.json("POST", P, {"prompt": "x", "return_tokens": 1}), 400, "return_tokens"),
          "return_tokens a number")
    check(error_of(*s.json("POST", P, {"prompt": "x", "stop": 3}), 400, "stop"), "stop a number")
    check(error_of(*s.json("POST", P, {"prompt": "x", "n": 2}), 400, "n"), "n = 2 refused")
    check(error_of(*s.json("POST", P, {"prompt": "x", "presence_penalty": 2.5}), 400, "presence_penalty"),
          "presence_penalty beyond 2")
    check(error_of(*s.json("POST", P, {"prompt": "x", "frequency_penalty": "1"}), 400, "frequency_penalty"),
          "frequency_penalty a string")
    check(error_of(*s.json("POST", P, {"prompt": "x", "user": 5}), 400, "user"), "an OpenAI field of the wrong type")
    for bias in [{"050": 1}, {"-1": 1}, {"x": 1}, {"50257": 1}, {"50": 101}, {"50": "1"}, [1],
                 {str(i): 1 for i in range(1025)}]:
        check(error_of(*s.json("POST", P, {"prompt": "x", "logit_bias": bias}), 400, "logit_bias"),
              "logit_bias %.60r refused" % (bias,))
    for lp in [21, -1, True, 2.5]:
        check(error_of(*s.json("POST", P, {"prompt": "x", "logprobs": lp}), 400, "logprobs"), "logprobs %r" % (lp,))
    check(error_of(*s.json("POST", P, {"prompt": "x", "echo": 1}), 400, "echo"), "echo a number")
    check(error_of(*s.json("POST", P, {"prompt": [1, 2, 99999]}), 400, "prompt"), "id outside the vocabulary")
    check(error_of(*s.json("POST", P, {"max_tokens": 3}), 400, "prompt"), "no prompt")
    check(error_of(*s.json("POST", P, {"prompt": [1] * 65}), 400, "prompt", "context_length_exceeded"),
          "a prompt longer than the context")
    check(error_of(*s.json("POST", P, {"prompt": [1] * 60, "max_tokens": 5}), 400, "max_tokens",
                   "context_length_exceeded"), "max_tokens beyond the context")
    check(s.json("POST", P, {"prompt": [1] * 60, "max_tokens": 4})[0] == 200, "max_tokens that just fits")
    for raw in [b"{", b"[1,2]", b"", b"{\"prompt\": \"a\", \"prompt\": \"b\"}", b"\xff\xfe", b"null"]:
        check(error_of(*s.json("POST", P, raw=raw), 400), "malformed body %r" % raw)
    check(raw_status(s.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n{") == 413,
          "a body over 1 MiB: 413")
    check(error_of(*s.json("GET", "/v1/nothing"), 404), "unknown path")
    check(error_of(*s.json("GET", P), 405), "GET of completions")
    check(error_of(*s.json("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}), 400,
                   "messages"), "chat without a template")
    check(error_of(*s.json("GET", "/v1/models", key=None), 401), "no key")
    check(error_of(*s.json("GET", "/v1/models", key="s3cret-kez"), 401), "wrong key")
    check(error_of(*s.json("POST", P, {"prompt": "x"}, key="s3cret-key-longer"), 401), "a longer key")
    check(s.json("GET", "/health", key=None)[0] == 200, "/health needs no key")

    check_penalties(s, tiny, tmp)
    check_logprobs(s, tiny, tmp)
    check_logit_bias(s, tiny, tmp)
    check_prompt_cache(s)
    check_chunked_prefill(tiny, tmp)
    check_split_characters(tiny, tmp)
    check_no_tokenizer(tmp)

    # ---- concurrent greedy clients: each gets what it gets alone, and what vkgraph generate gives
    prompts = [[15496 + 7 * i, 995, 11 + i] for i in range(8)]
    alone = [s.json("POST", P, {"prompt": p, "max_tokens": 20, "temperature": 0})[1]["choices"][0]["text"]
             for p in prompts]
    got = [None] * 8

    def client(i):
        if i % 2:
            ev, _ = s.stream({"prompt": prompts[i], "max_tokens": 20, "temperature": 0})
            got[i] = "".join(e["choices"][0]["text"] for e in ev if e["choices"])
        else:
            got[i] = s.json("POST", P, {"prompt": prompts[i], "max_tokens": 20, "temperature": 0})[1]["choices"][0]["text"]
    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(got == alone, "8 concurrent clients get what each gets alone")
    cli = [s.json("POST", "/detokenize", {"tokens": generate_cli(tiny, p, 20)})[1]["content"] for p in prompts]
    check(got == cli, "8 concurrent clients' texts equal vkgraph generate's")

    # ---- a slow client: an unfinished request is closed after --timeout
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro")
    sock.settimeout(8)
    t0 = time.time()
    try:
        closed = sock.recv(100) == b""
    except (socket.timeout, ConnectionResetError):
        closed = False
    check(closed and time.time() - t0 < 6, "a stalled client is disconnected after the timeout")
    sock.close()

    st, metrics = s.request("GET", "/metrics")
    check(st == 200 and re.search(r"^vkgraph_generated_tokens_total [1-9]", metrics, re.M) and
          re.search(r"^vkgraph_time_to_first_token_seconds_count [1-9]", metrics, re.M) and
          re.search(r"^vkgraph_time_per_output_token_seconds_bucket\{le=\"\+Inf\"\} [1-9]", metrics, re.M) and
          "vkgraph_sequences_queued 0" in metrics and "\nvkgraph_device_lost 0\n" in metrics and
          re.search(r'^vkgraph_requests_total\{class="client_error"\} [1-9]', metrics, re.M), "metrics")
    rc, secs = s.stop(signal.SIGINT)
    check(rc == 0 and secs < 5, "SIGINT: exit 0 in %.1f s (rc %r)" % (secs, rc))

    # ---- one slot, no queue: busy is 503; a client that leaves frees its slot at once
    s = Server(long_ctx, "--parallel", "1", "--queue", "0", key=None)
    sock = socket.create_connection(("127.0.0.1", s.port))
    body = json.dumps({"prompt": [1, 2, 3], "max_tokens": 1000, "temperature": 0, "stream": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    # Its first event, not just the headers (sent as soon as the request is queued): from then
    # on it holds the slot, so "no sequence active" below means its slot was freed, not that it
    # was still waiting for the scheduler.
    first, t0 = b"", time.time()
    sock.settimeout(10)
    while b"data: " not in first and time.time() - t0 < 10:
        chunk = sock.recv(4096)
        if not chunk:
            break
        first += chunk
    check(b"200 OK" in first and b"data: " in first, "the long stream starts")
    st, busy = s.json("POST", P, {"prompt": [1], "max_tokens": 2})
    check(error_of(st, busy, 503, code="server_busy"), "a request beyond the slots and the queue: 503")
    sock.close()  # gone mid-stream
    t0 = time.time()
    while "vkgraph_sequences_active 0" not in s.request("GET", "/metrics")[1] and time.time() - t0 < 5:
        time.sleep(0.02)
    freed = time.time() - t0
    check(freed < 1.5, "a client gone mid-stream frees its slot (in %.2f s)" % freed)
    st, body = s.json("POST", P, {"prompt": [1, 2, 3], "max_tokens": 2})
    check(st == 200 and body["usage"]["prompt_tokens_details"]["cached_tokens"] == 2,
          "the freed slot serves the next request, and kept what the gone one ran: %r" % body)
    st, metrics = s.request("GET", "/metrics")
    m = re.search(r"^vkgraph_generated_tokens_total (\d+)", metrics, re.M)
    check(m and int(m.group(1)) < 1000, "the gone client's sequence stopped early (%s tokens)" % (m and m.group(1)))

    # SIGTERM while a stream runs: it ends with [DONE], the server exits 0
    out = {}

    def long_stream():
        out["events"] = s.stream({"prompt": [1], "max_tokens": 1000, "temperature": 0})
    t = threading.Thread(target=long_stream)
    t.start()
    time.sleep(0.3)
    rc, secs = s.stop(signal.SIGTERM)
    t.join(10)
    check(rc == 0 and secs < 5, "SIGTERM: exit 0 in %.1f s (rc %r)" % (secs, rc))
    check(out.get("events", (None, False))[1], "a stream cut by SIGTERM still ends with [DONE]")

    check_chat(tmp)
    check_device_timeout(tmp)

    print("server tests: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        for p in servers:
            if p.poll() is None:
                p.kill()
                p.wait()
    sys.exit(rc)
