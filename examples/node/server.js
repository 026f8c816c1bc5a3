'use strict';
// An HTTP API protected by limitkv, with node's http module and ioredis.
//
//   GET /slide   RL.SLIDE per client: SLIDE_LIMIT requests per SLIDE_WINDOW seconds
//   GET /policy  RL.CHECK of the named policy POLICY_NAME, which the app
//                defines at start-up with RL.POLICY SET (a sliding window of
//                POLICY_LIMIT per POLICY_WINDOW seconds)
//
// Every answer carries the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers); a refusal is 429 with Retry-After.
// The client is named by its X-Client-Id header, else by its address.

const http = require('http');
const Redis = require('ioredis');

// Flags win over the environment: --limitkv host:port, --port n.
function setting(flag, env, def) {
  const i = process.argv.indexOf(flag);
  if (i >= 0 && i + 1 < process.argv.length) return process.argv[i + 1];
  return process.env[env] || def;
}

// Windows are whole seconds here because RateLimit-Policy's w is in seconds;
// limitkv reads a bare integer window as seconds too.
function positiveInt(name, text) {
  if (!/^[1-9][0-9]*$/.test(text)) {
    console.error(`${name} must be a positive integer, got '${text}'`);
    process.exit(2);
  }
  return Number(text);
}

const addr = setting('--limitkv', 'LIMITKV_ADDR', '127.0.0.1:6379');
const port = Number(setting('--port', 'PORT', '8080'));
const host = process.env.HOST || '127.0.0.1';
const slide = {
  name: 'slide',
  limit: positiveInt('SLIDE_LIMIT', process.env.SLIDE_LIMIT || '10'),
  window: positiveInt('SLIDE_WINDOW', process.env.SLIDE_WINDOW || '60'),
};
const policy = {
  name: process.env.POLICY_NAME || 'example-api',
  limit: positiveInt('POLICY_LIMIT', process.env.POLICY_LIMIT || '5'),
  window: positiveInt('POLICY_WINDOW', process.env.POLICY_WINDOW || '60'),
};

const sep = addr.lastIndexOf(':');
const redis = new Redis({
  host: addr.slice(0, sep) || '127.0.0.1',
  port: Number(addr.slice(sep + 1)),
  password: process.env.LIMITKV_PASSWORD || undefined,
  // Fail a request fast when limitkv is down rather than queue it.
  maxRetriesPerRequest: 1,
});

// The five integers every RL command answers.
function decision(reply) {
  const [allowed, limit, remaining, retryAfterMs, resetAfterMs] = reply;
  return { allowed: allowed === 1, limit, remaining, retryAfterMs, resetAfterMs };
}

// Delay-seconds round up, so that a client waiting that long is let in.
const seconds = (ms) => Math.ceil(ms / 1000);

// RateLimit's t is when more quota comes: the retry time when refused, else
// when the window is full again (an upper bound for a sliding window, which
// the draft allows). q is the limit limitkv decided with, so that a policy
// changed on the server shows at once; w is the window this app knows.
function answer(res, policy, d, body) {
  const t = d.allowed ? seconds(d.resetAfterMs) : seconds(d.retryAfterMs);
  res.setHeader('RateLimit-Policy', `"${policy.name}";q=${d.limit};w=${policy.window}`);
  res.setHeader('RateLimit', `"${policy.name}";r=${Math.max(d.remaining, 0)};t=${t}`);
  if (!d.allowed) {
    res.setHeader('Retry-After', String(t));
    send(res, 429, { error: 'too many requests', retry_after_s: t });
    return;
  }
  send(res, 200, body);
}

function send(res, status, obj) {
  const text = JSON.stringify(obj) + '\n';
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
  });
  res.end(text);
}

function clientOf(req) {
  return req.headers['x-client-id'] || req.socket.remoteAddress;
}

async function handle(req, res) {
  const path = new URL(req.url, 'http://x').pathname;
  if (req.method !== 'GET') return send(res, 405, { error: 'method not allowed' });
  const client = clientOf(req);
  if (path === '/slide') {
    const reply = await redis.call('RL.SLIDE', `example:slide:${client}`, slide.limit, slide.window);
    return answer(res, slide, decision(reply), { ok: true, endpoint: 'slide', client });
  }
  if (path === '/policy') {
    const reply = await redis.call('RL.CHECK', policy.name, `example:policy:${client}`);
    return answer(res, policy, decision(reply), { ok: true, endpoint: 'policy', client });
  }
  send(res, 404, { error: 'not found' });
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((err) => {
    // limitkv unreachable or refusing: fail closed, say why.
    console.error(`limitkv: ${err.message}`);
    if (!res.headersSent) send(res, 503, { error: 'rate limiter unavailable' });
    else res.destroy();
  });
});

async function main() {
  // Defined once on the server: every process of the app (and any other
  // app) applying this name shares it, and an operator can change it with
  // RL.POLICY SET, or load it with --rl-policies, without a deploy.
  await redis.call('RL.POLICY', 'SET', policy.name, 'SLIDE', policy.limit, policy.window);
  server.listen(port, host, () => {
    const a = server.address();
    console.log(`ready: http://${a.address}:${a.port} (limitkv ${addr})`);
  });
}

function stop() {
  server.close();
  redis.quit().finally(() => process.exit(0));
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

main().catch((err) => {
  console.error(`start-up failed: ${err.message}`);
  process.exit(1);
});
