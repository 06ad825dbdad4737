"""Cells through the router for integration/k8s/run (the Python client
of clients/python, over HTTPS with the run's CA and admin token).

    cells.py put OWNER...     x = "<owner>-<n>" in each owner's kernel;
                              prints the first result's kernel.isolation
    cells.py check OWNER...   each owner's x is still there; prints
                              whether its kernel restored a checkpoint
    cells.py first OWNER      one new owner's first cell, timed

Environment: KP_URL, KP_CA, KERNPOOL_TOKEN. Exit 1 on any mismatch.
"""

import json
import os
import sys
import time

from kernpool_client import Client


def client():
    return Client(url=os.environ["KP_URL"], token=os.environ["KERNPOOL_TOKEN"], ca_file=os.environ["KP_CA"])


def want(owner):
    return "%s-%d" % (owner, len(owner))


def put(c, owners):
    for i, o in enumerate(owners):
        t0 = time.monotonic()
        r = c.execute("x = %r\nprint(x)" % want(o), owner=o)
        ms = (time.monotonic() - t0) * 1000
        if r.status != "success" or r.output.strip() != want(o):
            print("FAIL put %s: %s %r" % (o, r.status, r.output))
            return 1
        print("put   %-10s x=%-14s %7.1f ms  kernel %s" % (o, want(o), ms, r.kernel.id))
        if i == 0:
            iso = r.kernel.raw.get("isolation", {})
            print("kernel.isolation: " + json.dumps(iso, sort_keys=True))
    return 0


def check(c, owners):
    bad = 0
    for o in owners:
        t0 = time.monotonic()
        r = c.execute("print(x)", owner=o)
        ms = (time.monotonic() - t0) * 1000
        ok = r.status == "success" and r.output.strip() == want(o)
        print("check %-10s x=%-14s %7.1f ms  restored=%s  %s" % (
            o, r.output.strip() or r.status, ms, r.kernel.restored, "ok" if ok else "LOST"))
        bad += not ok
    return 1 if bad else 0


def first(c, owner):
    t0 = time.monotonic()
    r = c.execute("print(1)", owner=owner)
    ms = (time.monotonic() - t0) * 1000
    if r.status != "success":
        print("FAIL first %s: %s" % (owner, r.status))
        return 1
    print("first cell of new owner %s: %.1f ms (client round trip through the router)" % (owner, ms))
    return 0


def main(argv):
    c = client()
    if argv[0] == "put":
        return put(c, argv[1:])
    if argv[0] == "check":
        return check(c, argv[1:])
    if argv[0] == "first":
        return first(c, argv[1])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
