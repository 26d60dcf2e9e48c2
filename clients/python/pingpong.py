#!/usr/bin/env python3
"""pingpong: a fabricfs ring client, of docs/abi.md and docs/tree.md through
the module fabricfs (fabricfs.py, beside this file).

    pingpong.py MOUNTPOINT [ITERATIONS] [SIZE]

The same program as clients/c/pingpong.c, in Python 3 with only the
standard library. In domain tcp/lo it makes, through clone files kept open,
an EQ, a CQ per endpoint, a passive endpoint and endpoint A; connects A,
accepts the request as endpoint B, registers a memory region per side and
maps both endpoints' tx/rx rings and both CQ rings. A sends ITERATIONS
messages of SIZE bytes (default 1000 x 4096) with a pattern that depends on
the iteration; B checks every byte and echoes the message from where it
landed; A checks every byte again. Prints "ok ITERATIONS SIZE
USEC_PER_ROUNDTRIP" and exits 0, or says what went wrong and exits 1.
"""

import os
import sys
import time

import fabricfs
from fabricfs import Error as Fail, ident

def wait_connected(d, eq, eps):
    """Reads the EQ's events until every ep in eps has "connected fid=EP".
    Each round opens the file afresh: the read at offset 0 blocks until an
    event is pending; later reads give the rest, then end of file."""
    want = {"connected fid=" + ep for ep in eps}
    text, deadline = "", time.monotonic() + 10
    while want:
        if time.monotonic() > deadline:
            raise Fail("%s: no connected events after 10s (have: %r)" % (eq, text))
        fd = os.open(d.path(eq, "events"), os.O_RDONLY)
        try:
            while True:
                b = os.read(fd, 65536)
                if not b:
                    break
                text += b.decode()
        except OSError as e:
            raise Fail("read %s/events: %s (err: %s)" % (eq, e.strerror, d.err(eq)))
        finally:
            os.close(fd)
        *lines, text = text.split("\n")
        for line in lines:
            words = line.split()
            if not words:
                continue
            if words[0] in ("error", "shutdown"):
                raise Fail("%s: unexpected event: %s" % (eq, line))
            want.discard(" ".join(words[:2]))


CTX_SEND, CTX_RECV = 1 << 32, 2 << 32


class Side:
    """One endpoint with its CQ, memory region and rings."""

    def __init__(self, d, name, size):
        self.d, self.name, self.size = d, name, size
        self.cq = d.clone("cq")
        self.ep = None
        self.sends = self.recvs = 0  # completions seen
        self.last_recv = None

    def setup_mr(self, length):
        d = self.d
        self.mr = d.clone("mr")
        d.write(self.mr, "attr/len", str(length))
        d.write(self.mr, "attr/access", "FI_SEND,FI_RECV")
        d.ctl(self.mr, "reg")
        s = d.read(self.mr, "attr/desc")
        try:
            self.desc = int(s, 0)
        except ValueError:
            raise Fail("%s/attr/desc: not a number: %r" % (self.mr, s))
        self.mem = d.map(self.mr, "data")
        if len(self.mem) < length:
            raise Fail("%s/data: %d bytes, want %d" % (self.mr, len(self.mem), length))

    def map_rings(self):
        self.tx = self.d.ring(self.ep, "tx", fabricfs.RING_WORK)
        self.rx = self.d.ring(self.ep, "rx", fabricfs.RING_WORK)
        self.cqr = self.d.ring(self.cq, "data", fabricfs.RING_COMPLETION)

    def post(self, ring, op, ctx, off):
        wr = fabricfs.wr(op, context=ctx, desc=self.desc, offset=off, length=self.size)
        deadline = time.monotonic() + 10
        while not ring.post(wr):
            # Full: the daemon frees entries as it takes them (back-pressure).
            if ring.flags.value & fabricfs.RING_DEAD:
                raise Fail("%s: ring is dead (err: %s)" % (ring.path, self.d.err(self.ep)))
            if time.monotonic() > deadline:
                raise Fail("%s: ring full for 10s (err: %s)" % (ring.path, self.d.err(self.ep)))
            time.sleep(0.00001)

    def reap(self):
        cs = self.cqr.take()
        for (ctx, flags, length, buf, _data, _tag, _src, err, prov_errno, olen,
             _desc, _err_data) in cs:
            if err:
                raise Fail("%s: error completion: op_context=%#x flags=%#x err=%d prov_errno=%d "
                           "olen=%d (ep err: %s)" % (self.name, ctx, flags, err, prov_errno, olen,
                                                     self.d.err(self.ep)))
            kind, seq = ctx & ~0xFFFFFFFF, ctx & 0xFFFFFFFF
            if kind == CTX_SEND:
                if not flags & fabricfs.FI_SEND or seq != self.sends & 0xFFFFFFFF:
                    raise Fail("%s: send completion op_context=%#x flags=%#x, want seq %d"
                               % (self.name, ctx, flags, self.sends))
                self.sends += 1
            elif kind == CTX_RECV:
                if not flags & fabricfs.FI_RECV or seq != self.recvs & 0xFFFFFFFF:
                    raise Fail("%s: recv completion op_context=%#x flags=%#x, want seq %d"
                               % (self.name, ctx, flags, self.recvs))
                if length != self.size:
                    raise Fail("%s: recv completion len %d, want %d" % (self.name, length, self.size))
                self.recvs += 1
                self.last_recv = (length, buf)
            else:
                raise Fail("%s: completion with unknown op_context %#x" % (self.name, ctx))
        return len(cs)

    def await_count(self, what, want):
        """Reaps until the sends or recvs count reaches want: spins about
        200 polls, then sleeps on the CQ ring's wake word."""
        deadline, spins = time.monotonic() + 10, 0
        while getattr(self, what) < want:
            if self.reap():
                continue
            if self.cqr.flags.value & fabricfs.RING_DEAD:
                raise Fail("%s: CQ ring is dead (err: %s)" % (self.name, self.d.err(self.cq)))
            spins += 1
            if spins < 200:
                continue
            if time.monotonic() > deadline:
                raise Fail("%s: no %s completion after 10s (ep err: %s; cq err: %s)"
                           % (self.name, what, self.d.err(self.ep), self.d.err(self.cq)))
            self.cqr.sleep(0.1)

    def check(self, off, want, i):
        got = self.mem[off:off + self.size]
        if got != want:
            j = next(j for j in range(self.size) if got[j] != want[j])
            raise Fail("%s: iteration %d byte %d is %#x, want %#x" % (self.name, i, j, got[j], want[j]))


