// Generated from docs/openapi.json by scripts/gen-types.mjs: do not edit.

/** The body of POST /v1/execute. Unknown fields are refused (400, the message lists the known ones). */
export interface ExecuteRequest {
  /** The cell's Python source (empty is a valid no-op cell). */
  code?: string;
  /** Tenant; default "default". */
  owner?: string;
  /** Selects the profile of that name; absent or "" means "default". A mode no profile defines is 400. */
  mode?: string;
  /** Absolute path of python3; default: the daemon's. */
  interpreter?: string;
  /** Absolute, existing working dir; default: the kernel's staging dir. */
  cwd?: string;
  /** The kernel's tool set (part of its key). */
  tools?: Array<string>;
  /** Discard the kernel's state first (kernel.state_reset is then true). */
  reset?: boolean;
  timeout?: Duration;
  /** Extra environment variables for a new kernel (refusal list applies); other ones than the live kernel's are 409 unless reset is set. */
  passthrough?: Array<string>;
  limits?: Limits;
  /** This cell's tool-call budget (default 50). */
  max_tool_calls?: number;
  /** Stream the cell's output, displays and tool calls as NDJSON events. */
  stream?: boolean;
  /** An explicit session's id (POST /v1/sessions): the cell runs in that session's kernel, with its owner, mode, interpreter, cwd, tools and env. A field the request also names must equal the session's (409 session_mismatch; for tools that is the tool-set rule: a session's tool set is fixed). Another owner's session is 404. */
  session?: string;
  /** Environment values for this cell only: set in os.environ before it runs, the previous values restored when it ends. Environment values: names [A-Za-z_][A-Za-z0-9_]* (at most 128 bytes), at most 64 names and 32 KiB of names and values together (config sessions { max_env_names, max_env_bytes }). KERNPOOL_*, PYTHON*, LD_*, DYLD_*, HOME, TMPDIR, TMP and TEMP are refused, and so are names the refusal list refuses or secret-shaped names (KEY, TOKEN, SECRET, ...) the profile's passthrough does not list (400). Every value of 8 bytes or more is masked (***) in the kernel's output from then on. */
  env?: Record<string, unknown>;
  /** A dir relative to the kernel's working dir ('.' the working dir): the result lists the regular files the cell created or modified under it (outputs), walked as the files API reads (as the kernel's uid, no symlink followed), at most 10000 entries and 16 levels deep. */
  outputs_dir?: string;
}

/** The cell timeout: a Go duration string ("30s", "2m") or a number of seconds (30, 0.5); default the daemon's cell_timeout, clamped to max_cell_timeout. */
export type Duration = string | number;

/** Per-request overrides within the operator's ceiling (over it: 400 naming the field and the ceiling). Other limits than the live kernel's are 409 unless reset is set. Unknown members are refused. */
export interface Limits {
  /** Memory cap: bytes or a size such as "64MiB" (as in the config). */
  memory_max?: number | string;
  /** Task cap. */
  pids_max?: number;
  /** CPU quota in cores. */
  cpu_max?: number;
}

/** A settled cell. Fields a newer daemon adds should be ignored by clients. */
export interface Result {
  /** The cell's outcome. */
  status: "success" | "error" | "timeout" | "interrupted";
  /** Cleaned output; for an exception stdout + "\n--- stderr ---\n" + stderr + traceback. */
  output: string;
  /** 0, 1 for an exception, -1 when the kernel was killed, n of sys.exit(n). */
  exit_code: number;
  /** Why, for a non-success status. */
  error?: string;
  /** The cell's stdout alone, cleaned and capped as in output (absent when empty). */
  stdout?: string;
  /** The cell's stderr alone, without the traceback, cleaned and capped as in output (absent when empty). */
  stderr?: string;
  exception?: Exception;
  duration_seconds: number;
  tool_calls_made: number;
  kernel: KernelResult;
  stdout_truncated?: boolean;
  stdout_bytes_total?: number;
  stderr_truncated?: boolean;
  stderr_bytes_total?: number;
  /** Where the full (redacted) stdout was saved when it was capped. */
  stdout_spill_path?: string;
  /** Its name for GET /v1/kernels/{id}/spill/{name}. */
  stdout_spill_name?: string;
  /** Says where the full output went, or how many displays were dropped. */
  warning?: string;
  /** On the first result after a restore (persist = true): the names the checkpoint brought back. */
  restored?: Array<string>;
  /** With restored: the names that did not pickle at the save or unpickle at the restore; warning names them too. */
  lost?: Array<string>;
  displays?: Array<Display>;
  /** With outputs_dir: the regular files the cell created or modified there (paths relative to the working dir, sorted; at most 100, each path at most 1024 bytes); download them with GET /v1/kernels/{id}/files/{path}. */
  outputs?: Array<FileEntry>;
  /** More files changed than outputs lists (over 100, a path over 1024 bytes, or a tree over the walk's bounds). */
  outputs_truncated?: boolean;
}

