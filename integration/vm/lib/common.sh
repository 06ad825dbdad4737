# shellcheck shell=bash
# Shared helpers of integration/vm/run and integration/vm/box: logging,
# apt installs, cache locations. Sourced, never executed.

# IMAGE_VERSION is the cache key of the guest image: bump it whenever the
# image recipe (packages, trimming, loader modules, loader init) changes.
IMAGE_VERSION=4

# DEBIAN_SUITE is the guest's Debian release (same as the hosts').
DEBIAN_SUITE=${KERNPOOL_VM_SUITE:-bookworm}

vm_log() { printf '[vm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
vm_die() { vm_log "FATAL: $*"; exit 2; }

# now_s prints a monotonic-enough timestamp in seconds with decimals.
now_s() { date +%s.%N; }
# elapsed START prints the seconds since START with one decimal.
elapsed() { awk -v a="$1" -v b="$(now_s)" 'BEGIN{printf "%.1f", b-a}'; }

# need_packages installs the Debian packages that provide the given commands
# when one is missing. Arguments are "command:package" pairs; a command
# given as an absolute path is checked for existence. apt-get update
# runs at most once per invocation.
APT_UPDATED=0
need_packages() {
	local pair cmd pkg missing=()
	for pair in "$@"; do
		cmd=${pair%%:*} pkg=${pair#*:}
		if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -e "$cmd" ]; then
			missing+=("$pkg")
		fi
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || vm_die "missing packages ${missing[*]} and not root to install them"
	vm_log "installing ${missing[*]}"
	if [ "$APT_UPDATED" -eq 0 ]; then
		apt-get update -q >/dev/null || vm_die "apt-get update failed"
		APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
		vm_die "apt-get install ${missing[*]} failed"
}

# debian_mirror prints the Debian mirror the host's apt uses (one-line or
# deb822 format), so debootstrap works wherever apt does.
debian_mirror() {
	if [ -n "${KERNPOOL_VM_MIRROR:-}" ]; then
		echo "$KERNPOOL_VM_MIRROR"
		return
	fi
	local m
	m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '
			/^deb[[:space:]]/ && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }
			/^URIs:/ && $0 ~ /debian/ && $0 !~ /security/ { print $2; exit }')
	echo "${m:-http://deb.debian.org/debian}"
}
