# shellcheck shell=bash
# Builds the payload disk (staged under the cache dir, whose leading dot
# keeps the copied sources out of go ./... patterns): the kernpool binary, static test binaries, the
# package sources (tests read testdata relative to their package), busybox,
# the guest init, the list of tests and the knobs passed into the guest.

# pkg_name ./pool/api -> pool_api (the binary and result file name).
pkg_name() { local p=${1#./}; p=${p%/...}; echo "${p//\//_}"; }

# build_payload DIR PKG... leaves DIR.img (ext4) and records build failures
# in $OUT_DIR/build.failures (one "name: reason" a line).
build_payload() {
	local dir=$1 t0 pkg name tags log
	shift
	t0=$(now_s)
	rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/src" "$dir/results"
	: >"$OUT_DIR/build.failures"
	: >"$dir/tests.list"
	export CGO_ENABLED=0
	vm_log "building kernpool and static test binaries"
	# kernpool-init beside kernpool, as installed: each kernel's init step.
	if ! (cd "$REPO" && go build -o "$dir/bin/" ./cmd/kernpool ./cmd/kernpool-init) >"$OUT_DIR/build-kernpool.log" 2>&1; then
		echo "kernpool: go build ./cmd/kernpool failed (see $OUT_DIR/build-kernpool.log)" >>"$OUT_DIR/build.failures"
	fi
	for pkg in "$@"; do
		name=$(pkg_name "$pkg")
		log="$OUT_DIR/build-$name.log"
		if [ ! -d "$REPO/${pkg#./}" ]; then
			echo "$name: package $pkg does not exist" >>"$OUT_DIR/build.failures"
			continue
		fi
		tags=""
		case $pkg in ./integration*) tags="-tags=integration" ;; esac
		if ! (cd "$REPO" && go test -c $tags -o "$dir/bin/$name.test" "$pkg") >"$log" 2>&1; then
			echo "$name: go test -c $tags $pkg failed (see $log)" >>"$OUT_DIR/build.failures"
			continue
		fi
		if [ ! -f "$dir/bin/$name.test" ]; then
			vm_log "$pkg has no tests; skipped"
			continue
		fi
		echo "$name ${pkg#./}" >>"$dir/tests.list"
	done
	cp /bin/busybox "$dir/bin/busybox"
	install -m 0755 "$VM_DIR/guest/guest-init" "$dir/guest-init"
	tar -C "$REPO" --exclude=.git --exclude=./integration/vm/.cache --exclude=./integration/vm/out --exclude=./integration/vm/out-v1 \
		--exclude='*.test' --exclude=./kernpool --exclude=./bin -cf - . | tar -C "$dir/src" -xf -
	write_guest_config "$dir/config.env"
	local mb
	mb=$(du -sm "$dir" | cut -f1)
	mkfs.ext4 -q -F -L kernpool-payload -d "$dir" "$dir.img" "$((mb + 256))M" ||
		vm_die "mkfs.ext4 of the payload disk failed"
	PAYLOAD_SECONDS=$(elapsed "$t0")
	vm_log "payload: $(wc -l <"$dir/tests.list") test binaries, ${mb} MB, built in $PAYLOAD_SECONDS s"
}

# write_guest_config FILE writes the knobs the guest sources, shell-quoted.
write_guest_config() {
	local f=$1 v
	{
		echo "export KERNPOOL_BIN=/payload/bin/kernpool"
		echo "export KERNPOOL_IN_VM=1"
		echo "export KERNPOOL_VM_CGROUP=${CGROUP_MODE:-v2}"
		echo "export KERNPOOL_CHURN=${KERNPOOL_CHURN:-500}"
		echo "export KERNPOOL_LOAD_OWNERS=${KERNPOOL_LOAD_OWNERS:-100}"
		echo "export KERNPOOL_LOAD_CELLS=${KERNPOOL_LOAD_CELLS:-10}"
		# TestLoadPersist: each cell a start, a save and a restore; 100 x 10
		# took 8.5 min of the v2 guest's 15 min per binary under TCG.
		echo "export KERNPOOL_LOAD_PERSIST_OWNERS=${KERNPOOL_LOAD_PERSIST_OWNERS:-40}"
		echo "export KERNPOOL_LOAD_PERSIST_CELLS=${KERNPOOL_LOAD_PERSIST_CELLS:-5}"
		for v in KERNPOOL_VM_RUN KERNPOOL_VM_SKIP KERNPOOL_TEST_SANDBOXED_ONLY KERNPOOL_VM_COUNT KERNPOOL_VM_FREEZER_PIN KERNPOOL_VM_TEST_TIMEOUT KERNPOOL_VM_CGROUP_LAYOUT KERNPOOL_VM_HUNG_TASK KERNPOOL_CHURN_KINDS KERNPOOL_VMCHECK_STORM KERNPOOL_VMCHECK_STORM_N; do
			if [ -n "${!v:-}" ]; then printf 'export %s=%q\n' "$v" "${!v}"; fi
		done
	} >"$f"
}
