"""Waits on a fabricfs tree with an asyncio event loop alone.

Usage: python3 poll_asyncio.py DOMAIN (a mounted domain directory, such as
/fabric/tcp/lo). Endpoint a (send CQ ta, receive CQ ra, EQ ea) connects to
a passive endpoint l (EQ ev); the endpoint made for the request, b, has CQ
cb for both directions. The loop's readers are the three CQs' events
files, a's EQ, l's listen file and, once connected, both data files:
loop.add_reader only, no thread, no timer that polls. The request is
accepted from the listen reader, the traffic starts from the EQ reader
(a's "connected"), and each side sends MSGS messages to the other.

Before the connection and after the traffic the loop sits idle for IDLE
seconds; the CPU time the process spent in each (utime + stime of
/proc/self/stat) and the callbacks that ran are printed, one key=value a
line, for tests/poll_test.go to judge, with the completions counted.
"""
import asyncio
import os
import sys

MSGS = 5
IDLE = 1.0


def cpu_seconds():
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Tree:
    def __init__(self, dom):
        self.dom = dom
        self.fds = []

    def path(self, *elem):
        return os.path.join(self.dom, *elem)

    def ctl(self, obj, cmd):
        with open(self.path(obj, "ctl"), "w") as f:
            f.write(cmd + "\n")

    def open(self, *elem, flags=os.O_RDONLY):
        fd = os.open(self.path(*elem), flags | os.O_NONBLOCK | os.O_CLOEXEC)
        self.fds.append(fd)
        return fd


async def main(dom):
    t = Tree(dom)
    for d in ("eq/ev", "eq/ea", "cq/ta", "cq/ra", "cq/cb", "pep/l", "ep/a"):
        os.mkdir(t.path(d))
    t.ctl("pep/l", "bind eq ev")
    t.ctl("pep/l", "listen 127.0.0.1:0")
    for c in ("bind eq ea", "bind cq ta send", "bind cq ra recv", "enable"):
        t.ctl("ep/a", c)

    loop = asyncio.get_running_loop()
    done = loop.create_future()
    calls = {"n": 0}
    counts = {"ta_send": 0, "ra_recv": 0, "cb_send": 0, "cb_recv": 0, "a_data": 0, "b_data": 0, "ea_connected": 0}
    state = {}

    def check_done():
        want = {"ta_send": MSGS, "ra_recv": MSGS, "cb_send": MSGS, "cb_recv": MSGS, "a_data": MSGS, "b_data": MSGS}
        if all(counts[k] >= v for k, v in want.items()) and not done.done():
            done.set_result(None)

    def queue_reader(fd, on_line):
        # An events file read at offset 0 with O_NONBLOCK returns what is
        # pending, or fails with EAGAIN: the reader runs only when poll
        # says something is there.
        def ready():
            calls["n"] += 1
            try:
                text = os.pread(fd, 65536, 0).decode()
            except BlockingIOError:
                return
            for line in text.splitlines():
                on_line(line)
            check_done()
        loop.add_reader(fd, ready)

    def cq_counter(prefix):
        def on_line(line):
            if "FI_SEND" in line:
                counts[prefix + "_send"] = counts.get(prefix + "_send", 0) + 1
            if "FI_RECV" in line:
                counts[prefix + "_recv"] = counts.get(prefix + "_recv", 0) + 1
        return on_line

    for cq in ("ta", "ra", "cb"):
        queue_reader(t.open("cq", cq, "events"), cq_counter(cq))

    def data_reader(ep, key):
        fd = t.open("ep", ep, "data", flags=os.O_RDWR)

        def ready():
            calls["n"] += 1
            msg = os.pread(fd, 65536, 0)
            if msg == b"from %s" % (b"b" if ep == "a" else b"a"):
                counts[key] += 1
            check_done()
        loop.add_reader(fd, ready)
        return fd

    def on_listen():
        calls["n"] += 1
        b = os.pread(listen, 64, 0).decode().strip()
        loop.remove_reader(listen)
        state["b"] = b
        for c in ("bind eq ev", "bind cq cb send,recv", "enable", "accept"):
            t.ctl("ep/" + b, c)

    def on_ea(line):
        if line.startswith("connected"):
            counts["ea_connected"] += 1
            fa = data_reader("a", "a_data")
            fb = data_reader(state["b"], "b_data")
            for _ in range(MSGS):
                os.write(fa, b"from a")
                os.write(fb, b"from b")

    listen = t.open("pep", "l", "listen")
    loop.add_reader(listen, on_listen)
    queue_reader(t.open("eq", "ea", "events"), on_ea)

    async def idle(name):
        n, c = calls["n"], cpu_seconds()
        await asyncio.sleep(IDLE)
        print(f"{name}_cpu={cpu_seconds() - c:.3f}")
        print(f"{name}_calls={calls['n'] - n}")

    await idle("idle_before")
    addr = open(t.path("pep", "l", "local")).read().strip()
    t.ctl("ep/a", "connect " + addr)
    await asyncio.wait_for(done, 20)
    await idle("idle_after")
    for k, v in sorted(counts.items()):
        print(f"{k}={v}")
    for fd in t.fds:
        loop.remove_reader(fd)
        os.close(fd)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
