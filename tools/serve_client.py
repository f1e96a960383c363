"""A `vkgraph serve` process and a streaming client for it, for the programs that drive servers:
bench/serve-load, bench/serve-cache and the server's tests (which also share check()).  Python's
standard library only (http.client), so that they run wherever python3 does.

Import it with the tools folder on sys.path:
    sys.path.insert(0, os.path.join(REPO, "tools")); import serve_client
"""
import http.client
import json
import re
import subprocess
import threading
import time

failures = []  # what check() found false, for the test's summary and exit status


def check(cond, what):
    """A test's check: a false one is printed and kept in failures, and the test goes on, so that
    one run reports every failure."""
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


class ServeProcess:
    """`vkgraph serve -m MODEL --port 0 ARGS...` on 127.0.0.1, ready (GET /health is 200) when the
    constructor returns.  Its stderr is kept in .log; .port is the port it took.  stop() ends it;
    the caller stops it also on its own failures (a `finally`), so that no server outlives it."""

    def __init__(self, vkgraph, model, *args, ready_timeout=120):
        cmd = [vkgraph, "serve", "-m", model, "--port", "0"] + [str(a) for a in args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = [self.proc.stderr.readline()]
        m = re.search(r"http://127\.0\.0\.1:(\d+)", self.log[0])
        if not m:
            self.stop()
            raise RuntimeError("vkgraph serve did not start: " + "".join(self.log).strip())
        self.port = int(m.group(1))
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.time() + ready_timeout
        while request("127.0.0.1", self.port, "GET", "/health")[0] != 200:
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise RuntimeError("vkgraph serve did not become ready: " + "".join(self.log).strip())
            time.sleep(0.05)

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self):
        """SIGTERM, then SIGKILL after 10 s; the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def request(host, port, method, path, body=None, timeout=60):
    """(status, body text) of one request; status 0 when the connection failed."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        data = json.dumps(body) if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = conn.getresponse()
        return r.status, r.read().decode()
    except OSError:
        return 0, ""
    finally:
        conn.close()


def stream(host, port, body, path="/v1/completions", timeout=600):
    """Posts body with "stream": true and reads the server-sent events as they come.  Returns
    (status, events, done): events a list of (seconds since the request was sent, parsed JSON
    payload) in arrival order, done whether `data: [DONE]` ended the stream.  A status other
    than 200 returns the error body as the one event's payload."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        t0 = time.perf_counter()
        conn.request("POST", path, body=json.dumps(dict(body, stream=True)),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            return r.status, [(time.perf_counter() - t0, r.read().decode())], False
        events, done = [], False
        # Each event is a line "data: ..." and a blank line; ": ..." lines are keep-alive comments.
        for line in r:
            line = line.decode().rstrip("\r\n")
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            events.append((time.perf_counter() - t0, json.loads(line[6:])))
        return r.status, events, done
    finally:
        conn.close()


def stream_text(events):
    """The completion's text: the streamed chunks' texts joined."""
    return "".join(e["choices"][0]["text"] for _, e in events if e.get("choices"))


def metric(text, name):
    """The value of an unlabelled sample in Prometheus text, or None."""
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None
