#!/usr/bin/env python3
"""An HTTP API protected by limitkv, with the standard library and redis-py.

    GET /slide   RL.SLIDE per client: SLIDE_LIMIT requests per SLIDE_WINDOW seconds
    GET /policy  RL.CHECK of the named policy POLICY_NAME. The policy lives
                 in limitkv, where an operator may change it: the app reads
                 it (RL.POLICY GET, again every POLICY_REFRESH seconds) and
                 creates it only if the server has none (a sliding window of
                 POLICY_LIMIT per POLICY_WINDOW seconds)

Every answer carries the IETF RateLimit-Policy and RateLimit fields
(draft-ietf-httpapi-ratelimit-headers); a refusal is 429 with Retry-After.
The client is named by its X-Client-Id header, else by its address.
"""

import argparse
import json
import os
import re
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import redis


def positive_int(name, text):
    # Windows are whole seconds here because RateLimit-Policy's w is in
    # seconds; limitkv reads a bare integer window as seconds too.
    if not (text.isascii() and text.isdigit()) or text.startswith("0"):
        sys.exit(f"{name} must be a positive integer, got '{text}'")
    return int(text)


class Policy:
    def __init__(self, name, limit, window):
        self.name, self.limit, self.window = name, limit, window


class Decision:
    """The five integers every RL command answers."""

    def __init__(self, reply):
        allowed, self.limit, self.remaining, self.retry_after_ms, self.reset_after_ms = reply
        self.allowed = allowed == 1