/** The exception a cell raised, as Jupyter's error message carries it: the concatenation of traceback is the traceback text in error and output. kernpool's own frames never appear; the kernel's staging dir is written <kernel-dir>. Each part is redacted and capped at output.stderr_cap, the entries together at 64 KiB. */
export interface Exception {
  /** The exception's class name. */
  ename: string;
  /** Its str(). */
  evalue: string;
  /** A header, one entry per frame, the exception line (chained exceptions likewise). */
  traceback: Array<string>;
}

/** The kernel that ran the cell; isolation is absent only when the cell was interrupted before a kernel was reached. */
export interface KernelResult {
  id: string;
  mode: string;
  reused: boolean;
  execution_count: number;
  state_reset: boolean;
  /** The cell called sys.exit: the kernel is gone. */
  ended: boolean;
  /** The kernel lives on with its variables (false when it was killed, ended or replaced). */
  state_preserved: boolean;
  /** The kernel's memory limit killed it during this cell. */
  oom_killed?: boolean;
  /** This is the key's first cell on a new kernel that restored the previous kernel's checkpoint (persist = true); see restored and lost. */
  restored?: boolean;
  isolation?: Isolation;
}

/** What was enforced for a kernel (docs/api.md). */
export interface Isolation {
  mode: "sandbox" | "process";
  /** The uid the kernel runs as (-1 on Windows). */
  uid: number;
  /** The Linux namespaces the kernel has of its own ("mnt", "ipc", "uts", "net", "pid"); empty when it shares the host's. */
  namespaces: Array<string>;
  seccomp: boolean;
  /** Bytes as the cgroup has it; 0: none. */
  memory_max: number;
  /** 0: none. */
  pids_max: number;
  /** Cores; 0: none. */
  cpu_max: number;
  /** The kernel reaches the host's network (false: only its own loopback). */
  network: boolean;
  /** The kernel's pages are open to the host's samepage merging with other merging kernels, whose address layout and hash seed it shares (profile memory_merge; docs/design.md, "Sharing idle kernels' pages"). */
  memory_merge: boolean;
  /** What supervises the kernel's interpreter as its init, as the init reported it: reaper (the init exec'd into a few hundred bytes of machine code) or go (the init's Go fallback, about 1 MiB more per kernel; kernpool doctor says why). Absent without the init step. */
  supervisor?: "reaper" | "go";
}

/** One rich display (IPython's display_data). */
export interface Display {
  /** Mime type to value; binary types (image/png, image/jpeg) base64, text types cleaned and redacted. */
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
}

export interface ToolCall {
  /** Answer the call by this id. */
  id: string;
  /** The tool's name (one of the kernel's tool set). */
  tool: string;
  /** The call's arguments as the cell passed them (usually an object). */
  args: unknown;
}

/** Exactly one of result and error. */
export interface ToolAnswer {
  /** The tool's result as the cell sees it (JSON-decoded by the stub when it is JSON). */
  result?: string;
  /** Makes the call raise kernpool_tools.ToolError in the cell with this message. */
  error?: string;
}

export interface ToolAnswered {
  /** The call's id. */
  answered: string;
}

/** One NDJSON line of a streaming execute answer. */
export type StreamEvent = StdoutEvent | StderrEvent | DisplayEvent | ToolCallEvent | ResultEvent | ErrorEvent;

/** Output the cell wrote. */
export interface StdoutEvent {
  event: "stdout";
  /** The next chunk of stdout, ANSI-stripped and redacted; whole lines, at most output.inline_cap in all. */
  text: string;
}

/** Error output the cell wrote. */
export interface StderrEvent {
  event: "stderr";
  /** The next chunk of stderr, cleaned like stdout; at most output.stderr_cap in all. */
  text: string;
}

/** A display, as it happens (the result carries them all again). */
export interface DisplayEvent {
  event: "display";
  display: Display;
}

/** A tool call: answer it on POST /v1/tool-calls/{call.id} from another connection. */
export interface ToolCallEvent {
  event: "tool_call";
  call: ToolCall;
}

/** The last line of a stream that succeeded. */
export interface ResultEvent {
  event: "result";
  result: Result;
}

/** The last line of a stream that failed after it began. */
export interface ErrorEvent {
  event: "error";
  error: string;
  code: ErrorCode;
}

export interface KernelList {
  kernels: Array<KernelInfo>;
  /** Saved states of stopped kernels of profiles with persist = true, sorted by owner, mode, then cwd. */
  checkpoints: Array<CheckpointInfo>;
}

