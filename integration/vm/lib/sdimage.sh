# shellcheck shell=bash
# The systemd guest image of integration/vm/systemd: the cached kernel and
# loader of lib/image.sh, and a root image of its own with systemd as init
# (debootstrap minbase + python3 + systemd, systemd-sysv, dbus). Its cache
# key is separate from the test image's (SD_IMAGE_VERSION): bump it when
# this recipe changes. Sourced; expects common.sh and image.sh.

SD_IMAGE_VERSION=1
SD_PACKAGES="systemd,systemd-sysv,dbus,procps"

# ensure_sd_image leaves in $IMG_DIR vmlinux and loader.cpio.gz, and in
# $SD_IMG_DIR rootfs.img. A complete image is marked by a stamp file.
ensure_sd_image() {
	local t0 kver
	IMG_DIR="$CACHE_DIR/kernel-v$IMAGE_VERSION-$DEBIAN_SUITE"
	SD_IMG_DIR="$CACHE_DIR/image-systemd-v$SD_IMAGE_VERSION-$DEBIAN_SUITE"
	t0=$(now_s)
	if [ ! -f "$IMG_DIR/.complete" ]; then
		vm_log "fetching the guest kernel into $IMG_DIR"
		rm -rf "$IMG_DIR" && mkdir -p "$IMG_DIR/kernel"
		kver=$(fetch_kernel "$IMG_DIR/kernel")
		echo "$kver" >"$IMG_DIR/kernel.version"
		extract_vmlinux "$IMG_DIR/kernel/pkg/boot/vmlinuz-$kver" "$IMG_DIR/vmlinux"
		build_loader "$IMG_DIR/kernel/pkg" "$kver" "$IMG_DIR/loader.cpio.gz"
		rm -rf "$IMG_DIR/kernel/pkg"
		touch "$IMG_DIR/.complete"
	fi
	if [ ! -f "$SD_IMG_DIR/.complete" ]; then
		vm_log "building the systemd guest image in $SD_IMG_DIR (cold cache)"
		rm -rf "$SD_IMG_DIR" && mkdir -p "$SD_IMG_DIR"
		build_rootfs "$SD_IMG_DIR/rootfs" "$SD_PACKAGES"
		# No getty, no network wait: the test unit is the only job.
		rm -f "$SD_IMG_DIR"/rootfs/etc/systemd/system/getty.target.wants/*
		printf '/dev/vda / ext4 defaults 0 1\n' >"$SD_IMG_DIR/rootfs/etc/fstab"
		mkfs.ext4 -q -F -L kernpool-root -d "$SD_IMG_DIR/rootfs" "$SD_IMG_DIR/rootfs.img" 600M ||
			vm_die "mkfs.ext4 of the systemd root image failed"
		rm -rf "$SD_IMG_DIR/rootfs"
		touch "$SD_IMG_DIR/.complete"
	fi
	IMAGE_BUILD_SECONDS=$(elapsed "$t0")
}
