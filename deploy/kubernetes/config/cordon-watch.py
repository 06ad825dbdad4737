"""Drain the node agent when its node is cordoned.

`kubectl drain` cordons a node and evicts its pods, but never a
DaemonSet's: this sidecar of the node agent watches its Node
(GET /api/v1/nodes/NAME with the pod's service account, every
KERNPOOL_CORDON_POLL seconds) and, while the node is unschedulable and
the agent is ready, runs `kernpool drain --no-wait` on the agent's
socket: cells are refused with `draining`, the router places each owner
on another node, whose next cell restores the state the drain saved.
With --wait-schedulable it returns once the node is schedulable
instead: the agent's start waits on it, so that an agent restarted on a
cordoned node (after its drain) takes no owner until the uncordon.
Standard library only (it runs in the kernpool image).
"""

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request

from kernpool_client import Client

SA = "/var/run/secrets/kubernetes.io/serviceaccount"


def node_unschedulable(ctx, url, token):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        # A Node object is a few KiB; 4 MiB bounds a hostile answer.
        node = json.loads(resp.read(4 << 20))
    return bool(node.get("spec", {}).get("unschedulable"))


def read_token():
    with open(SA + "/token") as f:  # rotated by the kubelet
        return f.read().strip()


def wait_schedulable(ctx, url, name, poll):
    said = False
    while True:
        try:
            if not node_unschedulable(ctx, url, read_token()):
                return 0
        except Exception as e:  # fail open: an agent without the API still starts
            print("cordon-watch: cannot read node %s (%s): starting" % (name, e), file=sys.stderr, flush=True)
            return 0
        if not said:
            print("cordon-watch: node %s is cordoned: the agent starts after the uncordon" % name, flush=True)
            said = True
        time.sleep(poll)


def main():
    name = os.environ["NODE_NAME"]
    sock = os.environ.get("KERNPOOL_SOCKET", "/run/kernpool/kernpool.sock")
    poll = float(os.environ.get("KERNPOOL_CORDON_POLL", "1"))
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:
        host = "[" + host + "]"
    url = "https://%s:%s/api/v1/nodes/%s" % (host, port, name)
    ctx = ssl.create_default_context(cafile=SA + "/ca.crt")
    if sys.argv[1:] == ["--wait-schedulable"]:
        return wait_schedulable(ctx, url, name, poll)
    client = Client(socket=sock)
    print("cordon-watch: watching node %s" % name, flush=True)
    last = ""
    while True:
        try:
            if node_unschedulable(ctx, url, read_token()) and client.ready() == "ready":
                print("cordon-watch: node %s cordoned: draining the agent" % name, flush=True)
                subprocess.run(["kernpool", "drain", "--no-wait", "--socket", sock], check=False)
            last = ""
        except Exception as e:  # the agent restarting, the API server away
            if str(e) != last:  # once per new error, not every poll
                print("cordon-watch: %s" % e, file=sys.stderr, flush=True)
                last = str(e)
        time.sleep(poll)


if __name__ == "__main__":
    sys.exit(main())
