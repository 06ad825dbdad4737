// Explicit sessions and per-call env values against a real daemon
// (test/daemon.js starts it): every session method, the tool-set rule's
// 409, env visible in the cell and masked in every output field.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { APIError, Client } from '../index.js';
import { skipReason, startDaemon } from './daemon.js';

const PLANTED = 'planted-ts-value-0123456789';
const skip = skipReason();
let cannotRun = '';
let daemon;
let c;
const dtest = (name, fn) => test(name, (t) => (cannotRun ? t.skip(cannotRun) : fn(t)));

async function refused(p, status, code) {
  await assert.rejects(p, (e) => e instanceof APIError && e.status === status && e.code === code);
}

describe('sessions against a real daemon', { skip: skip || false, timeout: 600_000 }, () => {
  before(async () => {
    try {
      daemon = await startDaemon();
    } catch (e) {
      if (!e.cannotRun) throw e;
      cannotRun = e.message;
      return;
    }
    c = new Client({ socket: daemon.socket, timeoutMs: 30_000 });
  });
  after(async () => {
    c?.close();
    await daemon?.stop();
  });

  dtest('createSession, execute with session and env, masking, the tool-set rule', async () => {
    const s = await c.createSession({ owner: 'ts-sess', tools: ['search'], env: { SESS_VALUE: PLANTED } });
    assert.match(s.id, /^s[0-9a-f]{32}$/);
    assert.deepEqual([s.owner, s.tools, s.env_names, s.kernel_id], ['ts-sess', ['search'], ['SESS_VALUE'], undefined]);
    let r = await c.execute(`import os\nsecret = os.environ['SESS_VALUE']\nprint(secret == ${JSON.stringify(PLANTED)}, secret, os.environ['CELL'])`,
      { session: s.id, env: { CELL: 'short' } });
    assert.equal(r.output, 'True *** short\n');
    r = await c.execute("import os, sys\nprint(os.environ.get('CELL'))\nprint(secret, file=sys.stderr)\nraise ValueError(secret)", { session: s.id });
    assert.equal(r.stdout, 'None\n');
    assert.equal(r.stderr, '***\n');
    assert.equal(r.exception.evalue, '***');
    assert.ok(!JSON.stringify(r).includes(PLANTED), 'the planted value leaked');
    const v = await c.sessionVariables(s.id);
    assert.equal(v.variables.find((x) => x.name === 'secret').repr, "'***'");
    await refused(c.execute('secret', { session: s.id, tools: ['fetch'] }), 409, 'session_mismatch');
    await refused(c.execute('secret', { session: s.id, owner: 'ts-other' }), 404, 'not_found');
    await refused(c.interruptSession(s.id), 409, 'idle');
    assert.equal((await c.session(s.id)).kernel_id, r.kernel.id);
    assert.deepEqual((await c.sessions('ts-sess')).map((x) => x.id), [s.id]);
    const { kernels } = await c.kernels();
    assert.equal(kernels.find((k) => k.id === r.kernel.id).session, s.id);
    await refused(c.variablesByOwner('ts-sess'), 404, 'not_found'); // a session's kernel is not the owner's implicit one
    assert.deepEqual(await c.restartSession(s.id), { session: s.id, killed: r.kernel.id });
    r = await c.execute("print('secret' in globals())", { session: s.id });
    assert.equal(r.output, 'False\n');
    assert.deepEqual(await c.deleteSession(s.id), { deleted: s.id });
    await refused(c.session(s.id), 404, 'not_found');
  });

  dtest('env bounds: 64 names pass, 65 and secret-shaped names are refused', async () => {
    const env = (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`V_${i}`, '1']));
    const r = await c.execute("import os\nprint(sum(k.startswith('V_') for k in os.environ))", { owner: 'ts-env', env: env(64) });
    assert.equal(r.output, '64\n');
    await refused(c.execute('1', { owner: 'ts-env', env: env(65) }), 400, 'bad_request');
    await refused(c.execute('1', { owner: 'ts-env', env: { API_TOKEN: 'x' } }), 400, 'bad_request');
    await refused(c.createSession({ owner: 'ts-env', env: { KERNPOOL_X: '1' } }), 400, 'bad_request');
    await assert.rejects(c.execute('1', { env: { A: 1 } }), TypeError);
  });
});
