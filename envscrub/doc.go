// Package envscrub owns what crosses a kernel's boundary in either
// direction: the environment a kernel starts with (parity §1) and the output
// pipeline every byte of kernel output passes before it leaves the daemon
// (parity §2).
//
// # Environment
//
// A Scrubber judges each variable of the daemon's environment, in order:
//
//  1. passthrough (config, per mode, per request; exact name) keeps it,
//     unless the name is refused;
//  2. a name whose upper-cased form contains a secret substring (KEY TOKEN
//     SECRET PASSWORD CREDENTIAL PASSWD AUTH DSN WEBHOOK CREDS BEARER
//     APIKEY) is dropped;
//  3. a name starting with a safe prefix (case-sensitive; on Windows the
//     upper-cased name is compared too, so the mixed-case Path survives)
//     is kept;
//  4. on Windows the OS essentials (SYSTEMROOT, COMSPEC, ...) are kept,
//     compared upper-cased;
//  5. everything else is dropped.
//
// The refusal list (names and '*'/'?' globs, compared case-insensitively)
// is checked when passthrough is configured (New), when a request names
// one (CheckPassthrough) and again at every spawn (Build). A refused name
// never reaches a kernel by any rule. Names starting with KERNPOOL_ are
// reserved for the kernel's own variables and are always refused.
//
// Build also returns the values it scrubbed that are secret by name (rule 2)
// or refused, plus passwords embedded in URL-shaped values of other dropped
// variables (DATABASE_URL): the output pipeline masks those literal values
// wherever they appear.
//
// # Output
//
// A Pipeline makes one Filter per kernel (Filter, or ForKernel as the
// pool's seam, knowing that kernel's secrets). Filter.Clean applies, in order: invalid UTF-8 to U+FFFD, ANSI
// strip, exact-value masking, and (unless disabled) pattern
// redaction: provider token prefixes, NAME=value assignments whose name is
// secret, Authorization and API-key headers, quoted secret keys in JSON or
// Python dict dumps, Telegram bot tokens, PEM private keys, database DSN
// passwords, bare-token URL userinfo and JWTs. Filter.Finish (and
// FinishClipped, for streams the kernel kept as head and tail, whose tail
// is the real end) caps stdout
// and stderr and spills the full (already redacted) stdout to a 0640 file
// (within the kernel's spill quota).
//
// Every pass is a hand-written scanner gated on a cheap literal check; Go's
// RE2 has no look-around, so the reference's boundaries are emulated by
// hand. Clean is idempotent: its output is a fixed point of Clean.
//
// It is an adapter of the pool's seams and imports pool for them alone,
// using the pool's own types: *Scrubber is a pool.EnvBuilder, *Pipeline a
// pool.OutputFilterFactory whose filters return pool.CellOutput and finish
// pool.Clipped streams. README.md lists where kernpool deliberately
// differs from the reference.
package envscrub
