#!/usr/bin/env python3
"""Two `vkgraph serve` replicas behind nginx, on 127.0.0.1, with the nginx site configuration
docs/DEPLOY.md gives (read from the document, so that what it shows is what is tested).

Usage: deploy_nginx_test.py VKGRAPH.  Debian's nginx (tools/setup-debian.sh --test) runs as a plain
process with its pid, logs and temporary files in a temporary folder.  16 requests go through
nginx at once, half streamed: each must be answered 200 with the text a replica gives alone, and
each replica's /metrics must count its share (together: every prompt and generated token).  Then
one replica stops, and requests still succeed on the other.  Exit 77 (skipped) without nginx."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(REPO, "tools"))
import serve_client  # noqa: E402  (tools/serve_client.py)
from serve_client import check, failures  # noqa: E402

VKG = sys.argv[1]
PROMPTS = [[15496 + 7 * i, 995, 11 + i] for i in range(4)]
MAX_TOKENS = 12


def documented_site(replicas, port):
    """The nginx site block of docs/DEPLOY.md (the ```nginx fence after the line that names this
    test), its upstream servers and listen port replaced by the loopback ones here."""
    doc = open(os.path.join(REPO, "docs", "DEPLOY.md")).read()
    m = re.search(r"tests/deploy_nginx_test\.py.*?```nginx\n(.*?)```", doc, re.S)
    assert m, "docs/DEPLOY.md has no nginx block after the line naming tests/deploy_nginx_test.py"
    site = m.group(1)
    addresses = iter("127.0.0.1:%d" % r for r in replicas)
    site, n = re.subn(r"(?m)^(\s*server )\S+:\d+", lambda s: s.group(1) + next(addresses), site)
    assert n == len(replicas), "the documented upstream names %d servers, not %d" % (n, len(replicas))
    site, n = re.subn(r"(?m)^(\s*listen )\d+;", r"\g<1>127.0.0.1:%d;" % port, site)
    assert n == 1, "the documented server block has no 'listen PORT;'"
    return site


def nginx_conf(tmp, site):
    """A main configuration around the site that keeps every file nginx writes in tmp."""
    return ("daemon off;\nworker_processes 1;\npid %(t)s/nginx.pid;\nerror_log %(t)s/error.log info;\n"
            "events { worker_connections 256; }\n"
            "http {\n    access_log %(t)s/access.log;\n    client_body_temp_path %(t)s/body;\n"
            "    proxy_temp_path %(t)s/proxy;\n    fastcgi_temp_path %(t)s/fastcgi;\n"
            "    uwsgi_temp_path %(t)s/uwsgi;\n    scgi_temp_path %(t)s/scgi;\n%(site)s}\n") % {"t": tmp, "site": site}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(nginx, tmp, replicas, procs):
    """nginx on a free port, answering /health (through a replica) when this returns: the port."""
    for _ in range(3):  # another program may take the port between free_port() and nginx's bind
        port = free_port()
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(tmp, documented_site(replicas, port)))
        proc = subprocess.Popen([nginx, "-p", tmp, "-c", conf, "-e", os.path.join(tmp, "error.log")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        deadline = time.time() + 20
        while proc.poll() is None and time.time() < deadline:
            if serve_client.request("127.0.0.1", port, "GET", "/health", timeout=5)[0] == 200:
                return port
            time.sleep(0.05)
        proc.kill()
        proc.wait()
    log = open(os.path.join(tmp, "error.log")).read() if os.path.exists(os.path.join(tmp, "error.log")) else ""
    raise RuntimeError("nginx did not start:\n" + log)


def completion(port, i, streamed):
    """(status, text, complete) of prompt i's greedy completion through the given port."""
    body = {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": MAX_TOKENS, "temperature": 0,
            "cache_prompt": False}  # each answer a cold run, as the one alone it is held to
    if streamed:
        status, events, done = serve_client.stream("127.0.0.1", port, body, timeout=120)
        return status, serve_client.stream_text(events) if status == 200 else events, done
    status, text = serve_client.request("127.0.0.1", port, "POST", "/v1/completions", body, timeout=120)
    if status != 200:
        return status, text, False
    return status, json.loads(text)["choices"][0]["text"], True


def counters(port):
    _, text = serve_client.request("127.0.0.1", port, "GET", "/metrics")
    return {k: serve_client.metric(text, k) for k in
            ["vkgraph_prompt_tokens_total", "vkgraph_generated_tokens_total",
             "vkgraph_time_to_first_token_seconds_count", "vkgraph_sequences_active", "vkgraph_sequences_queued"]}


def main(tmp, replicas, procs):
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    if not nginx:
        print("deploy_nginx: skipped: nginx is not installed (tools/setup-debian.sh --test installs it)")
        return 77
    if os.geteuid() == 0:
        os.chmod(tmp, 0o755)  # nginx's workers run as nobody when it starts as root
    model = os.path.join(tmp, "tiny")
    subprocess.run([VKG, "gpt2-random", model], check=True, capture_output=True)
    for _ in range(2):
        replicas.append(serve_client.ServeProcess(VKG, model, "--parallel", "2", "--device", "cpu", "--threads", "1"))
    ports = [r.port for r in replicas]
    port = start_nginx(nginx, tmp, ports, procs)

    # What each prompt gives alone, and how many tokens, from one replica; the other has the same
    # weights.  (A greedy text may end before MAX_TOKENS at the end-of-text token.)
    alone, generated = [], []
    for p in PROMPTS:
        status, text = serve_client.request("127.0.0.1", ports[0], "POST", "/v1/completions",
                                            {"prompt": p, "max_tokens": MAX_TOKENS, "temperature": 0,
                                             "cache_prompt": False})
        assert status == 200, (status, text)
        alone.append(json.loads(text)["choices"][0]["text"])
        generated.append(json.loads(text)["usage"]["completion_tokens"])
    before = [counters(p) for p in ports]
    results = [None] * 16

    def client(i):
        results[i] = completion(port, i, streamed=i % 2 == 1)
    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (status, text, complete) in enumerate(results):
        check(status == 200 and complete, "request %d through nginx: status %d, complete %s (%r)" %
              (i, status, complete, text))
        check(text == alone[i % len(PROMPTS)], "request %d's text %r equals the replica's alone %r" %
              (i, text, alone[i % len(PROMPTS)]))

    # Each replica's /metrics: its share of the 16 completions, all of them between the two.
    after = [counters(p) for p in ports]
    delta = [{k: a[k] - b[k] for k in a} for a, b in zip(after, before)]
    for r, d in enumerate(delta):
        check(d["vkgraph_time_to_first_token_seconds_count"] > 0 and d["vkgraph_generated_tokens_total"] > 0,
              "replica %d served requests through nginx: %r" % (r, d))
        check(after[r]["vkgraph_sequences_active"] == 0 and after[r]["vkgraph_sequences_queued"] == 0,
              "replica %d is idle after the requests: %r" % (r, after[r]))
    check(sum(d["vkgraph_time_to_first_token_seconds_count"] for d in delta) == 16, "16 completions in all: %r" % delta)
    check(sum(d["vkgraph_prompt_tokens_total"] for d in delta) == 16 * len(PROMPTS[0]),
          "every prompt token counted once: %r" % delta)
    check(sum(d["vkgraph_generated_tokens_total"] for d in delta) == 4 * sum(generated),
          "every generated token counted once: %r" % delta)

    # A replica gone: nginx tries the other (proxy_next_upstream), and no request fails.
    check(replicas[1].stop() == 0, "a replica stops with exit status 0")
    for i in range(4):
        status, text, complete = completion(port, i, streamed=i % 2 == 1)
        check(status == 200 and complete and text == alone[i], "request %d with one replica down: %d %r" %
              (i, status, text))
    print("deploy_nginx: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    replicas, procs, rc = [], [], 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # ctest's timeout: clean up as below
    tmp = tempfile.mkdtemp(prefix="vkg-deploy-")
    try:
        rc = main(tmp, replicas, procs)
    finally:
        # Whatever happened, no server or nginx outlives the test.
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait()
        for r in replicas:
            r.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(rc)
