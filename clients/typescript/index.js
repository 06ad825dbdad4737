// kernpool's Node.js client: HTTP/1.1 over the daemon's Unix socket (or
// https to its network listener), standard library only. Types: index.d.ts.
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { copyTo, DEFAULT_MAX_DOWNLOAD_BYTES, filesURL, uploadBody } from './files.js';

export { DEFAULT_MAX_DOWNLOAD_BYTES, filePath } from './files.js';

// Bounds on what a daemon can make this process hold (docs/api.md "Caps":
// a result is under 2.1 MiB plus at most 4 MiB of displays, one display
// event at most 4 MiB of JSON). A longer answer or stream line is a
// ProtocolError, never an allocation.
export const DEFAULT_MAX_LINE_BYTES = 16 << 20;
export const MAX_ERROR_BYTES = 1 << 20;
// A spill file is at most output.spill_cap (5,000,000 bytes by default).
export const DEFAULT_MAX_SPILL_BYTES = 64 << 20;
// Tool calls one execute answers at once; past it a call is refused.
export const MAX_CONCURRENT_TOOL_CALLS = 64;

/** A non-2xx answer of the API (or an error event of a stream). */
export class APIError extends Error {
  constructor(status, code, message, retryAfter) {
    super(`${code} (HTTP ${status}): ${message}`);
    this.name = 'APIError';
    this.status = status;
    this.code = code;
    this.apiMessage = message;
    this.retryAfter = retryAfter;
  }
}

/** No daemon answers where the client dials. */
export class DaemonUnavailable extends Error {
  constructor(where, cause) {
    super(`no kernpool daemon at ${where}: ${cause.message}`, { cause });
    this.name = 'DaemonUnavailable';
    this.where = where;
  }
}

/** The daemon's answer broke the protocol (too large, not JSON, cut short). */
export class ProtocolError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ProtocolError';
  }
}

/** The socket the CLI dials by default (cmd/kernpool/paths.go). */
export function defaultSocket(env = process.env) {
  if (env.KERNPOOL_SOCKET) return env.KERNPOOL_SOCKET;
  const uid = typeof process.getuid === 'function' ? process.getuid() : -1;
  let base;
  if (uid === 0) base = '/run/kernpool';
  else if (env.XDG_RUNTIME_DIR) base = path.join(env.XDG_RUNTIME_DIR, 'kernpool');
  else if (uid >= 0) base = path.join(env.TMPDIR || '/tmp', `kernpool-${uid}`);
  else base = path.join(os.tmpdir(), 'kernpool');
  return path.join(base, 'kernpool.sock');
}

const seg = (s) => {
  if (typeof s !== 'string' || s === '') throw new TypeError('a kernel id, owner or name must be a non-empty string');
  return encodeURIComponent(s);
};

function retryAfter(res) {
  const v = res.headers['retry-after'];
  return typeof v === 'string' && /^\s*\d+\s*$/.test(v) ? Number(v) : undefined;
}

function parseJSON(buf, what) {
  try {
    return JSON.parse(buf.toString('utf8'));
  } catch (e) {
    throw new ProtocolError(`${what}: not JSON: ${e.message}`);
  }
}

// Reads the whole body, failing once it passes limit bytes.
async function readBody(res, limit, what) {
  const chunks = [];
  let n = 0;
  try {
    for await (const c of res) {
      n += c.length;
      if (n > limit) {
        res.destroy();
        throw new ProtocolError(`${what}: the answer is over ${limit} bytes`);
      }
      chunks.push(c);
    }
  } catch (e) {
    if (e instanceof ProtocolError) throw e;
    throw new ProtocolError(`${what}: reading the answer: ${e.message}`);
  }
  return Buffer.concat(chunks);
}

async function apiError(res, what) {
  const raw = await readBody(res, MAX_ERROR_BYTES, what);
  let body;
  try { body = JSON.parse(raw.toString('utf8')); } catch { body = null; }
  if (body && typeof body.error === 'string' && typeof body.code === 'string') {
    return new APIError(res.statusCode, body.code, body.error, retryAfter(res));
  }
  const text = raw.subarray(0, 200).toString('utf8').trim();
  return new APIError(res.statusCode, 'internal', `HTTP ${res.statusCode}: ${text}`, retryAfter(res));
}

