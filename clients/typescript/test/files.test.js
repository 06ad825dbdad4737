// The files API against a real daemon (test/daemon.js starts it): every
// method, streamed both ways, and each refusal with its code.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { APIError, Client, filePath } from '../index.js';
import { skipReason, startDaemon } from './daemon.js';

const LIMIT = 64 << 10; // files_max_bytes of the smallfiles mode
const skip = skipReason();
let cannotRun = '';
let daemon;
let c;
let tmp;
const dtest = (name, fn) => test(name, (t) => (cannotRun ? t.skip(cannotRun) : fn(t)));

async function rejects(p, code, words) {
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof APIError, String(e));
    assert.equal(e.code, code, e.message);
    if (words) assert.ok(e.message.includes(words), e.message);
    return true;
  });
}

test('filePath escapes "/" and "." so nothing cleans a ".." away', () => {
  assert.equal(filePath('../a/b.txt'), '%2E%2E%2Fa%2Fb%2Etxt');
  assert.throws(() => filePath(''), TypeError);
});

describe('files against a real daemon', { skip: skip || false, timeout: 600_000 }, () => {
  before(async () => {
    try {
      daemon = await startDaemon({ config: `profile "smallfiles" {\n  files_max_bytes = "64KiB"\n}\n` });
    } catch (e) {
      if (!e.cannotRun) throw e;
      cannotRun = e.message;
      return;
    }
    c = new Client({ socket: daemon.socket, timeoutMs: 60_000 });
    tmp = mkdtempSync(path.join(os.tmpdir(), 'kp-ts-files-'));
  });
  after(async () => {
    c?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
    await daemon?.stop();
  });

  dtest('uploadFile, downloadFile, listFiles, deleteFile, by owner and by id', async () => {
    const owner = { owner: 'ts-files' };
    const r = await c.execute('1', owner);
    const byId = { kernelId: r.kernel.id };
    assert.deepEqual(await c.uploadFile('data/in.csv', 'a,b\n1,2\n', owner), { path: 'data/in.csv', bytes: 8 });
    const read = await c.execute("print(open('data/in.csv').read().splitlines())", owner);
    assert.equal(read.output, "['a,b', '1,2']\n");
    await c.execute("open('out.bin', 'wb').write(bytes(range(256)) * 1000)", owner);
    const want = Buffer.alloc(256000);
    for (let i = 0; i < want.length; i++) want[i] = i % 256;
    assert.ok((await c.downloadFile('out.bin', byId)).equals(want));
    const l = await c.listFiles('data', owner);
    assert.equal(l.dir, 'data');
    assert.equal(l.truncated, false);
    assert.deepEqual(l.entries.map((e) => [e.name, e.size, e.type]), [['in.csv', 8, 'file']]);
    await c.deleteFile('data/in.csv', byId);
    await rejects(c.downloadFile('data/in.csv', byId), 'not_found', 'no such file');
  });

  dtest('a 20 MiB file streams up from a ReadStream and down into a WriteStream', async () => {
    const owner = { owner: 'ts-files-big' };
    await c.execute('1', owner);
    const src = path.join(tmp, 'src.bin');
    writeFileSync(src, Buffer.concat(Array.from({ length: 20 }, (_, i) => Buffer.alloc(1 << 20, i * 7 + 1))));
    const sum = createHash('sha256').update(readFileSync(src)).digest('hex');
    assert.equal((await c.uploadFile('big.bin', createReadStream(src), owner)).bytes, 20 << 20);
    const r = await c.execute("import hashlib\nprint(hashlib.sha256(open('big.bin', 'rb').read()).hexdigest())", owner);
    assert.equal(r.output.trim(), sum);
    const dst = path.join(tmp, 'dst.bin');
    assert.equal(await c.downloadFileTo('big.bin', createWriteStream(dst), owner), 20 << 20);
    assert.equal(createHash('sha256').update(readFileSync(dst)).digest('hex'), sum);
    const { size, stream } = await c.openFile('big.bin', owner);
    assert.equal(size, 20 << 20);
    const h = createHash('sha256');
    for await (const chunk of stream) h.update(chunk);
    assert.equal(h.digest('hex'), sum);
    await assert.rejects(c.downloadFile('big.bin', owner, 1 << 20), /over 1048576 bytes/);
  });

  dtest('execute outputsDir lists what the cell wrote there', async () => {
    const r = await c.execute("import os\nos.makedirs('out', exist_ok=True)\nopen('out/a.txt', 'w').write('hi')\nopen('b.txt', 'w').write('x')",
      { owner: 'ts-files-outputs', outputsDir: 'out' });
    assert.deepEqual(r.outputs.map((o) => [o.name, o.size, o.type]), [['out/a.txt', 2, 'file']]);
    assert.equal((await c.downloadFile(r.outputs[0].name, { kernelId: r.kernel.id })).toString(), 'hi');
  });

  dtest('hostile paths are refused with bad_request', async () => {
    const owner = { owner: 'ts-files-hostile' };
    await c.execute('1', owner);
    for (const [p, words] of [['../escape', '".." component'], ['a/../../escape', '".." component'], ['/etc/passwd', 'absolute'],
      ['a\u0000b', 'NUL'], ['n'.repeat(256), 'over the limit of 255']]) {
      await rejects(c.uploadFile(p, 'x', owner), 'bad_request', words);
      await rejects(c.downloadFile(p, owner), 'bad_request', words);
    }
  });

  dtest('a planted symlink does not redirect the daemon', async () => {
    const owner = { owner: 'ts-files-symlink' };
    await c.execute("import os\nos.symlink('/etc/passwd', 'out.txt')\nos.symlink('/etc', 'etc')", owner);
    await rejects(c.downloadFile('out.txt', owner), 'not_regular', 'symlink');
    await assert.rejects(c.downloadFile('etc/passwd', owner), APIError);
    await assert.rejects(c.uploadFile('etc/kernpool-planted', 'x', owner), APIError);
    assert.equal(existsSync('/etc/kernpool-planted'), false);
  });

  dtest('an upload over files_max_bytes is 413 too_large, announced or streamed, and nothing is kept', async () => {
    const owner = { owner: 'ts-files-cap', mode: 'smallfiles' };
    await c.execute('1', { owner: 'ts-files-cap', mode: 'smallfiles' });
    assert.equal((await c.uploadFile('exact.bin', Buffer.alloc(LIMIT), owner)).bytes, LIMIT);
    await rejects(c.uploadFile('big.bin', Buffer.alloc(LIMIT + 1), owner), 'too_large', '65536');
    async function* endless() {
      for (let i = 0; i < 64; i++) yield Buffer.alloc(LIMIT);
    }
    await rejects(c.uploadFile('big.bin', endless(), owner), 'too_large', 'files_max_bytes');
    const names = (await c.listFiles('', owner)).entries.map((e) => e.name);
    assert.ok(!names.includes('big.bin') && !names.some((n) => n.startsWith('.kernpool-upload-')), names.join(' '));
  });

  dtest('a files call names exactly one target', async () => {
    await assert.rejects(c.listFiles('', {}), TypeError);
    await assert.rejects(c.uploadFile('x', 'y', { kernelId: 'k', owner: 'o' }), TypeError);
    await rejects(c.listFiles('', { owner: 'ts-nobody' }), 'not_found', 'no live kernel');
    await assert.rejects(c.listFiles('', { session: 's0', owner: 'o' }), TypeError);
    await assert.rejects(c.listFiles('', { session: 's0', mode: 'default' }), TypeError);
  });

  dtest('the files methods by session reach its kernel: idle before its first cell', async () => {
    const s = await c.createSession({ owner: 'ts-files-sess', tools: ['search'] });
    const bySession = { session: s.id };
    await rejects(c.uploadFile('early.txt', 'x', bySession), 'idle');
    await c.execute('1', bySession);
    assert.deepEqual(await c.uploadFile('in/data.csv', 'a,b\n1,2\n', bySession), { path: 'in/data.csv', bytes: 8 });
    const r = await c.execute("t = open('in/data.csv').read()\nprint(t.splitlines())\n_ = open('out.txt', 'w').write(t.upper())", bySession);
    assert.equal(r.output, "['a,b', '1,2']\n");
    assert.equal((await c.downloadFile('out.txt', bySession)).toString(), 'A,B\n1,2\n');
    assert.deepEqual((await c.listFiles('in', bySession)).entries.map((e) => e.name), ['data.csv']);
    await c.deleteFile('in/data.csv', bySession);
    await rejects(c.downloadFile('in/data.csv', bySession), 'not_found');
    await rejects(c.listFiles('', { session: `s${'0'.repeat(32)}` }), 'not_found', 'no such session');
    await c.deleteSession(s.id);
  });
});

