#!/usr/bin/env python3
"""pingpong: a fabricfs ring client written from docs/abi.md and docs/tree.md.

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

Memory ordering. docs/abi.md's rules are written with C11 atomics; Python
has none. Plain loads and stores of the u32 words go through ctypes (one
aligned 4-byte access each), which on x86-64 (total store order) already
gives the acquire loads and release stores the rules ask for; elsewhere
(arm64) the client adds a fence around them. What Python cannot do is an
atomic read-modify-write or a full fence; for those this client asks the
kernel: futex(FUTEX_WAKE_OP) atomically applies "word = word OP arg" (OR,
ANDN, ADD) with a full barrier and can wake waiters on the same word. So:
  - fence:            flags |= 0            (FUTEX_WAKE_OP, waking nobody)
  - set NEED_WAKEUP:  flags |= NEED_WAKEUP
  - clear it:         flags &= ~NEED_WAKEUP (FUTEX_OP_ANDN)
  - wake the daemon:  wake += 1 and FUTEX_WAKE every waiter, in one call.
"""

import ctypes
import mmap
import os
import platform
import struct
import sys
import time

# docs/abi.md: header, flags, features.
RING_MAGIC = 0x47524646
RING_ABI_VERSION = 1
RING_WORK, RING_COMPLETION = 1, 2
ENTRY_SIZE = 128
HEADER_SIZE = 4096
NEED_WAKEUP, OVERFLOW, DEAD = 1 << 0, 1 << 1, 1 << 2
FEAT_FUTEX = 1 << 0

OP_SEND, OP_RECV = 1, 2
FI_MSG, FI_RECV, FI_SEND = 1 << 1, 1 << 10, 1 << 11

# Header: magic u32, abi_version u16, ring_type u16, entry_size, entry_count,
# mask, head_off, tail_off, flags_off, wake_off, entries_off (u32), features u64.
HEADER = struct.Struct("=IHHIIIIIIIIQ")
# Work request: op u8, 7 reserved, 14 u64 (flags, context, desc, offset, len,
# addr, data, tag, ignore, rma_addr, rma_key, result_desc, result_offset,
# compare_offset), datatype u8, atomic_op u8, 6 reserved.
WR = struct.Struct("=B7x14QBB6x")
# Completion: op_context, flags, len, buf, data, tag, src_addr (u64), err i32,
# prov_errno i32, olen u64, desc u64, 48 reserved.
CQE = struct.Struct("=7Qii2Q48x")
assert HEADER.size == 48 and WR.size == 128 and CQE.size == 128

# futex(2): SYS_futex is 202 on x86-64, 98 on arm64.
MACHINE = platform.machine()
SYS_futex = {"x86_64": 202, "aarch64": 98}.get(MACHINE)
TSO = MACHINE == "x86_64"  # plain loads acquire and plain stores release
FUTEX_WAIT, FUTEX_WAKE, FUTEX_WAKE_OP = 0, 1, 5
FUTEX_OP_ADD, FUTEX_OP_OR, FUTEX_OP_ANDN = 1, 2, 3
FUTEX_OP_CMP_EQ = 0
INT_MAX = 0x7FFFFFFF

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class Fail(Exception):
    pass


def futex(addr, op, val, ts=None, addr2=0, val3=0):
    """One futex(2) call on shared (not _PRIVATE) words; returns (ret, errno)."""
    r = libc.syscall(ctypes.c_long(SYS_futex), ctypes.c_void_p(addr), ctypes.c_long(op),
                     ctypes.c_long(val), ts, ctypes.c_void_p(addr2), ctypes.c_long(val3))
    return r, (ctypes.get_errno() if r < 0 else 0)


def fence(addr):
    """A full barrier: *addr |= 0, atomically (addr: a flags word)."""
    atomic_op(addr, FUTEX_OP_OR, 0)


def atomic_op(addr, op, arg, nwake=0):
    """*addr = *addr OP arg atomically (with a full barrier), then wake up to
    nwake waiters on addr: futex(addr, FUTEX_WAKE_OP, nwake, 0, addr, op)."""
    encoded = (op << 28) | (FUTEX_OP_CMP_EQ << 24) | ((arg & 0xFFF) << 12)
    # The 4th argument is nr_wake2 (0), passed in the timeout slot.
    r, e = futex(addr, FUTEX_WAKE_OP, nwake, None, addr, encoded)
    if r < 0:
        raise Fail("futex(FUTEX_WAKE_OP): %s" % os.strerror(e))