/** One stored checkpoint (docs/design.md, "Lossless eviction"). */
export interface CheckpointInfo {
  owner: string;
  mode: string;
  interpreter: string;
  cwd: string;
  tools: Array<string>;
  /** Size in the store. */
  bytes: number;
  /** Names saved. */
  names: number;
  /** Names that did not pickle. */
  lost: number;
  reason: "evicted" | "idle" | "pool closed" | "saved while idle";
  /** The stored generation: each save of a key writes the next one, and a store never lets an older one replace a newer one. */
  generation: number;
  saved_at: string;
  expires_at: string;
  /** Why the state was not saved (over the owner's checkpoint cap, a failed save); only a note is kept. */
  refused?: string;
}

/** One live kernel. */
export interface KernelInfo {
  id: string;
  owner: string;
  mode: string;
  interpreter: string;
  /** "": the kernel's staging dir. */
  cwd: string;
  tools: Array<string> | null;
  pid: number;
  uid: number;
  busy: boolean;
  execution_count: number;
  idle_seconds: number;
  started_at: string;
  isolation: Isolation;
  /** From the kernel's cgroup; absent without one. */
  memory_current_bytes?: number;
  memory_peak_bytes?: number;
  pids?: number;
  cpu_seconds?: number;
  /** Output the kernel wrote while none of its cells ran (never delivered). */
  dropped_output_bytes: number;
  /** A warm spare waiting for a new key (owner empty, idle_seconds since its start); absent for owners' kernels. */
  spare?: boolean;
  /** The explicit session the kernel serves; absent for implicit keying. */
  session?: string;
}

export interface KillResponse {
  /** The kernel's id. */
  killed: string;
}

export interface InterruptResponse {
  /** The kernels whose cells were interrupted. */
  interrupted: Array<string>;
}

export interface ShutdownResponse {
  owner: string;
  killed: number;
}

export interface Variables {
  variables: Array<Variable>;
  total: number;
}

export interface Variable {
  name: string;
  type: string;
  /** At most 200 characters, redacted. */
  repr: string;
  /** len() for strings, bytes and builtin containers. */
  len?: number;
  /** nbytes, for objects with one (numpy arrays). */
  bytes?: number;
}

export interface Health {
  /** ok, or draining once a drain or shutdown began (kept for older clients; state tells them apart). */
  status: "ok" | "draining";
  version: string;
  kernels: number;
  /** What the daemon's wiring reports. */
  isolation: string;
  goroutines: number;
  pending_tool_calls: number;
  stats: PoolStats;
  state: NodeState;
  drain?: DrainStatus;
  /** The node's max_kernels. */
  max_kernels?: number;
  /** max_kernels minus live kernels (spares count as free), for a router weighing nodes by free capacity; absent when 0. */
  free_kernels?: number;
}

/** The pool's lifetime counters and current size. */
export interface PoolStats {
  kernels_live: number;
  kernels_busy: number;
  /** Evicted or reaped kernels whose checkpoint is being saved now, off the requests' path (not in kernels_live). */
  kernels_saving: number;
  kernels_started: number;
  spawn_failures: number;
  cells: number;
  evicted: number;
  reaped: number;
  resets: number;
  timeouts: number;
  interrupted: number;
  died: number;
  oom_killed: number;
  ended: number;
  killed: number;
  capacity_refusals: number;
  /** Warm spares ready now (not in kernels_live). */
  spares: number;
  /** Spares that became ready. */
  spares_started: number;
  /** Spares a new key took. */
  spares_claimed: number;
  /** Spares the max_kernels cap stopped. */
  spares_evicted: number;
  /** Kernels of persist profiles whose state was saved at their stop (an empty namespace counts). */
  checkpoints_saved: number;
  /** Kernels of persist profiles whose save failed or was refused. */
  checkpoints_failed: number;
}

/** The body of every error answer, 404 and 405 included. */
export interface Error {
  /** The message naming the problem. */
  error: string;
  code: ErrorCode;
}

/** bad_request 400, unauthorized 401, forbidden 403, not_found 404, method_not_allowed 405, request_timeout 408, conflict/idle/busy/interrupted/kernel_died/session_mismatch/not_regular/fenced 409, too_large 413, quota 429, spawn_failed/internal 500, not_supported 501, node_failed 502, capacity/closed/too_many_connections/draining/no_node 503, timeout 504, no_space 507. */
export type ErrorCode = "bad_request" | "not_found" | "method_not_allowed" | "request_timeout" | "conflict" | "idle" | "busy" | "too_large" | "quota" | "capacity" | "closed" | "too_many_connections" | "spawn_failed" | "internal" | "unauthorized" | "forbidden" | "draining" | "not_supported" | "session_mismatch" | "not_regular" | "no_space" | "fenced" | "no_node" | "node_failed" | "timeout" | "interrupted" | "kernel_died";

/** ready: takes cells. draining: a drain runs (cells refused with code draining). drained: the drain is over and the daemon exits. not_ready: the daemon stops without a drain (cells refused with code closed). */
export type NodeState = "ready" | "draining" | "drained" | "not_ready";

