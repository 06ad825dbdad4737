// A real kernpool daemon for the tests, as clients/python/tests/conftest.py
// starts it: `go build ./cmd/kernpool` into a temp dir (or $KERNPOOL_BIN),
// `kernpool serve` on a temp socket and state dir, SIGTERM at the end (it
// must exit 0). As root the daemon isolates fully (--isolation=sandbox);
// without root the suite is skipped with the reason, unless
// KERNPOOL_TEST_ISOLATION=process asks for the degraded mode explicitly.
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, DaemonUnavailable } from '../index.js';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const PYTHON = '/usr/bin/python3';

/** Why the daemon cannot run here, or '' when it can. */
export function skipReason() {
  if (process.platform !== 'linux') return 'the daemon tests need Linux (Unix socket API, the sandbox)';
  if (!existsSync(PYTHON)) return `${PYTHON} is missing`;
  const isolation = process.env.KERNPOOL_TEST_ISOLATION || 'sandbox';
  if (isolation === 'sandbox' && process.getuid() !== 0) {
    return 'full isolation needs root (a uid per kernel, cgroups); run as root or set KERNPOOL_TEST_ISOLATION=process';
  }
  return '';
}

function build(dir) {
  if (process.env.KERNPOOL_BIN) return process.env.KERNPOOL_BIN;
  const go = existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : 'go';
  const out = path.join(dir, 'kernpool');
  execFileSync(go, ['build', '-o', out, './cmd/kernpool'], { cwd: REPO, stdio: ['ignore', 'inherit', 'inherit'] });
  return out;
}

/** Starts the daemon; resolves with {socket, stop()} once it answers. */
export async function startDaemon({ config: extra = '' } = {}) {
  const isolation = process.env.KERNPOOL_TEST_ISOLATION || 'sandbox';
  const base = mkdtempSync(path.join(os.tmpdir(), 'kp-ts-'));
  chmodSync(base, 0o711); // kernels run as other uids and traverse to their staging dirs
  const bin = build(base);
  const socket = path.join(base, 'run', 'kp.sock');
  const log = path.join(base, 'daemon.log');
  const config = path.join(base, 'kernpool.hcl');
  writeFileSync(config, `interpreter = "${PYTHON}"\nlog_level = "debug"\ncgroup {\n  parent = "kernpool-ts-${path.basename(base)}"\n}\n${extra}`);
  const args = ['serve', '--socket', socket, '--state-dir', path.join(base, 'state'), '--config', config,
    '--isolation', isolation, '--tool-call-timeout', '30s'];
  const env = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: process.env.HOME || '/root', LANG: 'C.UTF-8' };
  const { openSync, closeSync } = await import('node:fs');
  const fd = openSync(log, 'a');
  // detached: its own process group, so a hostile cell's killpg misses the test runner.
  const proc = spawn(bin, args, { env, stdio: ['ignore', fd, fd], detached: true });
  closeSync(fd);
  let exited = null;
  const exit = new Promise((resolve) => proc.on('exit', (code, sig) => { exited = code ?? sig; resolve(exited); }));
  const killOnExit = () => proc.kill('SIGKILL');
  process.on('exit', killOnExit);
  const tail = () => readFileSync(log, 'utf8').split('\n').slice(-30).join('\n');
  const c = new Client({ socket, timeoutMs: 5000 });
  // Only stops a hung start: a loaded host (the suite runs beside others)
  // has taken past 30 s to bring the daemon up.
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      await c.health();
      break;
    } catch (e) {
      if (!(e instanceof DaemonUnavailable)) throw e;
    }
    if (exited !== null) {
      const why = `kernpool serve --isolation=${isolation} cannot run here (exit ${exited}):\n${tail()}`;
      process.off('exit', killOnExit);
      rmSync(base, { recursive: true, force: true });
      throw Object.assign(new Error(why), { cannotRun: true });
    }
    if (Date.now() > deadline) {
      // A daemon left running would hold the test process open for ever.
      const why = `kernpool serve did not answer within 120 s:\n${tail()}`;
      proc.kill('SIGKILL');
      await exit;
      process.off('exit', killOnExit);
      rmSync(base, { recursive: true, force: true });
      throw new Error(why);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  c.close();
  return {
    socket,
    log: tail,
    logText: () => readFileSync(log, 'utf8'),
    async stop() {
      if (exited === null) proc.kill('SIGTERM');
      const code = await exit;
      process.off('exit', killOnExit);
      rmSync(base, { recursive: true, force: true });
      if (code !== 0) throw new Error(`kernpool serve exited ${code} after SIGTERM`);
    },
  };
}