class Ring:
    """A mapped ring file (docs/abi.md "Ring layout")."""

    def __init__(self, path, want_type):
        self.path = path
        self.mm = map_file(path)
        if len(self.mm) < HEADER_SIZE:
            raise Fail("%s: %d bytes, less than a header page" % (path, len(self.mm)))
        (magic, ver, typ, esize, count, mask, head_off, tail_off, flags_off, wake_off,
         entries_off, features) = HEADER.unpack_from(self.mm, 0)
        if magic != RING_MAGIC:
            raise Fail("%s: magic %#x, want %#x" % (path, magic, RING_MAGIC))
        if ver != RING_ABI_VERSION:
            raise Fail("%s: abi_version %d, want %d" % (path, ver, RING_ABI_VERSION))
        if typ != want_type:
            raise Fail("%s: ring_type %d, want %d" % (path, typ, want_type))
        if esize != ENTRY_SIZE:
            raise Fail("%s: entry_size %d, want %d" % (path, esize, ENTRY_SIZE))
        if count == 0 or count & (count - 1) or mask != count - 1:
            raise Fail("%s: entry_count %d mask %d" % (path, count, mask))
        for off in (head_off, tail_off, flags_off, wake_off):
            if off % 4 or off + 4 > HEADER_SIZE:
                raise Fail("%s: bad word offset %d" % (path, off))
        if entries_off + count * esize > len(self.mm):
            raise Fail("%s: %d entries at %d do not fit in %d bytes"
                       % (path, count, entries_off, len(self.mm)))
        if not features & FEAT_FUTEX:
            raise Fail("%s: no FEAT_FUTEX (features %#x)" % (path, features))
        self.count, self.mask, self.esize, self.entries = count, mask, esize, entries_off
        # ctypes views: each .value is one aligned 4-byte load or store.
        self.head = ctypes.c_uint32.from_buffer(self.mm, head_off)
        self.tail = ctypes.c_uint32.from_buffer(self.mm, tail_off)
        self.flags = ctypes.c_uint32.from_buffer(self.mm, flags_off)
        self.wake = ctypes.c_uint32.from_buffer(self.mm, wake_off)
        self.flags_addr = ctypes.addressof(self.flags)
        self.wake_addr = ctypes.addressof(self.wake)

    def entry(self, i):
        return self.entries + (i & self.mask) * self.esize

    def post(self, wr):
        """Producer: publish one work request; False when the ring is full."""
        t = self.tail.value
        h = self.head.value
        if (t - h) & 0xFFFFFFFF == self.count:
            return False
        WR.pack_into(self.mm, self.entry(t), *wr)
        if not TSO:
            fence(self.flags_addr)  # the entry before tail (release)
        self.tail.value = (t + 1) & 0xFFFFFFFF
        fence(self.flags_addr)  # the seq_cst fence of the protocol
        if self.flags.value & NEED_WAKEUP:
            atomic_op(self.wake_addr, FUTEX_OP_ADD, 1, INT_MAX)  # wake += 1; FUTEX_WAKE all
        return True

    def take(self):
        """Consumer: the completions that are there, consumed."""
        h = self.head.value
        t = self.tail.value
        if h == t:
            return []
        if not TSO:
            fence(self.flags_addr)  # tail before the entries (acquire)
        out = []
        while h != t:
            out.append(CQE.unpack_from(self.mm, self.entry(h)))
            h = (h + 1) & 0xFFFFFFFF
        if not TSO:
            fence(self.flags_addr)  # the entries before head (release)
        self.head.value = h
        return out

    def sleep(self, seconds):
        """Consumer: sleep until something is published (or the timeout)."""
        h = self.head.value
        w = self.wake.value
        atomic_op(self.flags_addr, FUTEX_OP_OR, NEED_WAKEUP)  # also the fence
        if self.tail.value == h:
            ts = timespec(int(seconds), int((seconds % 1) * 1e9))
            r, e = futex(self.wake_addr, FUTEX_WAIT, w, ctypes.byref(ts))
            if r < 0 and e not in (11, 110, 4):  # EAGAIN, ETIMEDOUT, EINTR
                raise Fail("%s: FUTEX_WAIT: %s" % (self.path, os.strerror(e)))
        atomic_op(self.flags_addr, FUTEX_OP_ANDN, NEED_WAKEUP)


def map_file(path):
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        if size <= 0:
            raise Fail("%s: size %d" % (path, size))
        return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)  # the mapping stays


