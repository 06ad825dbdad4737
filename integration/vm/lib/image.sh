# shellcheck shell=bash
# Builds the cached guest image (see vm-notes): an uncompressed vmlinux
# extracted from Debian's kernel package, a busybox loader initramfs that
# insmods the virtio/ext4 modules in dependency order and switch_roots into
# an ext4 root image made from a trimmed debootstrap minbase + python3.
# Sourced by run and box; expects common.sh.

# LOADER_MODULES are insmod'ed in this order (no depmod on the host; the
# order follows each .ko's depends=).
LOADER_MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk crc16 mbcache jbd2 crc32c_generic ext4"

# extract_vmlinux IMG OUT writes the uncompressed kernel inside bzImage IMG:
# under TCG, skipping the in-guest xz decompression saves seconds per boot.
extract_vmlinux() {
	local img=$1 out=$2 off
	for off in $(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$img" | cut -d: -f1); do
		tail -c +"$((off + 1))" "$img" | xz -dc >"$out" 2>/dev/null || true
		if [ "$(head -c 4 "$out" | od -An -c | tr -d ' ')" = '177ELF' ]; then
			return 0
		fi
	done
	vm_die "no xz-compressed ELF kernel found in $img"
}

# fetch_kernel DIR downloads the current linux-image-*-amd64 package and
# unpacks it into DIR/pkg; prints the kernel version.
fetch_kernel() {
	local dir=$1 pkg
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	if [ -z "$pkg" ]; then
		apt-get update -q >/dev/null || vm_die "apt-get update failed"
		pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	fi
	[ -n "$pkg" ] || vm_die "cannot resolve linux-image-amd64 to a kernel package"
	(cd "$dir" && apt-get download -q "$pkg" >/dev/null 2>&1) || vm_die "apt-get download $pkg failed"
	dpkg -x "$dir"/"$pkg"_*.deb "$dir/pkg" || vm_die "dpkg -x $pkg failed"
	echo "${pkg#linux-image-}"
}

# build_loader KDIR KVER OUT makes the loader initramfs (gzip'd newc cpio).
build_loader() {
	local kdir=$1 kver=$2 out=$3 root m ko
	root=$(mktemp -d)
	mkdir -p "$root"/{bin,dev,proc,sys,newroot,lib/modules}
	cp /bin/busybox "$root/bin/busybox"
	for m in $LOADER_MODULES; do
		ko=$(find "$kdir/lib/modules/$kver" -name "$m.ko*" | head -1)
		[ -n "$ko" ] || vm_die "module $m not in the kernel package"
		case $ko in
		*.xz) xz -dc "$ko" >"$root/lib/modules/$m.ko" ;;
		*.zst) zstd -qdc "$ko" >"$root/lib/modules/$m.ko" ;;
		*) cp "$ko" "$root/lib/modules/$m.ko" ;;
		esac
	done
	echo "$LOADER_MODULES" >"$root/modules.order"
	install -m 0755 "$VM_DIR/guest/loader-init" "$root/init"
	(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
	rm -rf "$root"
}

# build_rootfs DIR bootstraps Debian minbase + python3 + tini (+ extra packages
# given as a comma list in $2) into DIR and trims what tests never read.
build_rootfs() {
	local dir=$1 extra=${2:-} mirror
	mirror=$(debian_mirror)
	vm_log "debootstrap $DEBIAN_SUITE from $mirror (python3,tini${extra:+,$extra})"
	debootstrap --variant=minbase --include="python3,tini${extra:+,$extra}" "$DEBIAN_SUITE" "$dir" "$mirror" \
		>"$dir.debootstrap.log" 2>&1 || { tail -20 "$dir.debootstrap.log" >&2; vm_die "debootstrap failed (log: $dir.debootstrap.log)"; }
	rm -rf "$dir"/var/cache/apt/* "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* \
		"$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/locale/* "$dir"/var/log/*.log
	find "$dir/usr/lib/python3" -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true
	echo kernpool-vm >"$dir/etc/hostname"
}

# ensure_image prints nothing and leaves in $IMG_DIR: vmlinux, loader.cpio.gz,
# rootfs.img, kernel.version, and the rootfs tree (kept for the box).
# A complete image is marked by a stamp file; anything else is rebuilt.
ensure_image() {
	IMG_DIR="$CACHE_DIR/image-v$IMAGE_VERSION-$DEBIAN_SUITE"
	[ -f "$IMG_DIR/.complete" ] && return 0
	local t0 kver
	t0=$(now_s)
	vm_log "building guest image in $IMG_DIR (cold cache)"
	rm -rf "$IMG_DIR" && mkdir -p "$IMG_DIR/kernel"
	kver=$(fetch_kernel "$IMG_DIR/kernel")
	echo "$kver" >"$IMG_DIR/kernel.version"
	extract_vmlinux "$IMG_DIR/kernel/pkg/boot/vmlinuz-$kver" "$IMG_DIR/vmlinux"
	build_loader "$IMG_DIR/kernel/pkg" "$kver" "$IMG_DIR/loader.cpio.gz"
	build_rootfs "$IMG_DIR/rootfs"
	mkfs.ext4 -q -F -L kernpool-root -d "$IMG_DIR/rootfs" "$IMG_DIR/rootfs.img" 400M ||
		vm_die "mkfs.ext4 of the root image failed"
	rm -rf "$IMG_DIR/kernel/pkg/usr" "$IMG_DIR/kernel/pkg/lib/firmware"
	touch "$IMG_DIR/.complete"
	vm_log "image built in $(elapsed "$t0") s (kernel $kver)"
	IMAGE_BUILD_SECONDS=$(elapsed "$t0")
}
