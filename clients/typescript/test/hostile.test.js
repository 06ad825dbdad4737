// The client against servers a real daemon never is: endless or oversized
// answers, broken streams, and the transport options (bearer token, TLS
// with a client certificate) the network listener takes.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { APIError, Client, DEFAULT_MAX_LINE_BYTES, MAX_CONCURRENT_TOOL_CALLS, MAX_ERROR_BYTES, ProtocolError } from '../index.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'kp-ts-hostile-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// Writes `chunk` until the client goes away; resolves with the bytes sent.
function endless(res, chunk) {
  return new Promise((resolve) => {
    let sent = 0;
    const pump = () => {
      while (!res.destroyed) {
        sent += chunk.length;
        if (!res.write(chunk)) return res.once('drain', pump);
      }
    };
    res.on('close', () => resolve(sent));
    pump();
  });
}

describe('a hostile server on the Unix socket', { timeout: 120_000 }, () => {
  const routes = new Map();
  const seen = [];
  let server;
  let c;
  before(async () => {
    server = http.createServer((req, res) => {
      seen.push(req.headers);
      routes.get(req.url)(req, res);
    });
    const socket = path.join(dir, 'hostile.sock');
    await new Promise((r) => server.listen(socket, r));
    c = new Client({ socket, token: 'tok-123' });
  });
  after(() => {
    c.close();
    server.closeAllConnections();
    server.close();
  });

  const chunk = Buffer.alloc(64 << 10, 'a');

  test('an endless JSON answer is a ProtocolError at the cap, not memory', async () => {
    let sent;
    routes.set('/v1/health', (req, res) => { res.writeHead(200); sent = endless(res, chunk); });
    await assert.rejects(c.health(), (e) => e instanceof ProtocolError && e.message.includes(`over ${DEFAULT_MAX_LINE_BYTES} bytes`));
    const n = await sent;
    assert.ok(n > DEFAULT_MAX_LINE_BYTES, `the server sent ${n} bytes`);
  });

  test('an endless error body is cut at MAX_ERROR_BYTES', async () => {
    routes.set('/v1/kernels', (req, res) => { res.writeHead(500); endless(res, chunk); });
    await assert.rejects(c.kernels(), (e) => e instanceof ProtocolError && e.message.includes(`over ${MAX_ERROR_BYTES} bytes`));
  });

  test('an endless stream line is a ProtocolError', async () => {
    routes.set('/v1/execute', (req, res) => { res.writeHead(200); res.write('{"event":"stdout","text":"a"}\n'); endless(res, chunk); });
    const got = [];
    await assert.rejects((async () => { for await (const ev of c.stream('x')) got.push(ev); })(),
      (e) => e instanceof ProtocolError && e.message.includes('a stream line is over'));
    assert.deepEqual(got, [{ event: 'stdout', text: 'a' }]);
  });

  test('Retry-After, the code and the message of an API error', async () => {
    routes.set('/v1/execute', (req, res) => {
      res.writeHead(503, { 'Retry-After': '7', 'Content-Type': 'application/json' });
      res.end('{"error":"every kernel is busy","code":"capacity"}');
    });
    await assert.rejects(c.execute('x'), (e) => e instanceof APIError && e.status === 503 && e.code === 'capacity'
      && e.retryAfter === 7 && e.apiMessage === 'every kernel is busy');
    routes.set('/v1/health', (req, res) => { res.writeHead(502); res.end('<html>bad gateway</html>'); });
    await assert.rejects(c.health(), (e) => e instanceof APIError && e.status === 502 && e.code === 'internal'
      && e.retryAfter === undefined && e.apiMessage.includes('bad gateway'));
  });

  test('streams: an error event throws, unknown events are skipped, a cut stream is a ProtocolError', async () => {
    const answer = (body) => (req, res) => { res.writeHead(200); res.end(body); };
    routes.set('/v1/execute', answer('{"event":"stdout","text":"a"}\n{"event":"error","error":"draining","code":"closed"}\n'));
    await assert.rejects(c.execute('x'), (e) => e instanceof APIError && e.code === 'closed' && e.apiMessage === 'draining');
    routes.set('/v1/execute', answer('{"event":"future","x":1}\n{"event":"result","result":{"status":"success"}}\n'));
    assert.deepEqual(await c.execute('x'), { status: 'success' });
    routes.set('/v1/execute', answer('{"event":"stdout","text":"a"}\n'));
    await assert.rejects(c.execute('x'), (e) => e instanceof ProtocolError && /without a result/.test(e.message));
    routes.set('/v1/execute', answer('{"event":"stdout","text":"a"}\n{"event":"res'));
    await assert.rejects(c.execute('x'), (e) => e instanceof ProtocolError && /inside a line/.test(e.message));
    routes.set('/v1/execute', answer('[1]\n'));
    await assert.rejects(c.execute('x'), (e) => e instanceof ProtocolError && /not an event/.test(e.message));
  });

  test('at most MAX_CONCURRENT_TOOL_CALLS tool calls are answered at once; the next is refused', async () => {
    const n = MAX_CONCURRENT_TOOL_CALLS + 1;
    const answers = new Map();
    let stream;
    let release;
    const held = new Promise((r) => { release = r; });
    routes.set('/v1/execute', (req, res) => {
      stream = res;
      res.writeHead(200);
      for (let i = 1; i <= n; i++) res.write(`{"event":"tool_call","call":{"id":"c-${i}","tool":"t","args":{}}}\n`);
    });
    for (let i = 1; i <= n; i++) {
      routes.set(`/v1/tool-calls/c-${i}`, (req, res) => {
        let body = '';
        req.on('data', (d) => { body += d; });
        req.on('end', () => {
          answers.set(i, JSON.parse(body));
          res.end(`{"answered":"c-${i}"}`);
          if (i === n) release(); // the refusal came while every handler still waited
          if (answers.size === n) stream.end('{"event":"result","result":{"status":"success"}}\n');
        });
      });
    }
    let running = 0;
    let most = 0;
    const r = await c.execute('x', {
      onToolCall: async () => {
        most = Math.max(most, ++running);
        await held;
        running--;
        return 'ok';
      },
    });
    assert.deepEqual(r, { status: 'success' });
    assert.equal(most, MAX_CONCURRENT_TOOL_CALLS);
    assert.deepEqual(answers.get(n), { error: `the client runs ${MAX_CONCURRENT_TOOL_CALLS} tool calls at once; retry later` });
    assert.deepEqual(answers.get(1), { result: 'ok' });
  });

  test('a request other than execute that gets no answer fails after timeoutMs', async () => {
    routes.set('/v1/kernels', () => {}); // never answers
    const slow = new Client({ socket: path.join(dir, 'hostile.sock'), timeoutMs: 100 });
    await assert.rejects(slow.kernels(), (e) => e instanceof ProtocolError && /no answer within 100 ms/.test(e.message));
    slow.close();
  });

  test('the bearer token is sent on every request', async () => {
    routes.set('/v1/health', (req, res) => res.end('{"status":"ok"}'));
    seen.length = 0;
    await c.health();
    assert.equal(seen[0].authorization, 'Bearer tok-123');
  });
});

