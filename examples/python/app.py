#!/usr/bin/env python3
"""An HTTP API protected by limitkv, with the standard library and redis-py.

    GET /slide   RL.SLIDE per client: SLIDE_LIMIT requests per SLIDE_WINDOW seconds
    GET /policy  RL.CHECK of the named policy POLICY_NAME, which the app
                 defines at start-up with RL.POLICY SET (a sliding window of
                 POLICY_LIMIT per POLICY_WINDOW seconds)

Every answer carries the IETF RateLimit-Policy and RateLimit fields
(draft-ietf-httpapi-ratelimit-headers); a refusal is 429 with Retry-After.
The client is named by its X-Client-Id header, else by its address.
"""

import argparse
import json
import os
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
                self.answer(p, Decision(reply), {"ok": True, "endpoint": "slide", "client": client})
                return
            if path == "/policy":
                p = app.policy
                reply = app.redis.execute_command("RL.CHECK", p.name, f"example:policy:{client}")
                self.answer(p, Decision(reply), {"ok": True, "endpoint": "policy", "client": client})
                return
        except redis.RedisError as err:
            # limitkv unreachable or refusing: fail closed, say why.
            print(f"limitkv: {err}", file=sys.stderr, flush=True)
            self.send(503, {"error": "rate limiter unavailable"})
            return
        self.send(404, {"error": "not found"})

    def answer(self, policy, d, body):
        # RateLimit's t is when more quota comes: the retry time when
        # refused, else when the window is full again (an upper bound for a
        # sliding window, which the draft allows). q is the limit limitkv
        # decided with, so that a policy changed on the server shows at
        # once; w is the window this app knows.
        t = seconds(d.reset_after_ms) if d.allowed else seconds(d.retry_after_ms)
        headers = [
            ("RateLimit-Policy", f'"{policy.name}";q={d.limit};w={policy.window}'),
            ("RateLimit", f'"{policy.name}";r={max(d.remaining, 0)};t={t}'),
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
    rhost, _, rport = args.limitkv.rpartition(":")
    app.redis = redis.Redis(host=rhost or "127.0.0.1", port=int(rport),
                            password=os.environ.get("LIMITKV_PASSWORD") or None,
                            socket_timeout=5)
    try:
        # Defined once on the server: every process of the app (and any
        # other app) applying this name shares it, and an operator can
        # change it with RL.POLICY SET, or load it with --rl-policies,
        # without a deploy.
        p = app.policy
        app.redis.execute_command("RL.POLICY", "SET", p.name, "SLIDE", p.limit, p.window)
    except redis.RedisError as err:
        sys.exit(f"start-up failed: {err}")

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
    server.server_close()
    app.redis.close()


if __name__ == "__main__":
    main()