// The events of an NDJSON body, each line bounded by limit bytes.
async function* ndjson(res, limit, what) {
  let parts = [];
  let n = 0;
  try {
    for await (const chunk of res) {
      let c = chunk;
      for (let i = c.indexOf(10); i >= 0; i = c.indexOf(10)) {
        if (n + i > limit) throw new ProtocolError(`${what}: a stream line is over ${limit} bytes`);
        parts.push(c.subarray(0, i));
        const line = Buffer.concat(parts);
        parts = [];
        n = 0;
        c = c.subarray(i + 1);
        if (line.length > 0) yield parseJSON(line, what);
      }
      n += c.length;
      if (n > limit) throw new ProtocolError(`${what}: a stream line is over ${limit} bytes`);
      if (c.length) parts.push(c);
    }
  } finally {
    res.destroy();
  }
  if (n > 0) throw new ProtocolError(`${what}: the stream ended inside a line`);
}

function executeBody(code, o) {
  if (typeof code !== 'string') throw new TypeError('code must be a string');
  const body = { code, stream: true };
  const copy = { owner: 'owner', mode: 'mode', interpreter: 'interpreter', cwd: 'cwd', timeout: 'timeout',
    limits: 'limits', maxToolCalls: 'max_tool_calls', tools: 'tools', passthrough: 'passthrough',
    session: 'session', env: 'env', outputsDir: 'outputs_dir' };
  for (const [k, wire] of Object.entries(copy)) if (o[k] !== undefined && o[k] !== null) body[wire] = o[k];
  if (o.reset) body.reset = true;
  for (const k of ['tools', 'passthrough']) {
    if (body[k] !== undefined && !Array.isArray(body[k])) throw new TypeError(`${k} must be an array of strings`);
  }
  if (body.env !== undefined) checkEnv(body.env);
  return body;
}

// An env option must map names to string values (the daemon refuses others).
function checkEnv(env) {
  if (env === null || typeof env !== 'object' || Array.isArray(env) ||
      !Object.values(env).every((v) => typeof v === 'string')) {
    throw new TypeError('env must map names to string values');
  }
}

// The body of POST /v1/sessions from createSession's options.
function sessionBody(o) {
  const body = {};
  for (const k of ['owner', 'mode', 'interpreter', 'cwd', 'tools', 'env']) {
    if (o[k] !== undefined && o[k] !== null) body[k] = o[k];
  }
  if (body.tools !== undefined && !Array.isArray(body.tools)) throw new TypeError('tools must be an array of strings');
  if (body.env !== undefined) checkEnv(body.env);
  return body;
}

/** A result's wire form of a tool's return value: a string as is, else its JSON. */
export function toolResultText(v) {
  return typeof v === 'string' ? v : JSON.stringify(v ?? null);
}

export class Client {
  /** @param {import('./index').ClientOptions} [opts] */
  constructor(opts = {}) {
    this.maxLineBytes = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.token = opts.token;
    const agentOpts = { keepAlive: true };
    if (opts.url) {
      const u = new URL(opts.url);
      if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new TypeError(`url ${opts.url}: only https: (or http:) is served`);
      if (u.protocol === 'http:' && opts.token) {
        throw new TypeError('refusing to send a bearer token over plain http: use https');
      }
      this.where = u.origin;
      this.mod = u.protocol === 'https:' ? https : http;
      this.base = { protocol: u.protocol, hostname: u.hostname.replace(/^\[|\]$/g, ''), port: u.port || undefined };
      if (u.protocol === 'https:') Object.assign(agentOpts, { ca: opts.ca, cert: opts.cert, key: opts.key });
    } else {
      const socket = opts.socket || defaultSocket();
      this.where = socket;
      this.mod = http;
      this.base = { socketPath: socket };
    }
    this.agent = new this.mod.Agent(agentOpts);
  }

  /** Closes the client's idle kept-alive connections. */
  close() {
    this.agent.destroy();
  }

