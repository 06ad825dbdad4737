// The client on a real daemon's network listener over real TLS on
// loopback (a CA, the node's certificate and a client certificate made
// with openssl; tokens scoped to owners): the same calls as on the
// socket, a bearer token or a client certificate, and the refusals.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { APIError, Client, DaemonUnavailable } from '../index.js';
import { skipReason, startDaemon } from './daemon.js';

const haveOpenssl = (() => { try { execFileSync('openssl', ['version']); return true; } catch { return false; } })();
const skip = skipReason() || (!haveOpenssl && 'no openssl to make the certificates');
const TOKENS = { alice: 'kp_ts_alice_0123456789abcdef', admin: 'kp_ts_admin_0123456789abcdef' };
let cannotRun = '';
let daemon;
let url;
let pki;
const dtest = (name, fn) => test(name, (t) => (cannotRun ? t.skip(cannotRun) : fn(t)));

// A CA, the node's certificate (127.0.0.1) and a client certificate (CN ts-gateway).
function makePKI(dir) {
  const p = Object.fromEntries(['ca.pem', 'ca.key', 'node.pem', 'node.key', 'client.pem', 'client.key'].map((k) => [k, path.join(dir, k)]));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  const run = (...args) => execFileSync('openssl', args, { stdio: 'ignore' });
  run('req', '-x509', ...ec, '-keyout', p['ca.key'], '-out', p['ca.pem'], '-days', '1', '-subj', '/CN=kp-ts-ca');
  for (const [name, cn, ext] of [['node', 'node', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth'],
    ['client', 'ts-gateway', 'extendedKeyUsage=clientAuth']]) {
    const csr = path.join(dir, `${name}.csr`);
    const extf = path.join(dir, `${name}.ext`);
    writeFileSync(extf, `${ext}\n`);
    run('req', ...ec, '-keyout', p[`${name}.key`], '-out', csr, '-subj', `/CN=${cn}`);
    run('x509', '-req', '-in', csr, '-CA', p['ca.pem'], '-CAkey', p['ca.key'], '-CAcreateserial',
      '-out', p[`${name}.pem`], '-days', '1', '-extfile', extf);
  }
  return p;
}

const sha = (s) => createHash('sha256').update(s).digest('hex');

describe('the network listener of a real daemon', { skip: skip || false, timeout: 600_000 }, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kp-ts-pki-'));
  before(async () => {
    pki = makePKI(dir);
    const config = `listen = "127.0.0.1:0"\ntls_cert = "${pki['node.pem']}"\ntls_key = "${pki['node.key']}"\n` +
      `tls_client_ca = "${pki['ca.pem']}"\n` +
      `token "ts-alice" {\n  sha256 = "${sha(TOKENS.alice)}"\n  owners = ["ts-net-alice"]\n}\n` +
      `token "ts-admin" {\n  sha256 = "${sha(TOKENS.admin)}"\n  admin = true\n}\n` +
      'client_cert "ts-gateway" {\n  owners = ["ts-net-gw"]\n}\n';
    try {
      daemon = await startDaemon({ config });
    } catch (e) {
      if (!e.cannotRun) throw e;
      cannotRun = e.message;
      return;
    }
    const m = daemon.logText().match(/serving on the network: listen=(127\.0\.0\.1:\d+)/);
    assert.ok(m, `the daemon logged no network address:\n${daemon.log()}`);
    url = `https://${m[1]}`;
  });
  after(async () => {
    await daemon?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  dtest("a token's owner: cells, a stream, files and readiness; another owner is 403", async () => {
    const c = new Client({ url, token: TOKENS.alice, ca: readFileSync(pki['ca.pem']), timeoutMs: 30_000 });
    try {
      const r = await c.execute('x = 41\nprint(x + 1)', { owner: 'ts-net-alice' });
      assert.equal(r.output, '42\n');
      const kinds = [];
      for await (const ev of c.stream('print(x)', { owner: 'ts-net-alice' })) kinds.push(ev.event === 'stdout' ? ev.text : ev.event);
      assert.deepEqual(kinds, ['41\n', 'result']);
      assert.deepEqual((await c.kernels()).kernels.map((k) => k.owner), ['ts-net-alice']);
      const target = { owner: 'ts-net-alice' };
      assert.equal((await c.uploadFile('net.txt', 'over tls', target)).bytes, 8);
      assert.equal((await c.downloadFile('net.txt', target)).toString(), 'over tls');
      await assert.rejects(c.execute('1', { owner: 'someone-else' }), (e) => e instanceof APIError && e.status === 403 && e.code === 'forbidden');
      await assert.rejects(c.listFiles('', { owner: 'someone-else' }), (e) => e instanceof APIError && e.code === 'forbidden');
      await assert.rejects(c.settings(), (e) => e instanceof APIError && e.code === 'forbidden');
      assert.equal(await c.ready(), 'ready');
    } finally {
      c.close();
    }
  });

  dtest('a client certificate acts for its owners only', async () => {
    const c = new Client({ url, ca: readFileSync(pki['ca.pem']), cert: readFileSync(pki['client.pem']), key: readFileSync(pki['client.key']) });
    try {
      assert.equal((await c.execute("print('gw')", { owner: 'ts-net-gw' })).output, 'gw\n');
      await assert.rejects(c.execute('1', { owner: 'ts-net-alice' }), (e) => e instanceof APIError && e.code === 'forbidden');
    } finally {
      c.close();
    }
  });

  dtest('the admin token reaches settings and metrics', async () => {
    const c = new Client({ url, token: TOKENS.admin, ca: readFileSync(pki['ca.pem']) });
    try {
      assert.equal((await c.settings()).socket, daemon.socket);
      assert.match(await c.metrics(), /^# (HELP|TYPE) kernpool_/m);
    } finally {
      c.close();
    }
  });

  dtest('no credentials or a wrong token: 401; an unknown CA: no request is sent', async () => {
    const ca = readFileSync(pki['ca.pem']);
    for (const c of [new Client({ url, ca }), new Client({ url, ca, token: 'kp_wrong' })]) {
      await assert.rejects(c.kernels(), (e) => e instanceof APIError && e.status === 401 && e.code === 'unauthorized');
      c.close();
    }
    const untrusted = new Client({ url, token: TOKENS.admin });
    await assert.rejects(untrusted.health(), (e) => e instanceof DaemonUnavailable || /certificate/i.test(e.message));
    untrusted.close();
  });
});