def seconds(ms):
    # Delay-seconds round up, so that a client waiting that long is let in.
    return -(-ms // 1000)


def whole_seconds(text):
    """A window as RL.POLICY GET writes it (250ms, 10s, 1m, 1h, 1d) in
    seconds, or None when it is not whole seconds, which RateLimit-Policy's
    w must be."""
    m = re.fullmatch(r"([0-9]+)(ms|s|m|h|d)", text)
    if not m:
        return None
    ms = int(m[1]) * {"ms": 1, "s": 1000, "m": 60000, "h": 3600000, "d": 86400000}[m[2]]
    return ms // 1000 if ms % 1000 == 0 else None


class Definition:
    """RL.POLICY GET's words: the type, then for FIXED and SLIDE the limit
    window pairs, then options; a GCRA policy decides with the limit
    max_burst+1 and has no window. rules maps each limit to its window."""

    def __init__(self, words):
        words = [w.decode() if isinstance(w, bytes) else w for w in words]
        self.text = " ".join(words)
        self.rules = {}
        kind, args = words[0], words[1:]
        if kind in ("FIXED", "SLIDE"):
            i = 0
            while i + 1 < len(args) and args[i].isascii() and args[i].isdigit():
                self.rules.setdefault(int(args[i]), whole_seconds(args[i + 1]))
                i += 2
        elif kind == "GCRA":
            self.rules[int(args[0]) + 1] = None


# RL.POLICY SET only if the name is free, in one script: a script runs
# alone on the server, so neither another instance of this app starting at
# the same time nor an operator can define the policy between the check and
# the SET, and theirs is never overwritten. Answers [created, definition].
CREATE_IF_ABSENT = """
local got = redis.pcall('RL.POLICY', 'GET', ARGV[1])
if not got.err then return {0, got} end
if not string.find(got.err, 'no such policy', 1, true) then return got end
redis.call('RL.POLICY', 'SET', unpack(ARGV))
return {1, redis.call('RL.POLICY', 'GET', ARGV[1])}"""


class ServerPolicy:
    """The policy as limitkv defines it, which is what RL.CHECK enforces:
    the server's, not this app's settings, since an operator may have
    changed it."""

    def __init__(self, r, policy):
        self.redis, self.policy = r, policy
        self.enforced = None
        self.reads = 0  # how many times it was read, so that threads share a read
        self.lock = threading.Lock()

    def adopt(self):
        """At start-up: the server's policy if it has one (a plain read,
        which a user without the right to define policies may make), else
        this app's."""
        p, created = self.policy, 0
        try:
            words = self.redis.execute_command("RL.POLICY", "GET", p.name)
        except redis.ResponseError as err:
            if "no such policy" not in str(err):
                raise
            created, words = self.redis.eval(CREATE_IF_ABSENT, 0, p.name, "SLIDE", p.limit, p.window)
        self.enforced = Definition(words)
        how = "created" if created else "defined on the server"
        print(f"policy {p.name}: {self.enforced.text} ({how})", flush=True)

    def refresh(self):
        """Reads the policy again, unless another thread did while this one
        waited. On an error the last definition read stays."""
        seen = self.reads
        with self.lock:
            if self.reads != seen:
                return
            try:
                now = Definition(self.redis.execute_command("RL.POLICY", "GET", self.policy.name))
            except redis.RedisError as err:
                print(f"policy {self.policy.name}: {err}; still {self.enforced.text}", file=sys.stderr, flush=True)
                return
            if now.text != self.enforced.text:
                print(f"policy {self.policy.name}: now {now.text}", flush=True)
            self.enforced, self.reads = now, self.reads + 1

    def window(self, limit):
        """The window of the rule that decided, found by its limit. A limit
        no rule has means the policy changed since it was read: read it now
        rather than advertise another definition's window. A change of
        window alone shows at the next periodic read."""
        if limit not in self.enforced.rules:
            self.refresh()
        return self.enforced.rules.get(limit)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "limitkv-example"

    def do_GET(self):
        path = urlsplit(self.path).path
        client = self.headers.get("X-Client-Id") or self.client_address[0]
        app = self.server.app
        try:
            if path == "/slide":
                p = app.slide
                reply = app.redis.execute_command(
                    "RL.SLIDE", f"example:slide:{client}", p.limit, p.window)
                self.answer(p.name, Decision(reply), p.window, {"ok": True, "endpoint": "slide", "client": client})
                return
            if path == "/policy":
                name = app.policy.name
                d = Decision(app.redis.execute_command("RL.CHECK", name, f"example:policy:{client}"))
                self.answer(name, d, app.server_policy.window(d.limit),
                            {"ok": True, "endpoint": "policy", "client": client})
                return
        except redis.RedisError as err:
            # limitkv unreachable or refusing: fail closed, say why.
            print(f"limitkv: {err}", file=sys.stderr, flush=True)
            self.send(503, {"error": "rate limiter unavailable"})
            return
        self.send(404, {"error": "not found"})

    def answer(self, name, d, window, body):
        # RateLimit's t is when more quota comes: the retry time when
        # refused, else when the window is full again (an upper bound for a
        # sliding window, which the draft allows). q is the limit limitkv
        # decided with; w is the window of the rule with that limit, in
        # whole seconds, left out when there is none.
        t = seconds(d.reset_after_ms) if d.allowed else seconds(d.retry_after_ms)
        w = "" if window is None else f";w={window}"
        headers = [
            ("RateLimit-Policy", f'"{name}";q={d.limit}{w}'),
            ("RateLimit", f'"{name}";r={max(d.remaining, 0)};t={t}'),
        ]
        if not d.allowed:
            headers.append(("Retry-After", str(t)))
            self.send(429, {"error": "too many requests", "retry_after_s": t}, headers)
            return
        self.send(200, body, headers)

    def send(self, status, obj, headers=()):
        data = (json.dumps(obj) + "\n").encode()
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        pass  # one line per request would drown the ready line in tests


class Server(ThreadingHTTPServer):
    # On SIGTERM, stop without waiting for idle keep-alive connections.
    daemon_threads = True
    block_on_close = False
    # socketserver's default backlog of 5 makes a burst of clients wait for
    # SYN retries.
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limitkv", default=os.environ.get("LIMITKV_ADDR", "127.0.0.1:6379"),
                    help="limitkv address host:port (env LIMITKV_ADDR)")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8080")),
                    help="HTTP port, 0 for any free one (env PORT)")
    args = ap.parse_args()
    host = os.environ.get("HOST", "127.0.0.1")

    class App:
        pass

    app = App()
    app.slide = Policy("slide",
                       positive_int("SLIDE_LIMIT", os.environ.get("SLIDE_LIMIT", "10")),
                       positive_int("SLIDE_WINDOW", os.environ.get("SLIDE_WINDOW", "60")))
    app.policy = Policy(os.environ.get("POLICY_NAME", "example-api"),
                        positive_int("POLICY_LIMIT", os.environ.get("POLICY_LIMIT", "5")),
                        positive_int("POLICY_WINDOW", os.environ.get("POLICY_WINDOW", "60")))
    refresh = positive_int("POLICY_REFRESH", os.environ.get("POLICY_REFRESH", "10"))
    rhost, _, rport = args.limitkv.rpartition(":")
    app.redis = redis.Redis(host=rhost or "127.0.0.1", port=int(rport),
                            password=os.environ.get("LIMITKV_PASSWORD") or None,
                            socket_timeout=5)
    app.server_policy = ServerPolicy(app.redis, app.policy)
    try:
        # Defined once on the server: every process of the app (and any
        # other app) applying this name shares it, and an operator can
        # change it with RL.POLICY SET, or load it with --rl-policies,
        # without a deploy; so the app never redefines it, and reads it
        # again now and then.
        app.server_policy.adopt()
    except redis.RedisError as err:
        sys.exit(f"start-up failed: {err}")
    stopping = threading.Event()

    def refresher():
        while not stopping.wait(refresh):
            app.server_policy.refresh()

    threading.Thread(target=refresher, daemon=True).start()

    server = Server((host, args.port), Handler)
    server.app = app

    def stop(signum, frame):
        # shutdown() waits for serve_forever, which runs in this thread.
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    a = server.server_address
    print(f"ready: http://{a[0]}:{a[1]} (limitkv {args.limitkv})", flush=True)
    server.serve_forever()
    stopping.set()
    server.server_close()
    app.redis.close()


if __name__ == "__main__":
    main()