describe('https with a CA, a client certificate and a bearer token', () => {
  const haveOpenssl = (() => { try { execFileSync('openssl', ['version']); return true; } catch { return false; } })();
  let server;
  let port;
  let pem;
  const seen = [];
  before(async () => {
    if (!haveOpenssl) return;
    // One self-signed certificate serves as the CA, the server's and the client's.
    const key = path.join(dir, 'key.pem');
    const crt = path.join(dir, 'crt.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', key, '-out', crt, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    pem = { key: readFileSync(key), cert: readFileSync(crt) };
    server = https.createServer({ ...pem, ca: pem.cert, requestCert: true, rejectUnauthorized: true }, (req, res) => {
      seen.push({ auth: req.headers.authorization, peer: req.socket.getPeerCertificate().subject?.CN });
      res.end('{"status":"ok"}');
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    port = server.address().port;
  });
  after(() => server?.close());

  test('the client proves itself and checks the server', { skip: !haveOpenssl && 'no openssl to make a certificate' }, async () => {
    const c = new Client({ url: `https://127.0.0.1:${port}`, token: 'tok-456', ca: pem.cert, cert: pem.cert, key: pem.key });
    assert.deepEqual(await c.health(), { status: 'ok' });
    assert.deepEqual(seen, [{ auth: 'Bearer tok-456', peer: '127.0.0.1' }]);
    c.close();
    // Without the CA the server is not trusted, and nothing is sent.
    const untrusted = new Client({ url: `https://127.0.0.1:${port}`, token: 'tok-456' });
    await assert.rejects(untrusted.health(), (e) => /self.signed|certificate/i.test(e.message));
    untrusted.close();
    assert.equal(seen.length, 1);
  });

  test('a token over plain http is refused', () => {
    assert.throws(() => new Client({ url: 'http://127.0.0.1:1', token: 't' }), /over plain http/);
    assert.throws(() => new Client({ url: 'ftp://x' }), /only https/);
  });
});
