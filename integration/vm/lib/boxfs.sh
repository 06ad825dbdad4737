# shellcheck shell=bash
# The root filesystem and packing of the local Vagrant box (integration/vm/box).

BOX_CMDLINE="console=ttyS0 root=/dev/vda net.ifnames=0 kernpool.init=/sbin/init"
BOX_PACKAGES="systemd,systemd-sysv,udev,kmod,dbus,openssh-server,sudo,ifupdown,isc-dhcp-client,iproute2,rsync,ca-certificates,curl"

# vagrant_pubkey prints Vagrant's well-known insecure public key, read from
# the installed vagrant (never typed in by hand).
vagrant_pubkey() {
	local f
	for f in $(find / -xdev -path '*vagrant*/keys/vagrant.pub' 2>/dev/null); do
		cat "$f" && return 0
	done
	vm_die "vagrant's insecure public key (keys/vagrant.pub) not found: install vagrant"
}

# build_box_rootfs DIR: debootstrap with systemd/sshd, then make it a box.
build_box_rootfs() {
	local r=$1 kver
	kver=$(cat "$IMG_DIR/kernel.version")
	build_rootfs "$r" "$BOX_PACKAGES"
	# Modules for udev (virtio_net and friends), with their index.
	mkdir -p "$r/lib/modules"
	cp -a "$IMG_DIR/kernel/pkg/lib/modules/$kver" "$r/lib/modules/"
	chroot "$r" depmod "$kver"
	chroot "$r" useradd -m -s /bin/bash vagrant
	echo "vagrant:vagrant" | chroot "$r" chpasswd
	echo 'vagrant ALL=(ALL) NOPASSWD:ALL' >"$r/etc/sudoers.d/vagrant"
	chmod 0440 "$r/etc/sudoers.d/vagrant"
	install -d -m 0700 -o 1000 -g 1000 "$r/home/vagrant/.ssh"
	vagrant_pubkey >"$r/home/vagrant/.ssh/authorized_keys"
	chown 1000:1000 "$r/home/vagrant/.ssh/authorized_keys" && chmod 0600 "$r/home/vagrant/.ssh/authorized_keys"
	printf 'auto lo\niface lo inet loopback\n\nallow-hotplug eth0\niface eth0 inet dhcp\n' >"$r/etc/network/interfaces"
	printf '/dev/vda / ext4 defaults 0 1\n' >"$r/etc/fstab"
	printf '127.0.0.1 localhost\n127.0.1.1 kernpool-vm\n' >"$r/etc/hosts"
	echo 'UseDNS no' >"$r/etc/ssh/sshd_config.d/vagrant.conf"
	# vagrant halt hangs when `shutdown` powers off before returning:
	# return at once and power off a second later.
	printf '#!/bin/sh\n(sleep 1; systemctl poweroff) >/dev/null 2>&1 &\nexit 0\n' >"$r/usr/local/sbin/shutdown"
	chmod 0755 "$r/usr/local/sbin/shutdown"
	# Go toolchain and an offline module proxy for go.mod's dependencies.
	cp -a "$(go env GOROOT)" "$r/usr/local/go"
	rm -rf "$r/usr/local/go/pkg/obj" "$r/usr/local/go/test"
	ln -sf /usr/local/go/bin/go "$r/usr/local/bin/go"
	box_goproxy "$r/var/cache/kernpool-goproxy"
	box_gocache "$r/root/.cache/go-build"
	rm -rf "$r"/var/cache/apt/* "$r"/var/lib/apt/lists/*
}

# box_goproxy DIR fills DIR (GOPROXY=file:// layout) with exactly the
# modules go.mod needs, taken from the host's module cache.
box_goproxy() {
	local out=$1 tmp
	tmp=$(mktemp -d)
	if (cd "$REPO" && GOMODCACHE="$tmp" GOFLAGS=-mod=mod GOPROXY="file://$(go env GOMODCACHE)/cache/download" \
		GOSUMDB=off go mod download) >/dev/null 2>&1; then
		mkdir -p "$(dirname "$out")" && cp -a "$tmp/cache/download" "$out"
	else
		vm_log "partial module download; copying the host's whole module download cache"
		mkdir -p "$(dirname "$out")" && cp -a "$(go env GOMODCACHE)/cache/download" "$out"
	fi
	chmod -R u+w "$tmp" && rm -rf "$tmp"
}

# box_gocache DIR pre-warms root's Go build cache with the standard library
# and every dependency of kernpool and its tests: GOROOT and GOMODCACHE have
# the same paths in the box, so under emulation the provisioners compile
# only kernpool's own packages (CGO_ENABLED=0 on both sides: no gcc there).
box_gocache() {
	local out=$1
	mkdir -p "$out"
	(cd "$REPO" && export GOCACHE="$out" CGO_ENABLED=0 &&
		go build -o /dev/null ./cmd/kernpool &&
		go test -tags integration -c -o /dev/null ./integration &&
		go test -tags integration -c -o /dev/null ./integration/vmcheck) >/dev/null 2>&1 ||
		vm_log "warming the box's Go build cache failed; the box compiles from scratch"
}

# pack_box DIR: ext4 -> compressed qcow2, plus metadata, kernel, loader and
# the box Vagrantfile, tarred as kernpool-local.box.
pack_box() {
	local d=$1
	mkfs.ext4 -q -F -L kernpool-box -d "$d/rootfs" "$d/root.raw" 8G || vm_die "mkfs.ext4 of the box failed"
	qemu-img convert -c -O qcow2 "$d/root.raw" "$d/box.img" && rm -f "$d/root.raw"
	cp "$IMG_DIR/vmlinux" "$d/vmlinux"
	cp "$IMG_DIR/loader.cpio.gz" "$d/loader.cpio.gz"
	echo '{"provider":"libvirt","format":"qcow2","virtual_size":8}' >"$d/metadata.json"
	cat >"$d/Vagrantfile" <<VF
# Box Vagrantfile of $BOX_NAME (built by integration/vm/box).
Vagrant.configure("2") do |config|
  config.vm.provider :libvirt do |lv|
    lv.driver = "qemu"
    lv.kernel = File.join(File.dirname(__FILE__), "vmlinux")
    lv.initrd = File.join(File.dirname(__FILE__), "loader.cpio.gz")
    lv.cmd_line = "$BOX_CMDLINE"
    lv.disk_bus = "virtio"
  end
end
VF
	tar -C "$d" -cf "$d/kernpool-local.box" metadata.json Vagrantfile box.img vmlinux loader.cpio.gz
	rm -f "$d/box.img"
}

# ensure_libvirtd starts libvirt by hand where systemd is not PID 1 (as on
# the CI machines): no cgroup or security driver, qemu as root.
ensure_libvirtd() {
	virsh -c qemu:///system version >/dev/null 2>&1 && return 0
	if [ "$(cat /proc/1/comm)" = systemd ]; then
		systemctl start libvirtd virtlogd
		return 0
	fi
	local conf=/etc/libvirt/qemu.conf
	if ! grep -q '^# kernpool: started by hand' "$conf"; then
		printf '# kernpool: started by hand\ncgroup_controllers = [ ]\nsecurity_driver = "none"\nuser = "root"\ngroup = "root"\n' >>"$conf"
	fi
	pgrep -x virtlogd >/dev/null || virtlogd -d
	pgrep -x libvirtd >/dev/null || libvirtd -d
	local i
	for i in $(seq 50); do
		virsh -c qemu:///system version >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	vm_die "libvirtd did not come up"
}
