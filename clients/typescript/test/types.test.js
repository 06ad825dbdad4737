// The types are the API's: types.d.ts is what docs/openapi.json generates,
// and the README's example compiles against index.d.ts under strict tsc.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const PKG = fileURLToPath(new URL('..', import.meta.url));
const TSC = path.join(PKG, 'node_modules', '.bin', 'tsc');

test('types.d.ts is what docs/openapi.json generates', () => {
  execFileSync(process.execPath, [path.join(PKG, 'scripts', 'gen-types.mjs'), '--check'], { stdio: 'inherit' });
});

// The client's method(s) for each operation of docs/openapi.json (as
// pool/api's TestGoClientCoversEveryOperation for the Go client).
const METHODS = {
  execute: ['execute', 'stream'], answerToolCall: ['answerToolCall'], listKernels: ['kernels'], killKernel: ['kill'],
  interruptKernel: ['interrupt'], kernelVariables: ['variables', 'variablesByOwner'], kernelSpill: ['spill'],
  interruptOwner: ['interruptOwner'], shutdownOwner: ['shutdown'], health: ['health'], settings: ['settings'],
  metrics: ['metrics'], ready: ['ready'], drain: ['drain'], drainStatus: ['drainStatus'],
  createSession: ['createSession'], listSessions: ['sessions'], getSession: ['session'], deleteSession: ['deleteSession'],
  restartSession: ['restartSession'], interruptSession: ['interruptSession'], sessionVariables: ['sessionVariables'],
  fileList: ['listFiles'], fileListOwner: ['listFiles'], fileListSession: ['listFiles'],
  fileDownload: ['openFile', 'downloadFile', 'downloadFileTo'], fileDownloadOwner: ['openFile', 'downloadFile', 'downloadFileTo'],
  fileDownloadSession: ['openFile', 'downloadFile', 'downloadFileTo'],
  fileUpload: ['uploadFile'], fileUploadOwner: ['uploadFile'], fileUploadSession: ['uploadFile'],
  fileDelete: ['deleteFile'], fileDeleteOwner: ['deleteFile'], fileDeleteSession: ['deleteFile'],
};

test('every operation of docs/openapi.json has a method of the client', async () => {
  const { Client } = await import('../index.js');
  const doc = JSON.parse(readFileSync(path.join(PKG, '..', '..', 'docs', 'openapi.json'), 'utf8'));
  const ids = [];
  for (const [p, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      ids.push(op.operationId);
      assert.ok(METHODS[op.operationId], `${method} ${p} (${op.operationId}): no client method is listed for it`);
      for (const m of METHODS[op.operationId]) {
        assert.equal(typeof Client.prototype[m], 'function', `${method} ${p}: the client has no method ${m}`);
      }
    }
  }
  assert.deepEqual(Object.keys(METHODS).sort(), ids.sort());
});

test('the README example type-checks (strict)', { skip: !existsSync(TSC) && 'no TypeScript: run npm ci in clients/typescript' }, () => {
  const readme = readFileSync(path.join(PKG, 'README.md'), 'utf8');
  const m = readme.match(/```ts\n([\s\S]*?)```/);
  assert.ok(m, 'the README has a ts example');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kp-ts-types-'));
  try {
    writeFileSync(path.join(dir, 'example.ts'), m[1]);
    // A mistyped field must fail, or the check checks nothing.
    writeFileSync(path.join(dir, 'wrong.ts'), `import type { Result } from 'kernpool-client';\nexport const f = (r: Result) => r.exception?.enam;\n`);
    const config = (file) => JSON.stringify({
      compilerOptions: {
        target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', strict: true, noEmit: true,
        types: ['node'], typeRoots: [path.join(PKG, 'node_modules', '@types')],
        paths: { 'kernpool-client': [path.join(PKG, 'index.d.ts')] },
      },
      files: [file],
    });
    writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
    writeFileSync(path.join(dir, 'tsconfig.json'), config('example.ts'));
    const ok = spawnSync(TSC, ['-p', dir], { encoding: 'utf8' });
    assert.equal(ok.status, 0, ok.stdout + ok.stderr);
    writeFileSync(path.join(dir, 'tsconfig.json'), config('wrong.ts'));
    const bad = spawnSync(TSC, ['-p', dir], { encoding: 'utf8' });
    assert.match(bad.stdout, /Property 'enam' does not exist on type 'Exception'/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
