# shellcheck shell=bash
# Boots the guest under qemu and brings the results back.

# kvm_works boots the loader alone under KVM with kernpool.probe and checks
# that it reached userspace: on the PVM-nested hosts /dev/kvm exists but a
# stock kernel stalls or dies there, so existence proves nothing. The verdict
# is cached per host boot.
kvm_works() {
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
	local stamp verdict
	stamp="$CACHE_DIR/kvm-probe.$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)"
	if [ -f "$stamp" ]; then
		verdict=$(cat "$stamp")
	else
		verdict=no
		if timeout -k 2 20 qemu-system-x86_64 -accel kvm -cpu host -m 256 -nodefaults -no-user-config \
			-display none -no-reboot -serial stdio -kernel "$IMG_DIR/vmlinux" -initrd "$IMG_DIR/loader.cpio.gz" \
			-append "console=ttyS0 panic=-1 kernpool.probe" </dev/null 2>/dev/null | grep -q KERNPOOL-PROBE-OK; then
			verdict=yes
		fi
		echo "$verdict" >"$stamp"
	fi
	[ "$verdict" = yes ]
}

pick_accel() {
	ACCEL=${KERNPOOL_VM_ACCEL:-auto}
	case $ACCEL in
	kvm | tcg) ;;
	auto) if kvm_works; then ACCEL=kvm; else ACCEL=tcg; fi ;;
	*) vm_die "KERNPOOL_VM_ACCEL must be auto, kvm or tcg, not $ACCEL" ;;
	esac
	vm_log "accelerator: $ACCEL"
}

# KERNEL_DEBUG_ARGS make a wedged guest say where it is instead of going
# silent: oopses and soft lockups panic (panic=-1 + -no-reboot end qemu),
# and the NMI the host injects when the heartbeat stops panics with every
# CPU's backtrace (panic_print=0x40). The hard-lockup detector needs a PMU,
# which TCG lacks; the host-side stall dump (lib/monitor.py) stands in.
KERNEL_DEBUG_ARGS="softlockup_panic=1 softlockup_all_cpu_backtrace=1 panic_on_oops=1 unknown_nmi_panic=1 panic_print=0x40 nmi_watchdog=1 printk.time=1"

# go_seconds DURATION prints a Go duration (90s, 15m, 1h30m) in whole seconds.
go_seconds() {
	local d=$1 total=0 n u
	[ "$d" = 0 ] && d="" # go test's "no timeout"
	while [[ $d =~ ^([0-9]+)(h|m|s)(.*)$ ]]; do
		n=${BASH_REMATCH[1]} u=${BASH_REMATCH[2]} d=${BASH_REMATCH[3]}
		case $u in h) total=$((total + n * 3600)) ;; m) total=$((total + n * 60)) ;; s) total=$((total + n)) ;; esac
	done
	[ -z "$d" ] || vm_die "KERNPOOL_VM_TEST_TIMEOUT: cannot read $1 (want e.g. 15m, 1h30m)"
	echo "$total"
}

# vm_timeout prints the hard limit of the VM: KERNPOOL_VM_TIMEOUT, or by
# default 2400 s or, when more, every binary's -test.timeout plus 600 s to
# boot and power off. Each binary is bounded by its own timeout and a wedged
# guest by the stall dump; this limit only stops a VM beyond both, so it
# must never cut off a run whose binaries all stay inside theirs (on a
# loaded host the v1 suite at 30 min per binary outran 2400 s).
vm_timeout() {
	local n per
	if [ -n "${KERNPOOL_VM_TIMEOUT:-}" ]; then
		echo "$KERNPOOL_VM_TIMEOUT"
		return
	fi
	n=$(grep -c . "$PAYLOAD/tests.list" || true)
	per=$(go_seconds "${KERNPOOL_VM_TEST_TIMEOUT:-15m}")
	echo $((n * per + 600 > 2400 ? n * per + 600 : 2400))
}

# boot_vm runs the VM to completion, streaming its console, under a hard
# timeout. Returns qemu's status (124 on timeout). The guest's second serial
# port carries the test daemons' logs to $OUT_DIR/daemon-stream.log; the
# monitor socket serves the stall dump.
boot_vm() {
	local cpu=max t0 rc accel=$ACCEL limit
	limit=$(vm_timeout)
	[ "$ACCEL" = kvm ] && cpu=host
	# KERNPOOL_VM_TCG_THREAD=single: one host thread for all vCPUs (tells
	# a multi-threaded-TCG artefact from a guest-kernel one).
	[ "$ACCEL" = tcg ] && [ -n "${KERNPOOL_VM_TCG_THREAD:-}" ] && accel="tcg,thread=$KERNPOOL_VM_TCG_THREAD"
	t0=$(now_s)
	vm_log "booting ($ACCEL, ${KERNPOOL_VM_CPUS:-2} CPUs, ${KERNPOOL_VM_MEM:-2048} MiB, cgroup $CGROUP_MODE, hard limit $limit s)"
	MONITOR="$OUT_DIR/qemu.monitor"
	rm -f "$MONITOR"
	set +e
	timeout -k 10 "$limit" qemu-system-x86_64 -accel "$accel" -cpu "$cpu" \
		-smp "${KERNPOOL_VM_CPUS:-2}" -m "${KERNPOOL_VM_MEM:-2048}" \
		-nodefaults -no-user-config -display none -no-reboot -serial stdio \
		-serial "file:$OUT_DIR/daemon-stream.log" -monitor "unix:$MONITOR,server,nowait" \
		-kernel "$IMG_DIR/vmlinux" -initrd "$IMG_DIR/loader.cpio.gz" \
		-append "console=ttyS0 panic=-1 loglevel=${KERNPOOL_VM_LOGLEVEL:-4} $KERNEL_DEBUG_ARGS ${KERNPOOL_VM_KERNEL_ARGS:-}" \
		-drive "file=$IMG_DIR/rootfs.img,format=raw,if=virtio,snapshot=on" \
		-drive "file=$PAYLOAD.img,format=raw,if=virtio" </dev/null 2>"$OUT_DIR/qemu.stderr" |
		console_tee "$t0" "$OUT_DIR/console.log"
	rc=${PIPESTATUS[0]}
	set -e
	VM_SECONDS=$(elapsed "$t0")
	BOOT_SECONDS=$(cat "$OUT_DIR/boot.seconds" 2>/dev/null || echo "?")
	[ "$rc" -eq 124 ] && vm_log "VM hit the hard timeout of $limit s"
	[ -s "$OUT_DIR/qemu.stderr" ] && sed 's/^/qemu: /' "$OUT_DIR/qemu.stderr" >&2
	[ -s "$OUT_DIR/stall.txt" ] && vm_log "the guest stalled: vCPU dump in $OUT_DIR/stall.txt"
	return "$rc"
}

