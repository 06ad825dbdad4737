#!/usr/bin/python3
"""Talk to the test VM's qemu monitor (HMP on a unix socket).

  monitor.py SOCKET KALLSYMS stall     dump every vCPU's registers, the
                                       symbol of its RIP and the kernel text
                                       addresses on its stack (a poor man's
                                       backtrace for a guest that spins with
                                       interrupts off), then inject an NMI
  monitor.py SOCKET - CMD...           run HMP commands, print their output

Used by lib/qemu.sh when the guest's heartbeat stops (see integration/README.md).
"""
import bisect
import re
import socket
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\r")


class Monitor:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(20)
        self.s.connect(path)
        self._until_prompt()

    def _until_prompt(self):
        buf = b""
        while not buf.endswith(b"(qemu) "):
            chunk = self.s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return ANSI.sub("", buf.decode(errors="replace"))

    def cmd(self, line):
        self.s.sendall(line.encode() + b"\n")
        out = self._until_prompt()
        lines = out.split("\n")
        # Drop the echoed command and the trailing prompt.
        return "\n".join(l for l in lines[1:] if not l.startswith("(qemu)")).strip()


def load_map(path):
    addrs, names = [], []
    try:
        with open(path) as f:
            for line in f:
                a, t, n = line.split()[:3]
                if t in "tTwW":
                    addrs.append(int(a, 16))
                    names.append(n)
    except OSError:
        pass
    order = sorted(range(len(addrs)), key=addrs.__getitem__)
    return [addrs[i] for i in order], [names[i] for i in order]


def symbol(smap, addr):
    addrs, names = smap
    i = bisect.bisect_right(addrs, addr) - 1
    if i < 0 or addr - addrs[i] > 0x10000:
        return None
    return "%s+0x%x" % (names[i], addr - addrs[i])


def stall(mon, smap):
    cpus = [int(m) for m in re.findall(r"CPU #(\d+)", mon.cmd("info cpus"))]
    for rnd in range(2):
        print("--- sample %d" % rnd)
        for c in cpus:
            mon.cmd("cpu %d" % c)
            regs = mon.cmd("info registers")
            rip = int(re.search(r"RIP=([0-9a-f]+)", regs).group(1), 16)
            rsp = int(re.search(r"RSP=([0-9a-f]+)", regs).group(1), 16)
            rfl = int(re.search(r"RFL=([0-9a-f]+)", regs).group(1), 16)
            cpl = re.search(r"CPL=(\d)", regs)
            print("CPU %d: RIP %016x %s  CPL %s  interrupts %s" % (
                c, rip, symbol(smap, rip) or "?", cpl.group(1) if cpl else "?",
                "on" if rfl & 0x200 else "OFF"))
            if rnd == 0:
                print(regs)
            stack = mon.cmd("x/256gx 0x%x" % rsp)
            for word in re.findall(r"0x([0-9a-f]{16})", stack):
                s = symbol(smap, int(word, 16))
                if s:
                    print("    stack: %s" % s)
        time.sleep(1)
    print("--- injecting an NMI (unknown_nmi_panic=1: the guest panics with a backtrace)")
    print(mon.cmd("nmi"))


def main():
    sock, smap_path, what = sys.argv[1], sys.argv[2], sys.argv[3:]
    mon = Monitor(sock)
    if what == ["stall"]:
        stall(mon, load_map(smap_path))
    else:
        for line in what:
            print(mon.cmd(line))


if __name__ == "__main__":
    main()
