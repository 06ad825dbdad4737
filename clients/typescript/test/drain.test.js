// drain, drainStatus and ready against a daemon of its own: a drain ends
// the daemon, so it cannot share the other suites' daemon.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { APIError, Client } from '../index.js';
import { skipReason, startDaemon } from './daemon.js';

const skip = skipReason();
let cannotRun = '';
let daemon;
let c;
const dtest = (name, fn) => test(name, (t) => (cannotRun ? t.skip(cannotRun) : fn(t)));

describe('drain against a real daemon', { skip: skip || false, timeout: 600_000 }, () => {
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
    await daemon?.stop(); // the drained daemon has exited: stop checks its exit code was 0
  });

  dtest('a drain refuses cells, waits for the running one, and ends drained', async () => {
    assert.equal(await c.ready(), 'ready');
    assert.equal((await c.drainStatus()).state, 'ready');
    // A cell held in a tool call runs through the drain's start.
    let called;
    const inCall = new Promise((r) => { called = r; });
    let release;
    const gate = new Promise((r) => { release = r; });
    const busy = c.execute("import kernpool_tools as t\nprint(t.gate())", {
      owner: 'ts-drain', tools: ['gate'],
      onToolCall: async () => { called(); await gate; return 'open'; },
    });
    await inCall;
    const started = await c.drain();
    assert.equal(started.state, 'draining');
    assert.equal(started.cells_running, 1);
    const st = await c.drainStatus();
    assert.equal(st.state, 'draining');
    assert.equal(typeof st.started_at, 'string');
    await assert.rejects(c.ready(), (e) => e instanceof APIError && e.status === 503 && e.code === 'draining');
    await assert.rejects(c.execute('1', { owner: 'ts-drain-new' }), (e) => e instanceof APIError && e.code === 'draining');
    // Follow the drain; release the cell once the stream is open (its
    // first line is the status now), else the daemon could exit first.
    const seen = [];
    let opened;
    const open = new Promise((r) => { opened = r; });
    const followed = c.drain((s) => { seen.push(s); opened(); });
    await open;
    assert.equal(seen[0].state, 'draining');
    release();
    assert.equal((await busy).output, 'open\n');
    const last = await followed;
    assert.equal(last.state, 'drained');
    assert.equal(last.cells_running, 0);
    assert.deepEqual(seen.at(-1), last);
    assert.ok(seen.length >= 1);
  });
});
