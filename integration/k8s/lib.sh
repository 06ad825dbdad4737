# integration/k8s/lib.sh: the steps of integration/k8s/run (sourced).
# Every process it starts is recorded (PIDS, $WORK/*.pid) and every
# path it creates outside $WORK is listed in $WORK/created, for cleanup.

wait_for() { # DESC SECONDS CMD...: poll CMD every second until it succeeds
	local desc=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs; i++)); do
		if eval "$*" >/dev/null 2>&1; then return 0; fi
		sleep 1
	done
	die "timed out after ${secs}s waiting for $desc"
}

bg() { # NAME CMD...: start CMD in the background, logging to $WORK/NAME.log
	local name=$1
	shift
	"$@" >"$WORK/$name.log" 2>&1 &
	PIDS+=($!)
	echo $! >"$WORK/$name.pid"
}

created() { # PATH: mkdir PATH if absent and note it for cleanup
	if [ ! -e "$1" ]; then mkdir -p "$1" && echo "$1" >>"$WORK/created"; fi
}

# build_k8s: the Kubernetes binaries from the Go module proxy, built once
# (a module requiring k8s.io/kubernetes with its staging modules pinned);
# sets KUBECTL_BIN: a kubectl on PATH when there is one (client-side
# commands only; within the version skew of the API server or not), else
# one built here too.
build_k8s() {
	local b missing=0 src=$CACHE/src-$K8S_VERSION m want="kube-apiserver kube-controller-manager kube-scheduler kubelet"
	KUBECTL_BIN=$BIN/kubectl
	if [ ! -x "$KUBECTL_BIN" ]; then
		if command -v kubectl >/dev/null; then KUBECTL_BIN=$(command -v kubectl); else want="$want kubectl"; fi
	fi
	for b in $want; do
		[ -x "$BIN/$b" ] || missing=1
	done
	[ "$missing" -eq 0 ] && { log "kubernetes $K8S_VERSION binaries: reusing $BIN (kubectl: $KUBECTL_BIN)"; return; }
	log "building kubernetes $K8S_VERSION ($want) in $src (cold: ~25 CPU-minutes)"
	mkdir -p "$src"
	{
		printf 'module kbuild\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$K8S_VERSION"
		for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider \
			cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api \
			cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms \
			kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics \
			mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller; do
			printf '\tk8s.io/%s => k8s.io/%s v0.%s\n' "$m" "$m" "${K8S_VERSION#1.}"
		done
		printf ')\n'
	} >"$src/go.mod"
	printf '//go:build tools\n\npackage kbuild\n\nimport (\n' >"$src/tools.go"
	for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
		printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$b" >>"$src/tools.go"
	done
	printf ')\n' >>"$src/tools.go"
	local pkgs=()
	for b in $want; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
	(cd "$src" && go mod tidy && mkdir -p "$BIN" && CGO_ENABLED=0 go build -ldflags "-X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${K8S_VERSION#1.}" -o "$BIN/" "${pkgs[@]}") ||
		die "building kubernetes failed"
}

kubeconfig() { # TOKEN: a kubeconfig for the API server with TOKEN
	cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kp
  cluster: {server: "https://127.0.0.1:16443", certificate-authority: "$WORK/pki/ca.crt"}
users:
- name: u
  user: {token: "$1"}
contexts:
- name: kp
  context: {cluster: kp, user: u}
current-context: kp
EOF
}

sign() { # NAME CN SAN: a key and a certificate signed by the CA PREFIX
	local ca=$1 name=$2 cn=$3 san=$4 d=$WORK/pki
	openssl req -newkey rsa:2048 -nodes -keyout "$d/$name.key" -out "$d/$name.csr" -subj "/CN=$cn" 2>/dev/null
	printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$d/$name.ext"
	openssl x509 -req -in "$d/$name.csr" -CA "$d/$ca.crt" -CAkey "$d/$ca.key" -CAcreateserial -days 2 \
		-out "$d/$name.crt" -extfile "$d/$name.ext" 2>/dev/null
}