export interface DrainStatus {
  state: NodeState;
  /** When the drain began (absent before). */
  started_at?: string;
  /** Kernels still running or queueing a cell. */
  cells_running: number;
  /** saved + failed + remaining. */
  kernels_to_save: number;
  /** Persist kernels saved since the drain began. */
  saved: number;
  /** Persist kernels whose save failed or was refused (the daemon then exits 1). */
  failed: number;
  /** Persist kernels still to be saved. */
  remaining: number;
}

export interface ReadyResponse {
  state: NodeState;
  error?: string;
  code?: ErrorCode;
}

/** The configuration the running daemon uses (docs/config.md names each setting). */
export interface Settings {
  socket: string;
  state_dir: string;
  /** The default interpreter, as resolved at start. */
  interpreter: string;
  isolation: "sandbox" | "process";
  /** A Go duration string ("30s", "2m0s"). */
  idle_timeout: string;
  /** A Go duration string ("30s", "2m0s"). */
  cell_timeout: string;
  /** A Go duration string ("30s", "2m0s"). */
  max_cell_timeout: string;
  /** A Go duration string ("30s", "2m0s"). */
  tool_call_timeout: string;
  /** A Go duration string ("30s", "2m0s"). */
  drain_grace: string;
  max_kernels: number;
  max_tool_calls: number;
  cgroup_parent: string;
  cgroup_enabled: boolean;
  users: UserSettings;
  profiles: Record<string, unknown>;
}

export interface UserSettings {
  enabled: boolean;
  uid_first: number;
  uid_last: number;
  per_owner: boolean;
}

export interface ProfileSettings {
  memory_max: number;
  memory_swap_max: number;
  pids_max: number;
  cpu_max: number;
  cpu_weight: number;
  network: boolean;
  tmp_size: number;
  memory_merge: boolean;
  spares: number;
  preload: Array<string> | null;
  /** The largest file one upload may write into a kernel of the profile. */
  files_max_bytes: number;
}

/** The body of POST /v1/sessions. Unknown fields are refused (400). */
export interface SessionSpec {
  /** Tenant; default "default". */
  owner?: string;
  /** The profile; absent means "default". */
  mode?: string;
  /** Absolute path of python3; default: the daemon's. */
  interpreter?: string;
  /** Absolute, existing working dir; default: the kernel's staging dir. */
  cwd?: string;
  /** The session's tool set, fixed for its life. */
  tools?: Array<string>;
  /** Environment values of the session's kernel for its life (also after an eviction and restore). Environment values: names [A-Za-z_][A-Za-z0-9_]* (at most 128 bytes), at most 64 names and 32 KiB of names and values together (config sessions { max_env_names, max_env_bytes }). KERNPOOL_*, PYTHON*, LD_*, DYLD_*, HOME, TMPDIR, TMP and TEMP are refused, and so are names the refusal list refuses or secret-shaped names (KEY, TOKEN, SECRET, ...) the profile's passthrough does not list (400). Every value of 8 bytes or more is masked (***) in the kernel's output from then on. */
  env?: Record<string, unknown>;
}

/** One session. Its env values are never shown, only their names. */
export interface SessionInfo {
  /** The session id: "s" and 32 hex digits from a CSPRNG. */
  id: string;
  owner: string;
  mode: string;
  interpreter: string;
  /** "" for the kernel's staging dir. */
  cwd: string;
  tools: Array<string>;
  /** The names of the session's env, sorted. */
  env_names: Array<string>;
  created_at: string;
  last_used: string;
  /** The session's live kernel; absent before its first cell and after its kernel ended (evicted, reaped, crashed, restarted): its next cell starts one, restoring its checkpoint when the mode persists. */
  kernel_id?: string;
}

export interface SessionList {
  /** The sessions of the owners the credential may act for, sorted by owner then id. */
  sessions: Array<SessionInfo>;
}

export interface SessionDeleted {
  /** The session's id. */
  deleted: string;
}

export interface SessionRestarted {
  session: string;
  /** The kernel killed; "" when the session had none. */
  killed: string;
}

export interface FileEntry {
  /** The entry's name (a listing) or its path relative to the working dir (a result's outputs). */
  name: string;
  /** Bytes. */
  size: number;
  type: "file" | "dir" | "symlink" | "other";
  /** Last modification, UTC. */
  mtime: string;
}

export interface FileListing {
  /** The listed dir, relative to the working dir (empty: the working dir). */
  dir: string;
  entries: Array<FileEntry>;
  /** The dir holds more than 10000 entries; some are listed. */
  truncated: boolean;
}

export interface FileWritten {
  /** The path written, as requested. */
  path: string;
  /** Bytes written. */
  bytes: number;
}