# console_tee T0 LOG copies the console to stdout and LOG and notes when the
# first test started (the boot time). The guest prints a heartbeat every
# 30 s; after KERNPOOL_VM_STALL s (150) of silence the guest is wedged:
# dump the vCPUs and inject an NMI (it panics with backtraces); after a
# second silence, quit qemu.
console_tee() {
	local t0=$1 log=$2 line seen=0 stalls=0 st
	while :; do
		IFS= read -r -t "${KERNPOOL_VM_STALL:-150}" line
		st=$?
		if [ $st -eq 0 ]; then
			line=${line%$'\r'}
			printf '%s\n' "$line"
			printf '%s\n' "$line" >>"$log"
			if [ $seen -eq 0 ] && [[ $line == "=== VM-RUN "* ]]; then
				seen=1
				elapsed "$t0" >"$OUT_DIR/boot.seconds"
			fi
			continue
		fi
		[ $st -gt 128 ] || break # EOF: qemu exited
		stalls=$((stalls + 1))
		vm_log "no console output for ${KERNPOOL_VM_STALL:-150} s (stall $stalls)"
		if [ $stalls -eq 1 ]; then
			# The guest wrote its kallsyms to the payload disk at boot (synced).
			debugfs -R "dump /results/kallsyms $OUT_DIR/kallsyms" "$PAYLOAD.img" >/dev/null 2>&1
			/usr/bin/python3 "$VM_DIR/lib/monitor.py" "$MONITOR" "$OUT_DIR/kallsyms" stall >>"$OUT_DIR/stall.txt" 2>&1
			grep -E '^CPU |^---' "$OUT_DIR/stall.txt" | head -12 >&2
		else
			/usr/bin/python3 "$VM_DIR/lib/monitor.py" "$MONITOR" - quit >/dev/null 2>&1
		fi
	done
}

# collect_results QEMU_RC reads the results off the payload disk, prints a
# summary and returns 0 (all passed), 1 (a test failed) or 2 (harness).
collect_results() {
	local qrc=$1 status=0 name dir rc secs
	debugfs -R "rdump /results $OUT_DIR" "$PAYLOAD.img" >/dev/null 2>&1 || true
	echo
	echo "==================== kernpool VM suite ($CGROUP_LABEL, $ACCEL) ===================="
	[ -f "$OUT_DIR/results/guest.info" ] && sed 's/^/  /' "$OUT_DIR/results/guest.info"
	VM_LAG=$(cat "$OUT_DIR/results/vm.lag" 2>/dev/null || echo "?")
	echo "  worst vCPU lag: $VM_LAG s (a SCHED_FIFO 1 s sleep in the guest woke this late; host load now $(cut -d' ' -f1-3 /proc/loadavg))"
	while read -r name dir; do
		[ -n "$name" ] || continue
		rc=$(cat "$OUT_DIR/results/$name.rc" 2>/dev/null || echo "none")
		secs=$(cat "$OUT_DIR/results/$name.seconds" 2>/dev/null || echo "?")
		if [ "$rc" = 0 ] && [ ! -f "$OUT_DIR/results/$name.leak" ]; then
			printf '  PASS  %-14s %6s s\n' "$name" "$secs"
		else
			status=1
			printf '  FAIL  %-14s %6s s  (exit %s%s)\n' "$name" "$secs" "$rc" \
				"$([ -f "$OUT_DIR/results/$name.leak" ] && echo ", leaked processes")"
			grep -E -- '^\s*--- FAIL|^panic:|^FAIL' "$OUT_DIR/results/$name.log" 2>/dev/null | head -30 | sed 's/^/          /'
		fi
	done <"$PAYLOAD/tests.list"
	if [ -s "$OUT_DIR/build.failures" ]; then
		status=1
		sed 's/^/  BUILD FAIL  /' "$OUT_DIR/build.failures"
	fi
	if [ ! -f "$OUT_DIR/results/.complete" ]; then
		echo "  HARNESS: the VM did not finish the run (qemu exit $qrc); see $OUT_DIR/console.log"
		status=2
	fi
	echo "  logs: $OUT_DIR/results/<name>.log"
	echo "======================================================================================="
	return "$status"
}
