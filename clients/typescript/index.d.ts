// The client's API; the API's own types (Result, KernelList, ...) are
// generated from docs/openapi.json into types.d.ts.
import type {
  Display, DrainStatus, ErrorCode, FileListing, FileWritten, Health, InterruptResponse, KernelList, KillResponse, Limits, NodeState,
  Result, SessionDeleted, SessionInfo, SessionRestarted, Settings, ShutdownResponse, StreamEvent,
  ToolAnswer, ToolAnswered, ToolCall, Variables,
} from './types.js';
import type { Readable, Writable } from 'node:stream';

export * from './types.js';

export const DEFAULT_MAX_LINE_BYTES: number;
export const MAX_ERROR_BYTES: number;
export const DEFAULT_MAX_SPILL_BYTES: number;
export const MAX_CONCURRENT_TOOL_CALLS: number;
export const DEFAULT_MAX_DOWNLOAD_BYTES: number;

/** The kernel a files call reaches: by id, a session's (409 idle before its first cell), or the owner's (of mode, when it has several). */
export type FileTarget =
  | { kernelId: string; owner?: undefined; session?: undefined }
  | { session: string; kernelId?: undefined; owner?: undefined; mode?: undefined }
  | { owner: string; mode?: string; kernelId?: undefined; session?: undefined };
/** What uploadFile sends: bytes, a string (UTF-8), or a stream of bytes. */
export type UploadData = Buffer | Uint8Array | string | Readable | AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
/** A file path as the files endpoints take it: one URL segment. */
export function filePath(path: string): string;

export interface ClientOptions {
  /** The daemon's Unix socket (default: as the CLI, defaultSocket()). */
  socket?: string;
  /** The daemon's network API instead, `https://host:port`. */
  url?: string;
  /** Sent as `Authorization: Bearer <token>` (refused over plain http:). */
  token?: string;
  /** TLS: the CA to trust, and a client certificate and its key (PEM). */
  ca?: string | Buffer | Array<string | Buffer>;
  cert?: string | Buffer;
  key?: string | Buffer;
  /** Bounds every request but execute/stream (default 60000). */
  timeoutMs?: number;
  /** Bounds one JSON answer or stream event (default 16 MiB). */
  maxLineBytes?: number;
}

export interface ExecuteOptions {
  owner?: string;
  mode?: string;
  interpreter?: string;
  cwd?: string;
  tools?: string[];
  reset?: boolean;
  /** `"30s"`, `"2m"` or seconds. */
  timeout?: string | number;
  passthrough?: string[];
  limits?: Limits;
  maxToolCalls?: number;
  /** An explicit session's id (createSession): its owner, mode, tools and env apply. */
  session?: string;
  /** Environment values for this cell only (masked in output when 8 bytes or longer). */
  env?: Record<string, string>;
  /** The result lists the files the cell wrote under this dir (relative to the working dir). */
  outputsDir?: string;
  /** Aborting closes the connection, which interrupts the cell. */
  signal?: AbortSignal;
}

export interface SessionOptions {
  owner?: string;
  mode?: string;
  interpreter?: string;
  cwd?: string;
  /** The session's tool set, fixed for its life. */
  tools?: string[];
  /** Environment values of the session's kernel for its life. */
  env?: Record<string, string>;
}

export interface ExecuteCallbacks {
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  onDisplay?: (display: Display) => void;
  /** Its value (a string as is, else JSON) answers the call; a throw raises ToolError in the cell. */
  onToolCall?: (call: ToolCall) => unknown | Promise<unknown>;
}

export class APIError extends Error {
  readonly status: number;
  readonly code: ErrorCode | string;
  readonly apiMessage: string;
  /** Retry-After in seconds (429 quota, 503 capacity). */
  readonly retryAfter: number | undefined;
}
export class DaemonUnavailable extends Error {
  readonly where: string;
}
export class ProtocolError extends Error {}

export function defaultSocket(env?: Record<string, string | undefined>): string;
export function toolResultText(value: unknown): string;

export class Client {
  constructor(opts?: ClientOptions);
  close(): void;
  execute(code: string, opts?: ExecuteOptions & ExecuteCallbacks): Promise<Result>;
  stream(code: string, opts?: ExecuteOptions): AsyncGenerator<StreamEvent, void, undefined>;
  answerToolCall(id: string, answer: ToolAnswer): Promise<ToolAnswered>;
  interrupt(kernelId: string): Promise<InterruptResponse>;
  interruptOwner(owner: string, mode?: string): Promise<InterruptResponse>;
  variables(kernelId: string): Promise<Variables>;
  variablesByOwner(owner: string, mode?: string): Promise<Variables>;
  createSession(opts?: SessionOptions): Promise<SessionInfo>;
  sessions(owner?: string): Promise<SessionInfo[]>;
  session(id: string): Promise<SessionInfo>;
  deleteSession(id: string): Promise<SessionDeleted>;
  restartSession(id: string): Promise<SessionRestarted>;
  interruptSession(id: string): Promise<InterruptResponse>;
  sessionVariables(id: string): Promise<Variables>;
  kernels(): Promise<KernelList>;
  kill(kernelId: string): Promise<KillResponse>;
  shutdown(owner: string): Promise<ShutdownResponse>;
  health(): Promise<Health>;
  spill(kernelId: string, name: string, maxBytes?: number): Promise<string>;
  metrics(): Promise<string>;
  settings(): Promise<Settings>;
  /** `"ready"`, else it rejects with an APIError (code `draining` or `closed`). */
  ready(): Promise<NodeState>;
  drainStatus(): Promise<DrainStatus>;
  /** Without onProgress: the status at once (202); with it: each change, then the last status. */
  drain(onProgress?: (status: DrainStatus) => void): Promise<DrainStatus>;
  uploadFile(path: string, data: UploadData, target: FileTarget): Promise<FileWritten>;
  openFile(path: string, target: FileTarget): Promise<{ size: number; stream: Readable }>;
  downloadFile(path: string, target: FileTarget, maxBytes?: number): Promise<Buffer>;
  downloadFileTo(path: string, dest: Writable, target: FileTarget): Promise<number>;
  listFiles(dir: string, target: FileTarget): Promise<FileListing>;
  deleteFile(path: string, target: FileTarget): Promise<void>;
}