# make_pki: the cluster CA, the API server's certificate, the service
# account key pair, static tokens; the kernpool CA and certificate, and
# the kernpool admin token (its digest in tokens.hcl).
make_pki() {
	local d=$WORK/pki t
	mkdir -p "$d"
	for ca in ca kp-ca; do
		openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/$ca.key" -out "$d/$ca.crt" -days 2 -subj "/CN=$ca" 2>/dev/null
	done
	sign ca apiserver kube-apiserver "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
	sign kp-ca kp kernpool "IP:127.0.0.1,IP:$HOST_IP,DNS:localhost"
	openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
	openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
	for u in admin node1 node2 scheduler cm; do
		t=$(openssl rand -hex 24)
		eval "TOK_$u=$t"
	done
	{
		echo "$TOK_admin,admin,admin,system:masters"
		echo "$TOK_node1,system:node:kp-node1,kp-node1,system:nodes"
		echo "$TOK_node2,system:node:kp-node2,kp-node2,system:nodes"
		echo "$TOK_scheduler,system:kube-scheduler,system:kube-scheduler"
		# One identity for every controller (no per-controller service
		# account credentials): it needs every controller's rights.
		echo "$TOK_cm,system:kube-controller-manager,system:kube-controller-manager,system:masters"
	} >"$d/tokens.csv"
	kubeconfig "$TOK_admin" >"$WORK/admin.kubeconfig"
	kubeconfig "$TOK_scheduler" >"$WORK/scheduler.kubeconfig"
	kubeconfig "$TOK_cm" >"$WORK/cm.kubeconfig"
	kubeconfig "$TOK_node1" >"$WORK/node1.kubeconfig"
	kubeconfig "$TOK_node2" >"$WORK/node2.kubeconfig"
	KERNPOOL_TOKEN=$("$WORK/kernpool" token admin --admin 2>"$WORK/tokens.hcl")
	printf '#!/bin/sh\nexec %s --kubeconfig %s "$@"\n' "$KUBECTL_BIN" "$WORK/admin.kubeconfig" >"$WORK/kubectl"
	chmod +x "$WORK/kubectl"
}

