// The files API of Client (docs/api.md "Files"): bodies stream both ways,
// an upload from a Buffer, a string or any (async) iterable of bytes such
// as a fs.ReadStream, a download as a Readable. Never a whole file in
// memory unless downloadFile is asked for one (bounded by maxBytes).
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

// downloadFile's default bound on the bytes it holds.
export const DEFAULT_MAX_DOWNLOAD_BYTES = 64 << 20;

/** A file path as one URL segment, "/" and "." escaped: the daemon reads
 * it as is and no HTTP layer cleans a ".." out of it. */
export function filePath(p) {
  if (typeof p !== 'string' || p === '') throw new TypeError('a file path must be a non-empty string');
  return encodeURIComponent(p).replace(/\./g, '%2E');
}

/** The URL path of a files call: target {kernelId}, {session} or {owner, mode?}. */
export function filesURL(target, p = '', dir = '') {
  const t = target || {};
  const named = [t.kernelId, t.session, t.owner].filter((x) => x !== undefined).length;
  if (named !== 1) throw new TypeError('a files call takes exactly one of kernelId, session and owner');
  if (t.session !== undefined && t.mode !== undefined) {
    throw new TypeError('a files call by session takes no mode (the session has one)');
  }
  const seg = (s) => {
    if (typeof s !== 'string' || s === '') throw new TypeError('a kernel id, session id or owner must be a non-empty string');
    return encodeURIComponent(s);
  };
  let base;
  if (t.kernelId !== undefined) base = `/v1/kernels/${seg(t.kernelId)}/files`;
  else if (t.session !== undefined) base = `/v1/sessions/${seg(t.session)}/files`;
  else base = `/v1/owners/${seg(t.owner)}/files`;
  if (p) base += `/${filePath(p)}`;
  const q = [];
  if (t.owner !== undefined && t.mode) q.push(`mode=${encodeURIComponent(t.mode)}`);
  if (dir) q.push(`dir=${encodeURIComponent(dir)}`);
  return q.length ? `${base}?${q.join('&')}` : base;
}

/** The body of an upload and its length (undefined: unknown, chunked). */
export function uploadBody(data) {
  if (typeof data === 'string') data = Buffer.from(data, 'utf8');
  if (data instanceof Uint8Array) return { buf: Buffer.from(data.buffer, data.byteOffset, data.byteLength), length: data.byteLength };
  if (data && (typeof data[Symbol.asyncIterator] === 'function' || typeof data[Symbol.iterator] === 'function')) {
    return { stream: data instanceof Readable ? data : Readable.from(data), length: undefined };
  }
  throw new TypeError('data must be a Buffer, Uint8Array, string or an (async) iterable of bytes');
}

/** Writes a download to a writable stream; resolves with the bytes written. */
export async function copyTo(res, dest, what) {
  let n = 0;
  res.on('data', (c) => { n += c.length; });
  await pipeline(res, dest);
  const want = Number(res.headers['content-length'] ?? -1);
  if (want >= 0 && n !== want) throw new Error(`${what}: ${n} of ${want} bytes arrived`);
  return n;
}