  // Sends one request; resolves with the response once its head arrived.
  _send(method, p, body, { timeoutMs, signal, raw } = {}) {
    let data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers = { Accept: 'application/json, application/x-ndjson' };
    if (raw) {
      // A files upload: bytes, streamed when they come from a stream.
      data = raw.buf;
      headers['Content-Type'] = 'application/octet-stream';
      if (raw.length !== undefined) headers['Content-Length'] = raw.length;
    }
    // Over the socket the host is ignored; over https it names the server the certificate must match.
    if (this.base.socketPath) headers.Host = 'kernpool';
    if (data && !raw) Object.assign(headers, { 'Content-Type': 'application/json', 'Content-Length': data.length });
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    return new Promise((resolve, reject) => {
      const req = this.mod.request({ ...this.base, agent: this.agent, method, path: p, headers, signal });
      let connected = false;
      req.on('socket', (s) => {
        if (!s.connecting) connected = true;
        else s.once('connect', () => { connected = true; });
        if (timeoutMs) {
          req.setTimeout(timeoutMs, () => req.destroy(new ProtocolError(`${method} ${p}: no answer within ${timeoutMs} ms`)));
        }
      });
      let answered = false;
      req.on('response', (res) => {
        answered = true;
        // An answer before the whole upload (413) ends the upload.
        if (raw?.stream && !raw.stream.readableEnded) raw.stream.destroy();
        resolve(res);
      });
      req.on('error', (e) => {
        if (answered) return; // the daemon answered, then closed an upload it refused
        if (e instanceof ProtocolError || e.name === 'AbortError') reject(e);
        else if (!connected) reject(new DaemonUnavailable(this.where, e));
        else reject(new ProtocolError(`${method} ${p}: ${e.message}`));
      });
      if (raw?.stream) {
        raw.stream.on('error', (e) => req.destroy(e));
        raw.stream.pipe(req);
      } else req.end(data);
    });
  }

  // One JSON request and its JSON answer (bounded); a non-2xx is an APIError.
  async _json(method, p, body, limit = this.maxLineBytes) {
    const what = `${method} ${p}`;
    const res = await this._send(method, p, body, { timeoutMs: this.timeoutMs });
    if (res.statusCode < 200 || res.statusCode > 299) throw await apiError(res, what);
    return parseJSON(await readBody(res, limit, what), what);
  }