api_ready() { curl -sf --cacert "$WORK/pki/ca.crt" -H "Authorization: Bearer $TOK_admin" https://127.0.0.1:16443/readyz; }

start_control_plane() {
	local d=$WORK/pki
	bg etcd etcd --name kp --data-dir "$WORK/etcd" --listen-client-urls http://127.0.0.1:12379 \
		--advertise-client-urls http://127.0.0.1:12379 --listen-peer-urls http://127.0.0.1:12380 \
		--initial-advertise-peer-urls http://127.0.0.1:12380 --initial-cluster kp=http://127.0.0.1:12380
	# The endpoint reconciler is off: it would publish 127.0.0.1 as the
	# kubernetes Service's endpoint, which validation refuses (loopback).
	bg apiserver "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:12379 --bind-address=127.0.0.1 \
		--advertise-address=127.0.0.1 --secure-port=16443 --endpoint-reconciler-type=none \
		--tls-cert-file="$d/apiserver.crt" --tls-private-key-file="$d/apiserver.key" --client-ca-file="$d/ca.crt" \
		--token-auth-file="$d/tokens.csv" --authorization-mode=Node,RBAC --allow-privileged=true \
		--service-cluster-ip-range=10.0.0.0/24 --service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$d/sa.pub" --service-account-signing-key-file="$d/sa.key" --profiling=false
	wait_for "the API server" 120 api_ready
	bg controller-manager "$BIN/kube-controller-manager" --kubeconfig="$WORK/cm.kubeconfig" --leader-elect=false \
		--service-account-private-key-file="$d/sa.key" --root-ca-file="$d/ca.crt" --secure-port=0 \
		--use-service-account-credentials=false --profiling=false
	bg scheduler "$BIN/kube-scheduler" --kubeconfig="$WORK/scheduler.kubeconfig" --leader-elect=false \
		--secure-port=0 --profiling=false
}

# v1 hierarchies and the cgroup2 mount of this host's cgroupfs.
cgroup_mounts() { awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/mounts | grep -v '^/sys/fs/cgroup$' || true; }

# make_cgroup_root N: /kernpool-k8s-nodeN in every hierarchy, the
# kubelet's --cgroup-root (cpuset needs its cpus and mems set).
make_cgroup_root() {
	local m g
	for m in $(cgroup_mounts); do
		g=$m/kernpool-k8s-node$1
		mkdir -p "$g"
		if [ -f "$g/cpuset.cpus" ]; then
			cat "$m/cpuset.cpus" >"$g/cpuset.cpus"
			cat "$m/cpuset.mems" >"$g/cpuset.mems"
		fi
	done
}

# start_node N: containerd and kubelet of node kp-nodeN in a mount
# namespace of their own (propagation from the host only): the mounts of
# pods, /run/containerd (shim sockets), /var/log/pods and the sysctls
# the kubelet would otherwise set on the host stay in it.
start_node() {
	local n=$1 d=$WORK/node$1
	mkdir -p "$d"/{root,state,runc,cni,kubelet,pods-log,containers-log,run-containerd,sysctl}
	created /run/containerd
	created /var/log/pods
	created /var/log/containers
	make_cgroup_root "$n"
	cat >"$d/cni/10-loopback.conflist" <<'EOF'
{"cniVersion": "1.0.0", "name": "kp-loopback", "plugins": [{"type": "loopback"}]}
EOF
	cat >"$d/containerd.toml" <<EOF
version = 2
root = "$d/root"
state = "$d/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$d/containerd.sock"
[ttrpc]
  address = "$d/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/kernpool-pause:dev"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
        Root = "$d/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni"
EOF
	cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $((10240 + 10 * n))
healthzBindAddress: 127.0.0.1
healthzPort: $((10238 + 10 * n))
readOnlyPort: 0
cgroupDriver: cgroupfs
cgroupRoot: /kernpool-k8s-node$n
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://$d/containerd.sock
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: /etc/resolv.conf
maxPods: 20
EOF
	# The values the kubelet would write into the host's sysctls, shown
	# to it in its namespace instead (a bind over the /proc/sys file).
	local kv
	mkdir -p "$d/sysctl/vm" "$d/sysctl/kernel/keys"
	for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
		kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
		if [ "$(cat "/proc/sys/${kv%%=*}")" != "${kv#*=}" ]; then
			echo "${kv#*=}" >"$d/sysctl/${kv%%=*}"
			echo "${kv%%=*}" >>"$d/sysctl/list"
		fi
	done
	cat >"$d/ns.sh" <<EOF
set -e
mount -t tmpfs tmpfs /run/containerd
mount --bind "$d/pods-log" /var/log/pods
mount --bind "$d/containers-log" /var/log/containers
for f in \$(cat "$d/sysctl/list" 2>/dev/null); do mount --bind "$d/sysctl/\$f" "/proc/sys/\$f"; done
containerd --config "$d/containerd.toml" >"$d/containerd.log" 2>&1 &
echo \$! >"$d/containerd.pid"
for i in \$(seq 60); do [ -S "$d/containerd.sock" ] && break; sleep 1; done
"$BIN/kubelet" --config="$d/kubelet.yaml" --kubeconfig="$WORK/node$n.kubeconfig" --hostname-override=kp-node$n \
	--node-ip="$HOST_IP" --root-dir="$d/kubelet" --cert-dir="$d/kubelet/pki" >"$d/kubelet.log" 2>&1 &
echo \$! >"$d/kubelet.pid"
wait
EOF
	bg "node$n-ns" unshare --mount --propagation slave /bin/bash "$d/ns.sh"
	wait_for "containerd of kp-node$n" 60 "[ -S $d/containerd.sock ]"
}

node_ready_status() { $KUBECTL get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}'; }
nodes_ready() { local s; s=$(node_ready_status); [[ $s == *kp-node1=True* && $s == *kp-node2=True* ]]; }

start_store_and_redis() {
	mkdir -p "$WORK/redis"
	bg redis redis-server --port 16379 --bind 127.0.0.1 --dir "$WORK/redis" --appendonly yes --save ''
	bg s3 "$WORK/s3fake" --listen 127.0.0.1:19000 --bucket ckpt
	wait_for "redis" 30 "redis-cli -p 16379 ping | grep -q PONG"
}

deploy_kernpool() {
	created /var/lib/kernpool-k8s-it
	$KUBECTL create namespace kernpool >/dev/null
	$KUBECTL -n kernpool create secret generic kernpool-store --from-literal=KERNPOOL_CHECKPOINT_STORE=s3://ckpt/k8s \
		--from-literal=AWS_ENDPOINT_URL=http://127.0.0.1:19000 --from-literal=AWS_REGION=us-east-1 \
		--from-literal=AWS_ACCESS_KEY_ID=it --from-literal=AWS_SECRET_ACCESS_KEY=it-secret >/dev/null
	$KUBECTL -n kernpool create secret generic kernpool-tls --from-file=tls.crt="$WORK/pki/kp.crt" \
		--from-file=tls.key="$WORK/pki/kp.key" --from-file=ca.crt="$WORK/pki/kp-ca.crt" >/dev/null
	$KUBECTL -n kernpool create secret generic kernpool-tokens --from-file=tokens.hcl="$WORK/tokens.hcl" >/dev/null
	$KUBECTL apply -k "$REPO/integration/k8s/overlay" | sed 's/^/  /'
}

pods_ready() { # LABEL: "node:True ..." of the pods with app.kubernetes.io/name=LABEL
	$KUBECTL -n kernpool get pods -l "app.kubernetes.io/name=$1" \
		-o jsonpath='{range .items[*]}{.spec.nodeName}:{.status.conditions[?(@.type=="Ready")].status} {end}'
}
router_ready() { [[ $(pods_ready kernpool-router) == *:True* ]] && curl -sf --cacert "$WORK/pki/kp-ca.crt" https://127.0.0.1:18440/v1/ready; }
kernpool_ready() { local s; s=$(pods_ready kernpool-node); [[ $s == *kp-node1:True* && $s == *kp-node2:True* ]] && router_ready; }

owner_node() { redis-cli -p 16379 HGET "kernpool:owner:$1" node; }
owners_on() { local o; for o in "${OWNERS[@]}"; do [ "$(owner_node "$o")" = "$1" ] && echo "$o"; done; true; }
busiest_node() { local o; for o in "${OWNERS[@]}"; do owner_node "$o"; done | sort | uniq -c | sort -rn | awk 'NR == 1 { print $2 }'; }
show_placement() {
	local o
	for o in "${OWNERS[@]}"; do printf '%s=%s(gen %s) ' "$o" "$(owner_node "$o")" "$(redis-cli -p 16379 HGET "kernpool:owner:$o" gen)"; done
	echo
}
agent_port() { case $1 in kp-node1) echo 18441 ;; kp-node2) echo 18442 ;; esac; }
# agent_stopped NODE: the agent's listener refuses connections: its drain
# finished (every persist kernel saved) and it exited; its restarted
# container waits for the uncordon before it listens again.
agent_stopped() { [ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/pki/kp-ca.crt" "https://$HOST_IP:$(agent_port "$1")/v1/ready")" = 000 ]; }
# pod_log NODE NS POD CONTAINER N: a container's log file as the node's
# containerd writes it (the API server cannot reach kubelets that listen
# on loopback only), the messages without the CRI prefix.
pod_log() {
	local f
	for f in "$WORK/node${1#kp-node}/pods-log/$2_$3_"*/"$4/$5.log"; do
		[ -f "$f" ] && cut -d' ' -f4- "$f"
	done
	true
}
agent_log_tail() {
	local pod
	pod=$($KUBECTL -n kernpool get pods -l app.kubernetes.io/name=kernpool-node --field-selector "spec.nodeName=$1" -o jsonpath='{.items[0].metadata.name}')
	log "the drained agent's log ($pod, its first container):"
	pod_log "$1" kernpool "$pod" kernpool 0 | grep -iE 'drain|saved|exit' | tail -8 | sed 's/^/  /' || true
	log "its cordon watcher and the restarted agent:"
	pod_log "$1" kernpool "$pod" cordon-watch 0 | tail -3 | sed 's/^/  /' || true
	pod_log "$1" kernpool "$pod" kernpool 1 | tail -2 | sed 's/^/  /' || true
}

# compare_start_paths: a new owner's first cell through the router on a
# warm node (a spare takes it) against a pod per sandbox (create to the
# output of a pod running python3 once), three of each.
compare_start_paths() {
	local i t0 out
	$KUBECTL uncordon "$victim" >/dev/null
	wait_for "both agents Ready after uncordon" 180 kernpool_ready
	log "a new owner's first cell through the router (warm node: spares ready):"
	for i in 1 2 3; do
		python3 "$REPO/integration/k8s/cells.py" first "newowner$i-$RANDOM" | sed 's/^/  /'
	done
	log "a pod per sandbox (image already on the node, hostNetwork; create to output):"
	for i in 1 2 3; do
		t0=$(now)
		$KUBECTL run "sandbox-$i" --image=localhost/kernpool:dev --image-pull-policy=Never --restart=Never \
			--overrides='{"spec":{"hostNetwork":true,"automountServiceAccountToken":false}}' \
			--command -- /usr/bin/python3 -c 'print("hello from a pod")' >/dev/null
		$KUBECTL wait --for=jsonpath='{.status.phase}'=Succeeded "pod/sandbox-$i" --timeout=120s >/dev/null ||
			die "the sandbox pod did not finish"
		local node
		node=$($KUBECTL get pod "sandbox-$i" -o jsonpath='{.spec.nodeName}')
		out=$(pod_log "$node" default "sandbox-$i" "sandbox-$i" 0)
		log "  pod sandbox-$i: $(since "$t0") s to \"$out\" (node $node)"
		$KUBECTL delete pod "sandbox-$i" --wait=false >/dev/null
	done
}

# --- cleanup -----------------------------------------------------------

is_alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

stop_pid() { # PID: SIGTERM, then SIGKILL after 10 s
	local p=$1 i
	is_alive "$p" || return 0
	kill "$p" 2>/dev/null
	for ((i = 0; i < 100; i++)); do is_alive "$p" || return 0; sleep 0.1; done
	kill -9 "$p" 2>/dev/null
}

# kill_cgroup_root N: every process under /kernpool-k8s-nodeN (the
# node's pods, their kernels), then the groups themselves.
kill_cgroup_root() {
	local n=$1 m pids i
	for ((i = 0; i < 50; i++)); do
		pids=$(for m in $(cgroup_mounts); do
			[ -d "$m/kernpool-k8s-node$n" ] && find "$m/kernpool-k8s-node$n" -name cgroup.procs -exec cat {} + 2>/dev/null
		done | sort -u)
		[ -z "$pids" ] && break
		# shellcheck disable=SC2086
		kill -9 $pids 2>/dev/null
		sleep 0.2
	done
	for m in $(cgroup_mounts); do
		[ -d "$m/kernpool-k8s-node$n" ] && find "$m/kernpool-k8s-node$n" -depth -type d -exec rmdir {} \; 2>/dev/null
	done
	for m in $(cgroup_mounts); do
		[ -d "$m/kernpool-k8s-node$n" ] && log "cleanup: $m/kernpool-k8s-node$n could not be removed"
	done
	true
}

cleanup() {
	local rc=$? n p f
	set +e
	trap - EXIT
	log "cleanup (exit $rc)"
	for n in 1 2; do [ -f "$WORK/node$n/kubelet.pid" ] && stop_pid "$(cat "$WORK/node$n/kubelet.pid")"; done
	for n in 1 2; do kill_cgroup_root "$n"; done
	# The shims containerd started name its socket, under $WORK.
	for p in $(grep -l -a -F "$WORK/node" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
		case $(cat "/proc/$p/comm" 2>/dev/null) in containerd-shim*) kill -9 "$p" 2>/dev/null ;; esac
	done
	for n in 1 2; do [ -f "$WORK/node$n/containerd.pid" ] && stop_pid "$(cat "$WORK/node$n/containerd.pid")"; done
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[i]}"; done
	# Mounts of the nodes lived in their namespaces, gone with them; any
	# under $WORK in the host's namespace would be a bug: say so, unmount.
	for f in $(awk -v w="$WORK" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r); do
		log "cleanup: unmounting $f (left in the host's namespace)"
		umount -l "$f"
	done
	if [ -f "$WORK/created" ]; then
		for f in $(sort -r "$WORK/created"); do
			case $f in /var/lib/kernpool-k8s-it) rm -rf "$f" ;; *) rmdir "$f" 2>/dev/null ;; esac
		done
	fi
	if [ "$rc" -ne 0 ]; then
		log "logs kept in $WORK.logs"
		mkdir -p "$WORK.logs"
		cp "$WORK"/*.log "$WORK.logs/" 2>/dev/null
		for n in 1 2; do cp "$WORK/node$n/containerd.log" "$WORK.logs/node$n-containerd.log" 2>/dev/null; cp "$WORK/node$n/kubelet.log" "$WORK.logs/node$n-kubelet.log" 2>/dev/null; cp -r "$WORK/node$n/pods-log" "$WORK.logs/node$n-pods" 2>/dev/null; done
	fi
	rm -rf "$WORK"
	# What is left, counted rather than assumed.
	local procs mounts groups
	# (the pattern from a file: grep's own command line must not match)
	local pat
	pat=$(mktemp /tmp/kp-k8s-pattern.XXXXXX)
	echo "$WORK" >"$pat"
	procs=$(grep -l -a -F -f "$pat" /proc/[0-9]*/cmdline 2>/dev/null | wc -l)
	rm -f "$pat"
	mounts=$(grep -c -F "$WORK" /proc/mounts)
	groups=$(for m in $(cgroup_mounts); do ls -d "$m"/kernpool-k8s-node* 2>/dev/null; done | wc -l)
	log "cleanup done: left of this run: $procs processes, $mounts mounts, $groups cgroups, $(ls -d "$WORK" 2>/dev/null | wc -l) work dirs"
	exit "$rc"
}