def patterns(size):
    """pattern(i)[j] = (j*31 + (j>>8) + i*101 + 1) mod 256, as in pingpong.c."""
    base = bytes((j * 31 + (j >> 8)) & 0xFF for j in range(size))
    tables = [bytes((k + s) & 0xFF for k in range(256)) for s in range(256)]
    return lambda i: base.translate(tables[(i * 101 + 1) & 0xFF])


def pingpong(mnt, iters, size):
    d = fabricfs.Domain(mnt, "tcp", "lo")
    eq = d.clone("eq")
    a, b = Side(d, "A", size), Side(d, "B", size)
    pep = d.clone("pep")
    a.ep = d.clone("ep")

    d.ctl(pep, "bind eq " + ident(eq))
    d.ctl(pep, "listen 127.0.0.1:0")
    local = d.read(pep, "local")
    if not local:
        raise Fail("%s/local is empty after listen" % pep)

    for cmd in ("bind eq " + ident(eq), "bind cq %s send,recv" % ident(a.cq), "enable",
                "connect %s pingpong" % local):
        d.ctl(a.ep, cmd)
    b.ep = "ep/" + d.read(pep, "listen")
    for cmd in ("bind eq " + ident(eq), "bind cq %s send,recv" % ident(b.cq), "enable", "accept"):
        d.ctl(b.ep, cmd)
    wait_connected(d, eq, [a.ep, b.ep])

    # Two SIZE-byte slots per side: A sends from slot 0 and receives into
    # slot 1; B receives into slot i%2 and echoes from it.
    a.setup_mr(2 * size)
    b.setup_mr(2 * size)
    a.map_rings()
    b.map_rings()

    pattern = patterns(size)
    b.post(b.rx, fabricfs.OP_RECV, CTX_RECV | 0, 0)
    t0 = time.monotonic()
    for i in range(iters):
        seq = i & 0xFFFFFFFF
        want = pattern(i)
        a.post(a.rx, fabricfs.OP_RECV, CTX_RECV | seq, size)
        a.mem[0:size] = want
        a.post(a.tx, fabricfs.OP_SEND, CTX_SEND | seq, 0)

        slot = (i % 2) * size
        b.await_count("recvs", i + 1)
        if b.last_recv[1] != slot:
            raise Fail("B: recv completion buf %d, want %d" % (b.last_recv[1], slot))
        b.check(slot, want, i)
        if i + 1 < iters:
            b.await_count("sends", i)  # send i-1 used the other slot
            b.post(b.rx, fabricfs.OP_RECV, CTX_RECV | ((i + 1) & 0xFFFFFFFF), ((i + 1) % 2) * size)
        b.post(b.tx, fabricfs.OP_SEND, CTX_SEND | seq, slot)

        a.await_count("sends", i + 1)
        a.await_count("recvs", i + 1)
        if a.last_recv[1] != size:
            raise Fail("A: recv completion buf %d, want %d" % (a.last_recv[1], size))
        a.check(size, want, i)
    t1 = time.monotonic()
    b.await_count("sends", iters)
    print("ok %d %d %.1f" % (iters, size, (t1 - t0) * 1e6 / iters if iters else 0.0), flush=True)
    d.close()


def main(argv):
    if not 2 <= len(argv) <= 4:
        print("usage: pingpong.py MOUNTPOINT [ITERATIONS] [SIZE]", file=sys.stderr)
        return 2
    try:
        iters = int(argv[2], 0) if len(argv) > 2 else 1000
        size = int(argv[3], 0) if len(argv) > 3 else 4096
        if size < 1 or iters < 0:
            raise Fail("SIZE must be at least 1 and ITERATIONS not negative")
        pingpong(argv[1], iters, size)
    except ValueError as e:
        print("pingpong: %s" % e, flush=True)
        return 1
    except Fail as e:
        print("pingpong: %s" % e, flush=True)
        return 1
    except OSError as e:
        print("pingpong: %s" % e, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