  /**
   * The raw event stream of one cell: stdout, stderr, display, tool_call
   * events, then the result event (the last). An error event is thrown as
   * an APIError. Answer tool_call events with answerToolCall. Leaving the
   * loop early closes the connection, which interrupts the cell.
   */
  async *stream(code, opts = {}) {
    const what = 'POST /v1/execute';
    const res = await this._send('POST', '/v1/execute', executeBody(code, opts), { signal: opts.signal });
    if (res.statusCode !== 200) throw await apiError(res, what);
    try {
      for await (const ev of ndjson(res, this.maxLineBytes, what)) {
        if (ev === null || typeof ev !== 'object' || typeof ev.event !== 'string') {
          throw new ProtocolError(`${what}: a stream line is not an event`);
        }
        if (ev.event === 'error') throw new APIError(res.statusCode, String(ev.code), String(ev.error), undefined);
        yield ev;
        if (ev.event === 'result') return;
      }
    } catch (e) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      if (e instanceof APIError || e instanceof ProtocolError) throw e;
      throw new ProtocolError(`${what}: reading the stream: ${e.message}`);
    }
    throw new ProtocolError(`${what}: the stream ended without a result`);
  }

  /**
   * Runs one cell and resolves with its Result (a failed cell is a Result
   * too). Output, displays and tool calls reach the callbacks as they come;
   * onToolCall's return value (or promise) answers the call, a throw makes
   * it raise ToolError in the cell.
   */
  async execute(code, opts = {}) {
    const pending = new Set();
    try {
      for await (const ev of this.stream(code, opts)) {
        switch (ev.event) {
          case 'stdout': opts.onStdout?.(ev.text); break;
          case 'stderr': opts.onStderr?.(ev.text); break;
          case 'display': opts.onDisplay?.(ev.display); break;
          case 'tool_call': {
            if (pending.size >= MAX_CONCURRENT_TOOL_CALLS) {
              // Refused before the stream is read on, so a flood of calls
              // holds at most the cap of answers in flight.
              const error = `the client runs ${MAX_CONCURRENT_TOOL_CALLS} tool calls at once; retry later`;
              await this.answerToolCall(ev.call.id, { error }).catch(() => {});
              break;
            }
            const p = this._toolCall(ev.call, opts.onToolCall).catch(() => {});
            pending.add(p);
            p.finally(() => pending.delete(p));
            break;
          }
          case 'result': return ev.result;
          default: break; // event types this client does not know are skipped
        }
      }
    } finally {
      await Promise.all(pending);
    }
    throw new ProtocolError('POST /v1/execute: the stream ended without a result');
  }

  async _toolCall(call, handler) {
    let answer;
    if (!handler) answer = { error: `the client has no handler for tool ${call.tool}` };
    else {
      try {
        answer = { result: toolResultText(await handler(call)) };
      } catch (e) {
        answer = { error: String(e?.message ?? e) };
      }
    }
    return this.answerToolCall(call.id, answer);
  }

  /** Answers a pending tool call: {result: string} or {error: string}. */
  answerToolCall(id, answer) {
    return this._json('POST', `/v1/tool-calls/${seg(id)}`, answer);
  }

  /** Interrupts the cell running on a kernel (409 idle when none runs). */
  interrupt(kernelId) {
    return this._json('POST', `/v1/kernels/${seg(kernelId)}/interrupt`);
  }

  /** Interrupts the running cells of an owner's kernels (of one mode if given). */
  interruptOwner(owner, mode) {
    const q = mode ? `?mode=${encodeURIComponent(mode)}` : '';
    return this._json('POST', `/v1/owners/${seg(owner)}/interrupt${q}`);
  }

  /** The user-defined names of a kernel's namespace (409 busy while a cell runs, 409 interrupted when an interrupt stopped the listing, 409 kernel_died when a __repr__ ended the kernel). */
  variables(kernelId) {
    return this._json('GET', `/v1/kernels/${seg(kernelId)}/variables`);
  }

  /**
   * The variables of the owner's one kernel (of mode, if given), as `kernpool
   * vars --owner`; explicit sessions' kernels are not counted (sessionVariables).
   */
  async variablesByOwner(owner, mode) {
    const { kernels } = await this.kernels();
    const mine = kernels.filter((k) => k.owner === owner && !k.session && (!mode || k.mode === mode));
    if (mine.length !== 1) {
      const why = mine.length ? `${mine.length} kernels (${mine.map((k) => k.id).join(', ')}): name one by id` : 'no kernel';
      throw new APIError(404, 'not_found', `owner ${owner} has ${why}`, undefined);
    }
    return this.variables(mine[0].id);
  }

  /**
   * Creates an explicit session ({owner, mode, interpreter, cwd, tools, env});
   * run cells in it with execute(code, {session: s.id}). Its tool set is
   * fixed: another one is APIError 409 session_mismatch.
   */
  createSession(opts = {}) {
    return this._json('POST', '/v1/sessions', sessionBody(opts));
  }

  /** The sessions this client may see (of owner only, if given). */
  async sessions(owner) {
    const q = owner ? `?owner=${encodeURIComponent(owner)}` : '';
    return (await this._json('GET', `/v1/sessions${q}`)).sessions;
  }

  /** One session (404 not_found for none, or another owner's). */
  session(id) {
    return this._json('GET', `/v1/sessions/${seg(id)}`);
  }

  /** Ends a session: its kernel is killed and its checkpoints deleted. */
  deleteSession(id) {
    return this._json('DELETE', `/v1/sessions/${seg(id)}`);
  }

  /** Kills the session's kernel (its state is lost); the session stays. */
  restartSession(id) {
    return this._json('POST', `/v1/sessions/${seg(id)}/restart`);
  }

  /** Interrupts the session's running cell (409 idle when none runs). */
  interruptSession(id) {
    return this._json('POST', `/v1/sessions/${seg(id)}/interrupt`);
  }

  /** The variables of the session's kernel (409 idle while it has none). */
  sessionVariables(id) {
    return this._json('GET', `/v1/sessions/${seg(id)}/variables`);
  }

  /** The live kernels and waiting checkpoints. */
  kernels() {
    return this._json('GET', '/v1/kernels');
  }

  /** Kills one kernel. */
  kill(kernelId) {
    return this._json('DELETE', `/v1/kernels/${seg(kernelId)}`);
  }

  /** Kills every kernel of an owner. */
  shutdown(owner) {
    return this._json('POST', `/v1/owners/${seg(owner)}/shutdown`);
  }

  /** The daemon's health and pool counters (`stats`). */
  health() {
    return this._json('GET', '/v1/health');
  }

  /** A spilled cell's full stdout (a result's kernel.id and stdout_spill_name). */
  async spill(kernelId, name, maxBytes = DEFAULT_MAX_SPILL_BYTES) {
    const p = `/v1/kernels/${seg(kernelId)}/spill/${seg(name)}`;
    const res = await this._send('GET', p, undefined, { timeoutMs: this.timeoutMs });
    if (res.statusCode !== 200) throw await apiError(res, `GET ${p}`);
    return (await readBody(res, maxBytes, `GET ${p}`)).toString('utf8');
  }

  /**
   * Writes data (a Buffer, a string as UTF-8, or an (async) iterable of
   * bytes such as a fs.ReadStream, streamed) to path of the working dir of
   * target ({kernelId}, {session} or {owner, mode?}), as the kernel's uid.
   * Over the mode's files_max_bytes: APIError too_large; a full tmpfs:
   * no_space; a session before its first cell: idle (no kernel is started).
   */
  async uploadFile(p, data, target) {
    const u = filesURL(target, p);
    const res = await this._send('PUT', u, undefined, { raw: uploadBody(data), timeoutMs: this.timeoutMs });
    if (res.statusCode !== 200) throw await apiError(res, `PUT ${u}`);
    return parseJSON(await readBody(res, MAX_ERROR_BYTES, `PUT ${u}`), `PUT ${u}`);
  }

  /** Opens path of target's working dir: {size, stream} (read the stream to its end, or destroy it). */
  async openFile(p, target) {
    const u = filesURL(target, p);
    const res = await this._send('GET', u, undefined, { timeoutMs: this.timeoutMs });
    if (res.statusCode !== 200) throw await apiError(res, `GET ${u}`);
    return { size: Number(res.headers['content-length'] ?? -1), stream: res };
  }

  /** The bytes of path of target's working dir (at most maxBytes). */
  async downloadFile(p, target, maxBytes = DEFAULT_MAX_DOWNLOAD_BYTES) {
    const { stream } = await this.openFile(p, target);
    return readBody(stream, maxBytes, `GET ${filesURL(target, p)}`);
  }

  /** Streams path of target's working dir into a writable; resolves with the bytes written. */
  async downloadFileTo(p, dest, target) {
    const { stream } = await this.openFile(p, target);
    return copyTo(stream, dest, `GET ${filesURL(target, p)}`);
  }

  /** Lists dir ('' the working dir) of target's working dir: at most 10,000 entries. */
  async listFiles(dir, target) {
    return this._json('GET', filesURL(target, '', dir || ''));
  }

  /** Removes path (a file, a symlink itself, or an empty dir) of target's working dir. */
  async deleteFile(p, target) {
    const u = filesURL(target, p);
    const res = await this._send('DELETE', u, undefined, { timeoutMs: this.timeoutMs });
    if (res.statusCode !== 204) throw await apiError(res, `DELETE ${u}`);
    res.resume();
  }

  /** The running daemon's settings (GET /v1/settings; admin on the network API). */
  settings() {
    return this._json('GET', '/v1/settings');
  }

  /**
   * The node's state from GET /v1/ready: `"ready"`, else an APIError
   * (code `draining` or `closed`). Needs no credentials.
   */
  async ready() {
    const st = await this._json('GET', '/v1/ready');
    if (typeof st?.state !== 'string') throw new ProtocolError('GET /v1/ready: expected {"state": ...}');
    return st.state;
  }

  /** The drain's progress (GET /v1/drain; admin). */
  drainStatus() {
    return this._json('GET', '/v1/drain');
  }

  /**
   * Starts a drain (POST /v1/drain; admin; idempotent): the node refuses
   * cells, saves its persist kernels and exits. Without onProgress it
   * resolves at once with the drain's status; with it, it follows the
   * drain: onProgress gets each change, and it resolves with the last
   * status the node sent (`drained` when it finished; the stream may also
   * end with the daemon's exit).
   */
  async drain(onProgress) {
    if (!onProgress) return this._json('POST', '/v1/drain');
    const what = 'POST /v1/drain?wait=true';
    const res = await this._send('POST', '/v1/drain?wait=true'); // no timeout: a drain takes its grace and the saves
    if (res.statusCode !== 200) throw await apiError(res, what);
    let last;
    try {
      for await (const st of ndjson(res, this.maxLineBytes, what)) {
        last = st;
        onProgress(st);
      }
    } catch (e) {
      if (last?.state !== 'drained') throw e; // the daemon exits once drained
    }
    return last;
  }

  /** The Prometheus text exposition of the daemon's metrics. */
  async metrics() {
    const res = await this._send('GET', '/metrics', undefined, { timeoutMs: this.timeoutMs });
    if (res.statusCode !== 200) throw await apiError(res, 'GET /metrics');
    return (await readBody(res, this.maxLineBytes, 'GET /metrics')).toString('utf8');
  }
}
