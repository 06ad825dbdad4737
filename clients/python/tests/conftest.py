"""A real kernpool daemon for the client tests.

The session fixture builds the kernpool binary with `go build` into a temp
dir (or takes $KERNPOOL_BIN), serves it on a temp socket and state dir and
stops it at the end (SIGTERM; it must exit 0). As root the daemon runs with
full isolation (the default `--isolation=sandbox`: its own uid per kernel,
cgroup limits, namespaces); when the host cannot give that, or without
root, the tests are skipped with the daemon's own reason, unless
KERNPOOL_TEST_ISOLATION=process asks for the degraded mode explicitly.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Iterator

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..")))

from kernpool_client import Client, DaemonUnavailable  # noqa: E402

PYTHON = "/usr/bin/python3"


# Bearer tokens of the network listener (test_network.py); the config
# holds their SHA-256.
TOKENS = {"py-alice": ("kp_py_alice_0123456789abcdef", 'owners = ["py-net-alice"]'),
          "py-admin": ("kp_py_admin_0123456789abcdef", "admin = true")}


class Daemon:
    def __init__(self, socket: str, log: str, isolation: str) -> None:
        self.socket = socket
        self.log = log
        self.isolation = isolation
        # The network listener (https://127.0.0.1:PORT) and its PKI, when
        # openssl could make one; else None.
        self.url: "str | None" = None
        self.pki: "dict[str, str]" = {}

    def log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log, "r", errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


def _pdeathsig() -> None:
    # If the test process dies, the daemon (and through it its kernels) follows.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    os.setpgid(0, 0)  # a hostile cell's killpg of the daemon's group misses pytest


def _pki(base: str) -> "dict[str, str]":
    """A CA, the node's certificate (127.0.0.1) and a client certificate
    (CN py-gateway), made with openssl; {} when there is no openssl."""
    if shutil.which("openssl") is None:
        return {}
    d = os.path.join(base, "pki")
    os.mkdir(d, 0o700)
    p = {k: os.path.join(d, k) for k in ("ca.pem", "ca.key", "node.pem", "node.key", "client.pem", "client.key")}
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    run("req", "-x509", *ec, "-keyout", p["ca.key"], "-out", p["ca.pem"], "-days", "1", "-subj", "/CN=kp-py-ca")
    for name, cn, ext in (("node", "node", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
                          ("client", "py-gateway", "extendedKeyUsage=clientAuth")):
        csr, extf = os.path.join(d, name + ".csr"), os.path.join(d, name + ".ext")
        with open(extf, "w") as f:
            f.write(ext + "\n")
        run("req", *ec, "-keyout", p[name + ".key"], "-out", csr, "-subj", "/CN=" + cn)
        run("x509", "-req", "-in", csr, "-CA", p["ca.pem"], "-CAkey", p["ca.key"], "-CAcreateserial",
            "-out", p[name + ".pem"], "-days", "1", "-extfile", extf)
    return p


def _listen_config(pki: "dict[str, str]") -> str:
    import hashlib
    src = 'listen = "127.0.0.1:0"\ntls_cert = "%s"\ntls_key = "%s"\ntls_client_ca = "%s"\n' % (
        pki["node.pem"], pki["node.key"], pki["ca.pem"])
    for name, (tok, scope) in TOKENS.items():
        src += 'token "%s" {\n  sha256 = "%s"\n  %s\n}\n' % (name, hashlib.sha256(tok.encode()).hexdigest(), scope)
    return src + 'client_cert "py-gateway" {\n  owners = ["py-net-gw"]\n}\n'


def _listen_url(log: str) -> "str | None":
    import re
    with open(log, "r", errors="replace") as f:
        m = re.search(r"serving on the network: listen=(127\.0\.0\.1:\d+)", f.read())
    return "https://" + m.group(1) if m else None


def _build(tmp: str) -> str:
    prebuilt = os.environ.get("KERNPOOL_BIN")
    if prebuilt:
        return prebuilt
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    if go is None:
        pytest.skip("no Go toolchain to build kernpool (set KERNPOOL_BIN to a built binary)")
    out = os.path.join(tmp, "kernpool")
    r = subprocess.run([go, "build", "-o", out, "./cmd/kernpool"], cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail("go build ./cmd/kernpool failed:\n" + r.stdout + r.stderr)
    return out


@contextlib.contextmanager
def _serve(full: bool) -> Iterator[Daemon]:
    """A daemon on a temp socket and state dir, SIGTERM at the end (it must
    exit 0, also when it already exited after a drain). full: the network
    listener and the small-files profile the shared daemon's tests use."""
    if sys.platform != "linux":
        pytest.skip("the daemon tests need Linux (Unix socket API, the sandbox)")
    if not os.access(PYTHON, os.X_OK):
        pytest.skip("%s is missing" % PYTHON)
    isolation = os.environ.get("KERNPOOL_TEST_ISOLATION", "sandbox")
    if isolation == "sandbox" and os.geteuid() != 0:
        pytest.skip("full isolation needs root (a uid per kernel, cgroups); "
                    "run as root or set KERNPOOL_TEST_ISOLATION=process")
    base = tempfile.mkdtemp(prefix="kp-py-")
    os.chmod(base, 0o711)  # kernels run as other uids and traverse to their staging dirs
    binary = _build(base)
    sock = os.path.join(base, "run", "kp.sock")
    log = os.path.join(base, "daemon.log")
    config = os.path.join(base, "kernpool.hcl")
    pki = _pki(base) if full else {}
    with open(config, "w") as f:
        f.write('interpreter = "%s"\nlog_level = "debug"\n' % PYTHON)
        f.write('cgroup {\n  parent = "kernpool-py-%s"\n}\n' % os.path.basename(base))
        if full:
            # test_files.py: a mode whose uploads are capped at 64 KiB.
            f.write('profile "smallfiles" {\n  files_max_bytes = "64KiB"\n}\n')
        if pki:
            f.write(_listen_config(pki))
    args = [binary, "serve", "--socket", sock, "--state-dir", os.path.join(base, "state"),
            "--config", config, "--isolation", isolation, "--tool-call-timeout", "30s"]
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    logf = open(log, "ab")
    proc = subprocess.Popen(args, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL, env=env,
                            preexec_fn=_pdeathsig)
    logf.close()
    d = Daemon(sock, log, isolation)
    d.pki = pki
    # Only stops a hung start: a loaded host (the suite runs beside
    # others) has taken past 30 s to bring the daemon up.
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                Client(sock, timeout=5).health()
                break
            except DaemonUnavailable:
                pass
            if proc.poll() is not None:
                pytest.skip("kernpool serve --isolation=%s cannot run here (exit %d):\n%s"
                            % (isolation, proc.returncode, d.log_tail()))
            if time.monotonic() > deadline:
                pytest.fail("kernpool serve did not answer within 120 s:\n" + d.log_tail())
            time.sleep(0.05)
        if pki:
            d.url = _listen_url(log)
        yield d
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        code = proc.returncode
        shutil.rmtree(base, ignore_errors=True)
    if code != 0:
        pytest.fail("kernpool serve exited %d after SIGTERM or a drain" % code)


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    with _serve(full=True) as d:
        yield d


@pytest.fixture
def own_daemon() -> Iterator[Daemon]:
    """A daemon of the test's own, for a test that ends it (a drain)."""
    with _serve(full=False) as d:
        yield d


@pytest.fixture
def client(daemon: Daemon) -> Client:
    return Client(daemon.socket, timeout=30)