class Domain:
    def __init__(self, mnt):
        self.dir = os.path.join(mnt, "tcp", "lo")
        self.fds = []

    def path(self, obj, name):
        return os.path.join(self.dir, obj, name)

    def objerr(self, obj):
        try:
            return read(self.path(obj, "err"))
        except OSError as e:
            return "(cannot read %s: %s)" % (self.path(obj, "err"), e.strerror)

    def write(self, obj, name, text):
        """One write of text to OBJ/NAME; failures quote the object's err."""
        p = self.path(obj, name)
        try:
            fd = os.open(p, os.O_WRONLY)
        except OSError as e:
            raise Fail("open %s: %s" % (p, e.strerror))
        try:
            os.write(fd, (text + "\n").encode())
        except OSError as e:
            raise Fail("write '%s' to %s: %s (err: %s)" % (text, p, e.strerror, self.objerr(obj)))
        finally:
            os.close(fd)

    def ctl(self, obj, cmd):
        self.write(obj, "ctl", cmd)

    def read(self, obj, name):
        p = self.path(obj, name)
        try:
            return read(p)
        except OSError as e:
            raise Fail("read %s: %s (err: %s)" % (p, e.strerror, self.objerr(obj)))

    def clone(self, kind):
        """Opens KIND/clone and returns "KIND/ID"; the open fd keeps it alive."""
        p = self.path(kind, "clone")
        try:
            fd = os.open(p, os.O_RDWR)
            self.fds.append(fd)
            return kind + "/" + os.read(fd, 64).decode().strip()
        except OSError as e:
            raise Fail("clone %s: %s" % (p, e.strerror))

    def map(self, obj, name, want_type=None):
        p = self.path(obj, name)
        try:
            return Ring(p, want_type) if want_type else map_file(p)
        except OSError as e:
            raise Fail("map %s: %s (err: %s)" % (p, e.strerror, self.objerr(obj)))

    def close(self):
        for fd in reversed(self.fds):
            os.close(fd)
        self.fds = []


def read(path):
    with open(path, "rb", buffering=0) as f:
        return f.read(65536).decode().strip()


def ident(obj):
    return obj.split("/", 1)[1]


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
            raise Fail("read %s/events: %s (err: %s)" % (eq, e.strerror, d.objerr(eq)))
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
        self.tx = self.d.map(self.ep, "tx", RING_WORK)
        self.rx = self.d.map(self.ep, "rx", RING_WORK)
        self.cqr = self.d.map(self.cq, "data", RING_COMPLETION)

    def post(self, ring, op, ctx, off):
        wr = (op, 0, ctx, self.desc, off, self.size) + (0,) * 9 + (0, 0)
        deadline = time.monotonic() + 10
        while not ring.post(wr):
            # Full: the daemon frees entries as it takes them (back-pressure).
            if ring.flags.value & DEAD:
                raise Fail("%s: ring is dead (err: %s)" % (ring.path, self.d.objerr(self.ep)))
            if time.monotonic() > deadline:
                raise Fail("%s: ring full for 10s (err: %s)" % (ring.path, self.d.objerr(self.ep)))
            time.sleep(0.00001)

    def reap(self):
        cs = self.cqr.take()
        for (ctx, flags, length, buf, _data, _tag, _src, err, prov_errno, olen,
             _desc) in cs:
            if err:
                raise Fail("%s: error completion: op_context=%#x flags=%#x err=%d prov_errno=%d "
                           "olen=%d (ep err: %s)" % (self.name, ctx, flags, err, prov_errno, olen,
                                                     self.d.objerr(self.ep)))
            kind, seq = ctx & ~0xFFFFFFFF, ctx & 0xFFFFFFFF
            if kind == CTX_SEND:
                if not flags & FI_SEND or seq != self.sends & 0xFFFFFFFF:
                    raise Fail("%s: send completion op_context=%#x flags=%#x, want seq %d"
                               % (self.name, ctx, flags, self.sends))
                self.sends += 1
            elif kind == CTX_RECV:
                if not flags & FI_RECV or seq != self.recvs & 0xFFFFFFFF:
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
            if self.cqr.flags.value & DEAD:
                raise Fail("%s: CQ ring is dead (err: %s)" % (self.name, self.d.objerr(self.cq)))
            spins += 1
            if spins < 200:
                continue
            if time.monotonic() > deadline:
                raise Fail("%s: no %s completion after 10s (ep err: %s; cq err: %s)"
                           % (self.name, what, self.d.objerr(self.ep), self.d.objerr(self.cq)))
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
    ver = read(os.path.join(mnt, "abi_version"))
    if ver != "1":
        raise Fail("%s/abi_version is %s; this client speaks abi_version 1" % (mnt, ver))
    d = Domain(mnt)
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
    b.post(b.rx, OP_RECV, CTX_RECV | 0, 0)
    t0 = time.monotonic()
    for i in range(iters):
        seq = i & 0xFFFFFFFF
        want = pattern(i)
        a.post(a.rx, OP_RECV, CTX_RECV | seq, size)
        a.mem[0:size] = want
        a.post(a.tx, OP_SEND, CTX_SEND | seq, 0)

        slot = (i % 2) * size
        b.await_count("recvs", i + 1)
        if b.last_recv[1] != slot:
            raise Fail("B: recv completion buf %d, want %d" % (b.last_recv[1], slot))
        b.check(slot, want, i)
        if i + 1 < iters:
            b.await_count("sends", i)  # send i-1 used the other slot
            b.post(b.rx, OP_RECV, CTX_RECV | ((i + 1) & 0xFFFFFFFF), ((i + 1) % 2) * size)
        b.post(b.tx, OP_SEND, CTX_SEND | seq, slot)

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
        if SYS_futex is None:
            raise Fail("no futex syscall number for machine %s" % MACHINE)
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
