#!/bin/sh
# start.sh node|router: the entry of kernpool's containers. It renders
# the config from its template (ROLE.hcl.in: @LISTEN_HOST@ from
# $KERNPOOL_LISTEN_HOST (default all addresses), @PORT@, @NODE_NAME@,
# @ADVERTISE_URL@, @FLEET_REDIS@, @CHECKPOINT_STORE@), the token blocks
# (Secret kernpool-tokens) and $KERNPOOL_EXTRA_CONFIG, then execs the
# daemon, so that SIGTERM from the kubelet reaches it (drain_on_term).
set -eu
role=$1
port=${KERNPOOL_PORT:-8443}
# Several nodes on one host with hostNetwork (a test cluster): one port
# each, "node-a=18441 node-b=18442".
for kv in ${KERNPOOL_NODE_PORTS:-}; do
	if [ "${kv%%=*}" = "${NODE_NAME:-}" ]; then port=${kv#*=}; fi
done
host=${KERNPOOL_LISTEN_HOST:-0.0.0.0}
advertise="https://${KERNPOOL_ADVERTISE_HOST:-}:$port"
for v in "$host" "$port" "${NODE_NAME:-}" "$advertise" "${KERNPOOL_FLEET_REDIS:-}" "${KERNPOOL_CHECKPOINT_STORE:-}"; do
	case $v in *[\"\|\\]*) echo "start.sh: refusing a setting with a quote, | or backslash: $v" >&2; exit 2 ;; esac
done
mkdir -p /run/kernpool
if [ "$role" = node ]; then
	# The emptyDir is world-writable: a kernel uid could swap the socket
	# the probes and the cordon watcher use. The state dir's parent (a
	# hostPath subdirectory the kubelet makes 0750) must let kernel uids
	# reach their staging dirs.
	chmod 0711 /run/kernpool /var/lib/kernpool
fi
conf=/run/kernpool/$role.hcl
sed -e "s|@LISTEN_HOST@|$host|g" -e "s|@PORT@|$port|g" -e "s|@NODE_NAME@|${NODE_NAME:-}|g" -e "s|@ADVERTISE_URL@|$advertise|g" \
	-e "s|@FLEET_REDIS@|${KERNPOOL_FLEET_REDIS:-}|g" -e "s|@CHECKPOINT_STORE@|${KERNPOOL_CHECKPOINT_STORE:-}|g" \
	"/etc/kernpool/$role.hcl.in" >"$conf"
cat /etc/kernpool/tokens/tokens.hcl >>"$conf"
printf '%s\n' "${KERNPOOL_EXTRA_CONFIG:-}" >>"$conf"
chmod 0600 "$conf"
if [ "$role" = router ]; then exec kernpool router --config "$conf"; fi
# On a cordoned node (an agent restarted after its drain) wait for the
# uncordon: the router must not place owners here meanwhile.
if [ -r /var/run/secrets/kubernetes.io/serviceaccount/token ]; then
	python3 /etc/kernpool/cordon-watch.py --wait-schedulable || echo "start.sh: cannot tell whether the node is cordoned: starting" >&2
fi
exec kernpool serve --config "$conf"
