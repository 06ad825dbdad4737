// Every method of the client against a real daemon (test/daemon.js starts it).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { APIError, Client, DaemonUnavailable } from '../index.js';
import { skipReason, startDaemon } from './daemon.js';

// The per-owner cell quota the Retry-After test runs into; every other
// test's owner runs far fewer cells.
const CELLS_PER_MINUTE = 30;

const skip = skipReason();
let cannotRun = '';
let daemon;
let c;

// The events of one streamed cell up to (and including) the first stdout
// event whose text is `mark`; the iterator is left open for the rest.
async function until(it, mark) {
  const seen = [];
  for (;;) {
    const { value, done } = await it.next();
    assert.ok(!done, `the stream ended before ${mark}: ${JSON.stringify(seen)}`);
    seen.push(value);
    if (value.event === 'stdout' && value.text === mark) return seen;
  }
}

async function rest(it) {
  const seen = [];
  for await (const ev of { [Symbol.asyncIterator]: () => it }) seen.push(ev);
  return seen;
}

// A test of the daemon suite, skipped when the daemon cannot run here.
const dtest = (name, fn) => test(name, (t) => (cannotRun ? t.skip(cannotRun) : fn(t)));

describe('against a real daemon', { skip: skip || false, timeout: 600_000 }, () => {
  before(async () => {
    try {
      daemon = await startDaemon({ config: `max_cells_per_minute_per_owner = ${CELLS_PER_MINUTE}\n` });
    } catch (e) {
      if (!e.cannotRun) throw e;
      cannotRun = e.message; // the host cannot give the isolation: skipped with the daemon's reason
      return;
    }
    c = new Client({ socket: daemon.socket, timeoutMs: 30_000 });
  });
  after(async () => {
    c?.close();
    await daemon?.stop();
  });

  dtest('execute: a cell and its result fields', async () => {
    const r = await c.execute('print(6 * 7)', { owner: 'ts-cell' });
    assert.equal(r.status, 'success');
    assert.equal(r.output, '42\n');
    assert.equal(r.stdout, '42\n');
    assert.equal(r.exit_code, 0);
    assert.equal(r.tool_calls_made, 0);
    assert.equal(typeof r.duration_seconds, 'number');
    assert.match(r.kernel.id, /^k/);
    assert.equal(r.kernel.execution_count, 1);
    assert.ok(['sandbox', 'process'].includes(r.kernel.isolation.mode));
    if (r.kernel.isolation.mode === 'sandbox') assert.ok(['reaper', 'go'].includes(r.kernel.isolation.supervisor)); // the init step always runs there
    const again = await c.execute('x = 1', { owner: 'ts-cell' });
    assert.equal(again.kernel.id, r.kernel.id);
    assert.ok(again.kernel.reused && again.kernel.state_preserved);
  });

  dtest('execute: the structured exception and the streams apart', async () => {
    const r = await c.execute("import sys\nprint('out')\nprint('err', file=sys.stderr)\nundefined_name", { owner: 'ts-exc' });
    assert.equal(r.status, 'error');
    assert.equal(r.exit_code, 1);
    assert.equal(r.stdout, 'out\n');
    assert.equal(r.stderr, 'err\n');
    assert.equal(r.exception.ename, 'NameError');
    assert.equal(r.exception.evalue, "name 'undefined_name' is not defined");
    assert.equal(r.exception.traceback[0], 'Traceback (most recent call last):\n');
    assert.ok(r.output.includes(r.exception.traceback.join('')));
    const s = await c.execute('def f(:\n pass', { owner: 'ts-exc' });
    assert.equal(s.exception.ename, 'SyntaxError');
    const ok = await c.execute("print('fine')", { owner: 'ts-exc' });
    assert.equal(ok.exception, undefined);
    assert.equal(ok.stderr, undefined);
  });

  dtest('execute: callbacks get output, displays and tool calls in order', async () => {
    const events = [];
    let waiters = [];
    const push = (ev) => {
      events.push(ev);
      const w = waiters;
      waiters = [];
      for (const r of w) r();
    };
    const cell = [
      'import sys, kernpool_tools as t',
      'class H:',
      '    def _repr_html_(self): return "<b>three</b>"',
      'print("one")', 't.mark(n=1)',
      'sys.stderr.write("two\\n"); sys.stderr.flush()', 't.mark(n=2)',
      'display(H())', 't.mark(n=3)',
      'print("four", t.lookup(key="k"))',
    ].join('\n');
    const r = await c.execute(cell, {
      owner: 'ts-cb', tools: ['mark', 'lookup'],
      onStdout: (t) => push(['stdout', t]),
      onStderr: (t) => push(['stderr', t]),
      onDisplay: (d) => push(['display', d.data['text/html']]),
      // Each mark call is answered once the write before it reached its
      // callback (events on the stream need not precede the call's event):
      // the order is the cell's, and each event came while the cell ran.
      onToolCall: async (call) => {
        if (call.tool === 'lookup') return { key: call.args.key };
        while (events.length < call.args.n) await new Promise((r) => waiters.push(r));
        return 'ok';
      },
    });
    assert.equal(r.status, 'success', r.output);
    assert.deepEqual(events, [['stdout', 'one\n'], ['stderr', 'two\n'], ['display', '<b>three</b>'], ['stdout', "four {'key': 'k'}\n"]]);
    assert.equal(r.tool_calls_made, 4);
    assert.equal(r.displays.length, 1);
  });

  dtest('execute: a throwing tool handler raises ToolError in the cell', async () => {
    const r = await c.execute('import kernpool_tools as t\nt.search(q=1)', {
      owner: 'ts-toolerr', tools: ['search'],
      onToolCall: () => { throw new Error('backend down'); },
    });
    assert.equal(r.status, 'error');
    assert.equal(r.exception.ename, 'ToolError');
    assert.match(r.exception.evalue, /backend down/);
    const none = await c.execute('import kernpool_tools as t\nt.search(q=1)', { owner: 'ts-toolerr', tools: ['search'] });
    assert.equal(none.exception.ename, 'ToolError');
    assert.match(none.exception.evalue, /the client has no handler for tool search/);
  });

  dtest('stream: an async iterator of events; answerToolCall answers a call', async () => {
    const it = c.stream('import kernpool_tools as t\nprint("a")\nprint(t.echo(x=1))', { owner: 'ts-stream', tools: ['echo'] });
    const seen = [];
    for await (const ev of it) {
      seen.push(ev.event === 'stdout' ? ev.text : ev.event);
      if (ev.event === 'tool_call') {
        assert.equal(ev.call.tool, 'echo');
        assert.deepEqual(ev.call.args, { x: 1 });
        const ans = await c.answerToolCall(ev.call.id, { result: '"pong"' });
        assert.equal(ans.answered, ev.call.id);
      }
      if (ev.event === 'result') {
        assert.equal(ev.result.output, 'a\npong\n');
      }
    }
    // "a" comes through the stdout pipe, the call through the tool socket:
    // their order is the host's; "pong" can only follow the answer.
    assert.deepEqual(seen.filter((e) => e.endsWith('\n')), ['a\n', 'pong\n']);
    assert.ok(seen.indexOf('tool_call') < seen.indexOf('pong\n'), JSON.stringify(seen));
    assert.equal(seen.at(-1), 'result');
    assert.equal(seen.length, 4);
    await assert.rejects(c.answerToolCall('call-nope-1', { result: 'x' }), (e) => e instanceof APIError && e.status === 404 && e.code === 'not_found');
  });

  dtest('interrupt: by kernel id, then 409 idle', async () => {
    const it = c.stream('import time\nprint("started")\ntime.sleep(600)', { owner: 'ts-int' })[Symbol.asyncIterator]();
    await until(it, 'started\n');
    const { kernels } = await c.kernels();
    const k = kernels.find((x) => x.owner === 'ts-int');
    assert.deepEqual(await c.interrupt(k.id), { interrupted: [k.id] });
    const tail = await rest(it);
    const r = tail.at(-1).result;
    assert.equal(r.status, 'interrupted');
    assert.equal(r.exception.ename, 'KeyboardInterrupt');
    assert.ok(r.kernel.state_preserved);
    await assert.rejects(c.interrupt(k.id), (e) => e instanceof APIError && e.status === 409 && e.code === 'idle');
  });

  dtest('interruptOwner: the running cells of an owner', async () => {
    const it = c.stream('import time\nprint("started")\ntime.sleep(600)', { owner: 'ts-intown' })[Symbol.asyncIterator]();
    await until(it, 'started\n');
    const ans = await c.interruptOwner('ts-intown', 'default');
    assert.equal(ans.interrupted.length, 1);
    assert.equal((await rest(it)).at(-1).result.status, 'interrupted');
    assert.deepEqual(await c.interruptOwner('ts-intown'), { interrupted: [] });
  });

  dtest('stream: an aborted request interrupts its cell', async () => {
    const ac = new AbortController();
    const it = c.stream('import time\nprint("started")\ntime.sleep(600)', { owner: 'ts-abort', signal: ac.signal })[Symbol.asyncIterator]();
    await until(it, 'started\n');
    ac.abort();
    await assert.rejects(rest(it), { name: 'AbortError' });
    // The daemon saw the client go: the kernel is free for the next cell.
    const r = await c.execute('print("next")', { owner: 'ts-abort' });
    assert.equal(r.output, 'next\n');
  });

  dtest('variables: by id, by owner, and 409 busy while a cell runs', async () => {
    const r = await c.execute("xs = [1, 2, 3]\nname = 'kern'\n_hidden = 1", { owner: 'ts-vars' });
    const v = await c.variables(r.kernel.id);
    assert.equal(v.total, 2);
    assert.deepEqual(v.variables.map((x) => [x.name, x.type, x.repr, x.len]),
      [['name', 'str', "'kern'", 4], ['xs', 'list', '[1, 2, 3]', 3]]);
    assert.deepEqual(await c.variablesByOwner('ts-vars', 'default'), v);
    await assert.rejects(c.variablesByOwner('ts-nobody'), (e) => e instanceof APIError && e.code === 'not_found');
    const it = c.stream('import time\nprint("started")\ntime.sleep(600)', { owner: 'ts-vars' })[Symbol.asyncIterator]();
    await until(it, 'started\n');
    await assert.rejects(c.variables(r.kernel.id), (e) => e instanceof APIError && e.status === 409 && e.code === 'busy');
    await c.interrupt(r.kernel.id);
    await rest(it);
  });

  dtest('kernels, kill and shutdown', async () => {
    const a = await c.execute('pass', { owner: 'ts-life' });
    const b = await c.execute('pass', { owner: 'ts-life', tools: ['t1'] });
    const mine = (await c.kernels()).kernels.filter((k) => k.owner === 'ts-life').map((k) => k.id).sort();
    assert.deepEqual(mine, [a.kernel.id, b.kernel.id].sort());
    assert.deepEqual(await c.kill(a.kernel.id), { killed: a.kernel.id });
    await assert.rejects(c.kill(a.kernel.id), (e) => e instanceof APIError && e.status === 404 && e.code === 'not_found');
    assert.deepEqual(await c.shutdown('ts-life'), { owner: 'ts-life', killed: 1 });
    assert.equal((await c.kernels()).kernels.filter((k) => k.owner === 'ts-life').length, 0);
  });

  dtest('health and metrics', async () => {
    const h = await c.health();
    assert.equal(h.status, 'ok');
    assert.equal(typeof h.version, 'string');
    assert.ok(h.stats.cells >= 1 && h.stats.kernels_started >= 1);
    assert.match(await c.metrics(), /^kernpool_cells_total/m);
  });

  dtest('settings and readiness', async () => {
    const st = await c.settings();
    assert.equal(st.socket, daemon.socket);
    assert.equal(st.interpreter, '/usr/bin/python3');
    assert.equal(st.tool_call_timeout, '30s');
    assert.ok(st.profiles.default.files_max_bytes > 0);
    assert.equal(await c.ready(), 'ready');
  });

  dtest('spill: the whole stdout of a capped cell', async () => {
    const r = await c.execute("for i in range(20000):\n    print('line %05d' % i)", { owner: 'ts-spill' });
    assert.equal(r.stdout_truncated, true);
    assert.equal(r.stdout_bytes_total, 20000 * 11);
    const full = await c.spill(r.kernel.id, r.stdout_spill_name);
    assert.equal(full.length, 20000 * 11);
    assert.ok(full.endsWith('line 19999\n') && r.output.endsWith('line 19999\n'));
    await assert.rejects(c.spill(r.kernel.id, r.stdout_spill_name, 1000), { name: 'ProtocolError' });
    await assert.rejects(c.spill(r.kernel.id, 'cell_999999_stdout.txt'), (e) => e instanceof APIError && e.status === 404);
  });

  dtest('errors: 400 bad_request names the problem', async () => {
    await assert.rejects(c.execute('pass', { owner: 'ts-bad', interpreter: 'python3' }),
      (e) => e instanceof APIError && e.status === 400 && e.code === 'bad_request' && /interpreter/.test(e.apiMessage));
    await assert.rejects(c.execute('pass', { owner: 'ts-bad', mode: 'nope' }),
      (e) => e instanceof APIError && e.code === 'bad_request' && /mode "nope" is not configured/.test(e.apiMessage));
  });

  dtest('errors: 429 quota carries Retry-After', async () => {
    let err;
    for (let i = 0; i <= 3 * CELLS_PER_MINUTE && !err; i++) {
      await c.execute('pass', { owner: 'ts-quota' }).catch((e) => { err = e; });
    }
    assert.ok(err instanceof APIError, `no quota error: ${err}`);
    assert.equal(err.status, 429);
    assert.equal(err.code, 'quota');
    assert.ok(Number.isInteger(err.retryAfter) && err.retryAfter >= 1, `Retry-After ${err.retryAfter}`);
  });

  dtest('DaemonUnavailable when no daemon listens', async () => {
    const gone = new Client({ socket: `${daemon.socket}.none` });
    await assert.rejects(gone.health(), (e) => e instanceof DaemonUnavailable && e.where === `${daemon.socket}.none`);
    gone.close();
  });
});
