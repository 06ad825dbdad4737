# kernpool daemon configuration (HCL). Every setting is optional; the values
# below are the built-in defaults unless a comment says otherwise.
# Command-line flags of `kernpool serve` override this file.
# Reference: docs/config.md.

# What kernels are promised (docs/config.md, "isolation"):
#   "sandbox"  every kernel gets everything configured below (its own uid,
#              its cgroup limits, its namespaces); `serve` refuses to start,
#              naming what is missing and the fix, when any of it cannot be
#              applied on this host.
#   "process"  the explicit degraded mode: kernels get what the host offers
#              and may run as the daemon's own uid, so they can read each
#              other's files and signal each other. Also --isolation=process.
isolation = "sandbox"

# Unix socket of the API. Default: $KERNPOOL_SOCKET, else
# /run/kernpool/kernpool.sock (root), $XDG_RUNTIME_DIR/kernpool/kernpool.sock,
# or /tmp/kernpool-<uid>/kernpool.sock.
# socket = "/run/kernpool/kernpool.sock"

# Kernel staging dirs live in <state_dir>/kernels/<id>.
# state_dir = "/run/kernpool/state"

log_level = "info"   # trace, debug, info, warn, error
log_json  = false    # one JSON object per log line

# Default python3 for requests that name none. Default: the first python3 on
# PATH; a pyenv-style shim is resolved once, at start, to the real binary.
# interpreter = "/usr/bin/python3"

idle_timeout      = "30m"   # reap kernels idle this long
cell_timeout      = "5m"    # a cell's timeout unless the request sets one
max_cell_timeout  = "1h"    # the largest timeout a request may ask for
max_kernels       = 64      # live kernels across owners; LRU eviction beyond
max_tool_calls    = 50      # tool-call budget of one cell
tool_call_timeout = "2m"    # how long a streamed tool call waits for its answer
drain_grace       = "10s"   # how long running cells may finish on SIGTERM

# Operations (docs/ops.md).
# socket_group = "kernpool"   # chgrp the API socket (0660) to this group
# metrics_listen = "127.0.0.1:9464" # also serve GET /metrics on TCP (the socket always does)
max_kernels_per_owner          = 0  # one owner's live kernels (0: unlimited); over it: HTTP 429
max_cells_per_minute_per_owner = 0  # one owner's cells per minute (0: unlimited); over it: HTTP 429
# audit_log      = "/var/log/kernpool/audit.log" # one JSON line per cell
# audit_code     = false      # true: the code itself, not only its size and SHA-256
# audit_max_size = "100MiB"   # rotate before the file grows past this
# audit_keep     = 5          # rotated files kept (audit.log.1 is the newest)

# Checkpoints of profiles with persist = true (docs/design.md, "Lossless eviction").
checkpoint_max_bytes_per_owner = "256MiB" # one owner's checkpoints together; over it: refused with a note
checkpoint_retention           = "24h"    # older checkpoints are removed and never restored
checkpoint_timeout             = "1m"     # bounds one save or one restore
checkpoint_idle                = "30s"    # save an idle persist kernel in the background (0: off)
# Shared store: every daemon with the same store restores an owner another saved.
# Credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials.
# checkpoint_store            = "s3://kernpool-checkpoints/prod" # "" (default): <state_dir>/checkpoints
# checkpoint_store_endpoint   = "https://minio.internal:9000"    # default AWS_ENDPOINT_URL, else Amazon S3
# checkpoint_store_allow_http = false                            # true: accept a plain http endpoint

# Child environment (see docs/config.md for the scrubbing rules).
env {
  passthrough = []          # names every kernel keeps, e.g. ["HTTP_PROXY"]
  # refuse = ["OPENAI_API_KEY", "*_API_KEY"]  # default: envscrub's provider list
}

# Output pipeline: redaction and caps.
output {
  redact_patterns = true    # exact scrubbed values are masked even when false
  inline_cap      = 50000   # bytes of stdout returned inline
  stderr_cap      = 10000   # bytes of stderr returned inline
  spill_cap       = 5000000 # bytes of full stdout kept in the spill file
  # spill_quota   = "20MB"  # bytes one kernel's spill files hold together (default 4 x spill_cap; oldest go first)
}

# One cgroup per kernel under a pool-owned, marked parent.
cgroup {
  # Default: "kernpool-<hash of the state dir>", so that two daemons never
  # share a parent. Also --cgroup-parent NAME.
  # parent = "kernpool"
  enabled = true
}

# As root, kernels run as unprivileged uids from this range.
users {
  enabled   = true
  uid_range = "60000-60999"
  per_owner = false         # true: one stable uid per owner
}

# Resource profiles. A request's mode selects the profile of its name, else
# "default". `kernpool serve --memory-max/--pids-max/--cpu-max` override the
# default profile.
profile "default" {
  memory_max      = "512MiB"
  memory_swap_max = "0"     # no swap beyond memory
  pids_max        = 256
  cpu_max         = 1.0     # cores
  cpu_weight      = 100
  passthrough     = []
  network         = false   # true: the host network; false: own netns, only loopback
  tmp_size        = "64MiB" # each private tmpfs: /tmp, /var/tmp, /dev/shm, /run/lock, staging (counts as memory)
  spares          = 2       # kernels started ahead for new owners (count toward max_kernels)
  preload         = []      # modules every kernel imports before its first cell, e.g. ["pandas"]
  persist         = false   # true: evicted, reaped or drained kernels keep their variables
  memory_merge    = false   # true: idle kernels share identical pages (KSM); weakens isolation, see docs/design.md
}

# An example of a tighter mode (not a default).
profile "untrusted" {
  memory_max    = "128MiB"
  pids_max      = 32
  cpu_max       = 0.5
  network       = false
  tmp_size      = "16MiB"
  pty_max       = 4         # ptys of its own devpts (default 16)
}

# Per-request limit overrides may not exceed these.
ceiling {
  memory_max = "4GiB"
  pids_max   = 4096
  cpu_max    = 2.0
}

# The network listener (docs/fleet.md): the same API over TLS for a router
# or gateway on other hosts. Off by default; uncomment to serve it.
# listen        = "10.0.0.5:8443"
# tls_cert      = "/etc/kernpool/tls/node.pem"
# tls_key       = "/etc/kernpool/tls/node-key.pem"
# tls_client_ca = "/etc/kernpool/tls/clients-ca.pem"
# listen_max_conns        = 256
# listen_max_header_bytes = "64KiB"
# listen_header_timeout   = "10s"
# listen_idle_timeout     = "2m"
# drain_on_term           = true   # SIGTERM drains: persist kernels saved
#
# A fleet (docs/fleet.md, "The router"): the node publishes a heartbeat to
# Redis, where `kernpool router` keeps its owner records. A router reads
# this same file (listen, tls_*, token and client_cert blocks, fleet_*).
# fleet_redis           = "redis://10.0.0.2:6379/0"   # password: $KERNPOOL_FLEET_REDIS_PASSWORD
# node_name             = "node-a"
# advertise_url         = "https://10.0.0.5:8443"
# fleet_heartbeat       = "1s"
# fleet_node_token_file = "/etc/kernpool/node.token"    # router only
# fleet_node_ca         = "/etc/kernpool/tls/ca.pem"    # router only
#
# token "gateway-acme" {   # kernpool token gateway-acme --owner-prefixes acme/
#   sha256         = "<the token's SHA-256, hex>"
#   owner_prefixes = ["acme/"]
# }
# client_cert "router.internal" {   # a client certificate's subject CN
#   admin = true
# }
