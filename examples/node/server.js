'use strict';
// An HTTP API protected by limitkv, with node's http module and ioredis.
//
//   GET /slide   RL.SLIDE per client: SLIDE_LIMIT requests per SLIDE_WINDOW seconds
//   GET /policy  RL.CHECK of the named policy POLICY_NAME. The policy lives
//                in limitkv, where an operator may change it: the app reads
//                it (RL.POLICY GET, again every POLICY_REFRESH seconds) and
//                creates it only if the server has none (a sliding window of
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
  refresh: positiveInt('POLICY_REFRESH', process.env.POLICY_REFRESH || '10'),
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
// the draft allows). q is the limit limitkv decided with; w is the window of
// the rule with that limit, in whole seconds, left out when there is none.
function answer(res, name, d, window, body) {
  const t = d.allowed ? seconds(d.resetAfterMs) : seconds(d.retryAfterMs);
  const w = window === null ? '' : `;w=${window}`;
  res.setHeader('RateLimit-Policy', `"${name}";q=${d.limit}${w}`);
  res.setHeader('RateLimit', `"${name}";r=${Math.max(d.remaining, 0)};t=${t}`);
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

// The policy as limitkv defines it, which is what RL.CHECK enforces: the
// server's, not this app's settings, since an operator may have changed it.
let enforced = null;

// RL.POLICY GET's words: the type, then for FIXED and SLIDE the limit
// window pairs, then options; a GCRA policy decides with the limit
// max_burst+1 and has no window.
function readPolicy(words) {
  const [type, ...args] = words;
  const rules = [];
  if (type === 'FIXED' || type === 'SLIDE') {
    for (let i = 0; i + 1 < args.length && /^[0-9]+$/.test(args[i]); i += 2) {
      rules.push({ limit: Number(args[i]), window: wholeSeconds(args[i + 1]) });
    }
  } else if (type === 'GCRA') {
    rules.push({ limit: Number(args[0]) + 1, window: null });
  }
  return { text: words.join(' '), rules };
}

// A window as RL.POLICY GET writes it (250ms, 10s, 1m, 1h, 1d) in seconds,
// or null when it is not whole seconds, which RateLimit-Policy's w must be.
function wholeSeconds(text) {
  const m = /^([0-9]+)(ms|s|m|h|d)$/.exec(text);
  if (!m) return null;
  const ms = Number(m[1]) * { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000 }[m[2]];
  return ms % 1000 === 0 ? ms / 1000 : null;
}

// RL.POLICY SET only if the name is free, in one script: a script runs
// alone on the server, so neither another instance of this app starting at
// the same time nor an operator can define the policy between the check and
// the SET, and theirs is never overwritten. Answers [created, definition].
const CREATE_IF_ABSENT = `
local got = redis.pcall('RL.POLICY', 'GET', ARGV[1])
if not got.err then return {0, got} end
if not string.find(got.err, 'no such policy', 1, true) then return got end
redis.call('RL.POLICY', 'SET', unpack(ARGV))
return {1, redis.call('RL.POLICY', 'GET', ARGV[1])}`;

// At start-up: the server's policy if it has one (a plain read, which a
// user without the right to define policies may make), else this app's.
async function adoptPolicy() {
  let words;
  let created = 0;
  try {
    words = await redis.call('RL.POLICY', 'GET', policy.name);
  } catch (err) {
    if (!/no such policy/.test(err.message)) throw err;
    [created, words] = await redis.eval(CREATE_IF_ABSENT, 0,
      policy.name, 'SLIDE', policy.limit, policy.window);
  }
  enforced = readPolicy(words);
  console.log(`policy ${policy.name}: ${enforced.text} (${created ? 'created' : 'defined on the server'})`);
}

// Reads the policy again; concurrent calls share one RL.POLICY GET. On an
// error the last definition read stays.
let refreshing = null;
function refreshPolicy() {
  if (!refreshing) {
    refreshing = redis.call('RL.POLICY', 'GET', policy.name).then((words) => {
      const now = readPolicy(words);
      if (now.text !== enforced.text) console.log(`policy ${policy.name}: now ${now.text}`);
      enforced = now;
    }, (err) => {
      console.error(`policy ${policy.name}: ${err.message}; still ${enforced.text}`);
    }).finally(() => {
      refreshing = null;
    });
  }
  return refreshing;
}

// The window of the policy's rule that decided, found by its limit. A limit
// no rule has means the policy changed since it was read: read it now
// rather than advertise another definition's window. A change of window
// alone shows at the next periodic read.
async function policyWindow(limit) {
  const find = () => enforced.rules.find((r) => r.limit === limit);
  let rule = find();
  if (!rule) {
    await refreshPolicy();
    rule = find();
  }
  return rule ? rule.window : null;
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
    return answer(res, slide.name, decision(reply), slide.window, { ok: true, endpoint: 'slide', client });
  }
  if (path === '/policy') {
    const d = decision(await redis.call('RL.CHECK', policy.name, `example:policy:${client}`));
    return answer(res, policy.name, d, await policyWindow(d.limit), { ok: true, endpoint: 'policy', client });
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

let refresher = null;

async function main() {
  // Defined once on the server: every process of the app (and any other
  // app) applying this name shares it, and an operator can change it with
  // RL.POLICY SET, or load it with --rl-policies, without a deploy; so the
  // app never redefines it, and reads it again now and then.
  await adoptPolicy();
  refresher = setInterval(refreshPolicy, policy.refresh * 1000);
  refresher.unref();
  server.listen(port, host, () => {
    const a = server.address();
    console.log(`ready: http://${a.address}:${a.port} (limitkv ${addr})`);
  });
}

function stop() {
  clearInterval(refresher);
  server.close();
  redis.quit().finally(() => process.exit(0));
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

main().catch((err) => {
  console.error(`start-up failed: ${err.message}`);
  process.exit(1);
});
