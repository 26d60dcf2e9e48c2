"""fabricfs: the Python client of a mounted fabricfs tree (standard library only).

The ring ABI of docs/abi.md (abi_version 1): its constants, the layouts of
the ring header, work requests and completions (struct formats), mapping
ring and region files, and the producer, consumer and sleep sides of a
ring (class Ring); plus the file protocol of docs/tree.md for one domain
(class Domain: clone objects, ctl, attributes, mapping). clients/c/fabricfs.h
is the same ABI for C; a test (core/ring/clients_test.go) checks the
constants and layouts of both against the daemon's core/ring.

    import fabricfs
    d = fabricfs.Domain("/fabric", "tcp", "lo")
    cq = d.clone("cq")
    ...
    tx = d.ring(ep, "tx", fabricfs.RING_WORK)
    tx.post(fabricfs.wr(fabricfs.OP_SEND, context=1, desc=desc, length=n))
    for c in cqr.take(): ...

Memory ordering. docs/abi.md's rules are written with C11 atomics; Python
has none. A plain load or store of a u32 word goes through ctypes (one
aligned 4-byte access), which on x86-64 (total store order) is already the
acquire load and release store the rules ask for; elsewhere (arm64) the
module adds a full fence around them. What Python cannot do is an atomic
read-modify-write or a full fence; for those the module asks the kernel:
futex(FUTEX_WAKE_OP) applies "word = word OP arg" (OR, ANDN, ADD)
atomically, with a full barrier, and can wake waiters on the same word:

  - fence:            flags |= 0            (FUTEX_WAKE_OP, waking nobody)
  - set NEED_WAKEUP:  flags |= NEED_WAKEUP
  - clear it:         flags &= ~NEED_WAKEUP (FUTEX_OP_ANDN)
  - wake the daemon:  wake += 1 and FUTEX_WAKE every waiter, in one call.

Each fence is a system call, so the producer does not fence after every
post. The protocol needs a full fence between storing tail and loading
flags only so that a producer never misses a RING_NEED_WAKEUP that the
daemon set just before it went to sleep. On x86-64 Ring.post stores tail
and loads flags without a fence: if the flag is set it wakes the daemon
(the common case once the daemon sleeps), and if not it remembers the
ring. flush() fences once and then wakes the daemon on every remembered
ring whose flag is set and whose requests it has not all taken (head !=
tail). Ring.sleep does the same (its own setting of NEED_WAKEUP is the
fence), and so does Ring.post when the ring is full, so the program never
blocks with a wake-up owed: a request whose wake-up the race delayed is
served at the latest when its program next waits (docs/abi.md, "Languages
without fences"). On other machines every access that needs ordering is
fenced, a system call each. Call flush() before blocking anywhere else (reading cq/N/wait, a sleep).
"""

import ctypes
import mmap
import os
import platform
import struct

# The ring file (docs/abi.md "Ring layout").
ABI_VERSION = 1
RING_MAGIC = 0x47524646  # the bytes "FFRG"
RING_WORK, RING_COMPLETION = 1, 2
ENTRY_SIZE = 128
HEADER_SIZE = 4096
MAX_ENTRIES = 1 << 20
HEAD_OFF, TAIL_OFF, FLAGS_OFF, WAKE_OFF = 64, 128, 192, 256  # read them from the header
RING_NEED_WAKEUP, RING_OVERFLOW, RING_DEAD = 1 << 0, 1 << 1, 1 << 2
FEAT_FUTEX, FEAT_WAIT_FILE, FEAT_IOV = 1 << 0, 1 << 1, 1 << 2
# The segment-array form of a work request (docs/abi.md "Scatter-gather"):
# at most IOV_LIMIT local and IOV_LIMIT remote segments of SEG_SIZE bytes.
IOV_LIMIT, SEG_SIZE = 4, 24

# Work request operations. The atomics need an endpoint with FI_ATOMIC and an
# operation its domain's query_atomic file lists (docs/abi.md).
OP_SEND, OP_RECV, OP_TSEND, OP_TRECV, OP_WRITE, OP_READ = 1, 2, 3, 4, 5, 6
OP_ATOMIC, OP_FETCH_ATOMIC, OP_COMPARE_ATOMIC = 7, 8, 9

# libfabric's values of the flags and error codes the ABI carries.
FI_MSG, FI_RMA, FI_TAGGED, FI_ATOMIC = 1 << 1, 1 << 2, 1 << 3, 1 << 4
FI_READ, FI_WRITE, FI_RECV, FI_SEND = 1 << 8, 1 << 9, 1 << 10, 1 << 11
FI_REMOTE_READ, FI_REMOTE_WRITE = 1 << 12, 1 << 13
FI_MULTI_RECV, FI_REMOTE_CQ_DATA = 1 << 16, 1 << 17
FI_COMPLETION, FI_INJECT = 1 << 24, 1 << 25
FI_TRANSMIT_COMPLETE, FI_DELIVERY_COMPLETE = 1 << 27, 1 << 28
FI_ADDR_UNSPEC = FI_ADDR_NOTAVAIL = (1 << 64) - 1
FI_EIO, FI_EACCES, FI_EINVAL, FI_ENOSYS, FI_EMSGSIZE, FI_EOPNOTSUPP = 5, 13, 22, 38, 90, 95
FI_ENOTCONN, FI_ECANCELED, FI_ETRUNC, FI_ENOAV, FI_EOVERRUN = 107, 125, 265, 267, 268

# The header's fields, in order: magic u32, abi_version u16, ring_type u16,
# entry_size, entry_count, mask, head_off, tail_off, flags_off, wake_off,
# entries_off (u32), features u64, 16 reserved bytes.
HEADER_FIELDS = ("magic", "abi_version", "ring_type", "entry_size", "entry_count", "mask",
                 "head_off", "tail_off", "flags_off", "wake_off", "entries_off", "features",
                 "reserved")
HEADER = struct.Struct("=IHHIIIIIIIIQ16s")
# A work request's fields, in order (reserved bytes are pad bytes).
WR_FIELDS = ("op", "iov_count", "rma_iov_count", "flags", "context", "desc", "offset", "len", "addr", "data", "tag", "ignore",
             "rma_addr", "rma_key", "result_desc", "result_offset", "compare_offset", "datatype",
             "atomic_op")
WR = struct.Struct("=BBB5x14QBB6x")
# A completion's fields, in order (16 reserved bytes at the end).
CQE_FIELDS = ("op_context", "flags", "len", "buf", "data", "tag", "src_addr", "err", "prov_errno",
              "olen", "desc", "err_data")
CQE = struct.Struct("=7Qii2Q32s16x")
# The segments of a work request's segment array: local, then remote.
IOV_FIELDS = ("desc", "offset", "len")
IOV = struct.Struct("=3Q")
RMA_IOV_FIELDS = ("addr", "len", "key")
RMA_IOV = struct.Struct("=3Q")


def layout(st, fields):
    """{field: (offset, size)} of a struct format without pad items named:
    HEADER, WR or CQE with HEADER_FIELDS, WR_FIELDS or CQE_FIELDS."""
    items, off, count = [], 0, ""
    for ch in st.format.lstrip("="):
        if ch.isdigit():
            count += ch
            continue
        n, count = int(count or "1"), ""
        if ch == "x":
            off += n
        elif ch == "s":
            items.append((off, n))
            off += n
        else:
            size = struct.calcsize("=" + ch)
            for _ in range(n):
                items.append((off, size))
                off += size
    return dict(zip(fields, items))


class Error(Exception):
    """A fabricfs client failure, with what failed and why."""


# futex(2): SYS_futex is 202 on x86-64, 98 on arm64.
MACHINE = platform.machine()
SYS_futex = {"x86_64": 202, "aarch64": 98}.get(MACHINE)
TSO = MACHINE == "x86_64"  # plain loads acquire and plain stores release
FUTEX_WAIT, FUTEX_WAKE, FUTEX_WAKE_OP = 0, 1, 5
FUTEX_OP_ADD, FUTEX_OP_OR, FUTEX_OP_ANDN = 1, 2, 3
FUTEX_OP_CMP_EQ = 0
_INT_MAX = 0x7FFFFFFF

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def futex(addr, op, val, ts=None, addr2=0, val3=0):
    """One futex(2) call on shared (not _PRIVATE) words; returns (ret, errno)."""
    if SYS_futex is None:
        raise Error("no futex system call number for machine %s" % MACHINE)
    r = _libc.syscall(ctypes.c_long(SYS_futex), ctypes.c_void_p(addr), ctypes.c_long(op),
                      ctypes.c_long(val), ts, ctypes.c_void_p(addr2), ctypes.c_long(val3))
    return r, (ctypes.get_errno() if r < 0 else 0)


def atomic_op(addr, op, arg, nwake=0):
    """*addr = *addr OP arg atomically (with a full barrier), then wake up to
    nwake waiters on addr: futex(addr, FUTEX_WAKE_OP, nwake, 0, addr, op)."""
    encoded = (op << 28) | (FUTEX_OP_CMP_EQ << 24) | ((arg & 0xFFF) << 12)
    # The 4th argument is nr_wake2 (0), passed in the timeout slot.
    r, e = futex(addr, FUTEX_WAKE_OP, nwake, None, addr, encoded)
    if r < 0:
        raise Error("futex(FUTEX_WAKE_OP): %s" % os.strerror(e))


def fence(addr):
    """A full barrier: *addr |= 0, atomically (addr: a flags word)."""
    atomic_op(addr, FUTEX_OP_OR, 0)


def map_file(path):
    """Maps the whole file at path shared, read-write (a ring file or
    mr/N/data). The mapping outlives the descriptor, which is closed."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size <= 0:
            raise Error("%s: size %d" % (path, size))
        return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)


def wr(op, context=0, desc=0, offset=0, length=0, flags=0, addr=0, data=0, tag=0, ignore=0,
       rma_addr=0, rma_key=0):
    """A work request's field values, in WR's order (the plain form, no
    atomics)."""
    return (op, 0, 0, flags, context, desc, offset, length, addr, data, tag, ignore, rma_addr, rma_key,
            0, 0, 0, 0, 0)


_unfenced = set()  # work rings posted to since the last fence, their wake-up unchecked


def _wake_unfenced():
    """After a full fence: wakes the daemon on the unfenced rings it sleeps
    on with requests it has not taken."""
    while _unfenced:
        r = _unfenced.pop()
        if r.head.value != r.tail.value:
            r.wake_if_asleep()


def flush():
    """Fences once, then wakes the daemon on every ring posted to since the
    last fence whose consumer sleeps (see the module's doc)."""
    if _unfenced:
        fence(next(iter(_unfenced)).flags_addr)
        _wake_unfenced()


class Ring:
    """A mapped ring file (docs/abi.md "Ring layout"), its header checked."""

    def __init__(self, path, want_type=None):
        self.path = path
        self.mm = map_file(path)
        try:
            self._check(want_type)
        except Error:
            self.mm.close()
            raise
        # ctypes views: each .value is one aligned 4-byte load or store.
        self.head = ctypes.c_uint32.from_buffer(self.mm, self.head_off)
        self.tail = ctypes.c_uint32.from_buffer(self.mm, self.tail_off)
        self.flags = ctypes.c_uint32.from_buffer(self.mm, self.flags_off)
        self.wake = ctypes.c_uint32.from_buffer(self.mm, self.wake_off)
        self.flags_addr = ctypes.addressof(self.flags)
        self.wake_addr = ctypes.addressof(self.wake)

    def _check(self, want_type):
        path, size = self.path, len(self.mm)
        if size < HEADER.size:
            raise Error("%s: %d bytes, less than a ring header" % (path, size))
        h = dict(zip(HEADER_FIELDS, HEADER.unpack_from(self.mm, 0)))

        def bad(field, why):
            raise Error("%s: header field %s: %s" % (path, field, why))
        if h["magic"] != RING_MAGIC:
            bad("magic", "%#x, want %#x" % (h["magic"], RING_MAGIC))
        if h["abi_version"] != ABI_VERSION:
            bad("abi_version", "%d, want %d" % (h["abi_version"], ABI_VERSION))
        if h["ring_type"] not in (RING_WORK, RING_COMPLETION) or want_type not in (None, h["ring_type"]):
            bad("ring_type", "%d, want %s" % (h["ring_type"], want_type or "1 or 2"))
        if h["entry_size"] != ENTRY_SIZE:
            bad("entry_size", "%d, want %d" % (h["entry_size"], ENTRY_SIZE))
        count = h["entry_count"]
        if count == 0 or count & (count - 1):
            bad("entry_count", "%d is not a power of two" % count)
        if h["mask"] != count - 1:
            bad("mask", "%#x, want %#x" % (h["mask"], count - 1))
        if any(h["reserved"]):
            bad("reserved", "not zero")
        entries = h["entries_off"]
        if entries < 5 * 64 or entries % 64:
            bad("entries_off", "%d: want a multiple of 64, at least 320" % entries)
        lines = set()
        for name in ("head_off", "tail_off", "flags_off", "wake_off"):
            off = h[name]
            if off % 4 or off < 64 or off + 4 > entries or off // 64 in lines:
                bad(name, "%d: want 4-aligned, on its own cache line, in 64..entries_off" % off)
            lines.add(off // 64)
        if entries + count * ENTRY_SIZE > size:
            bad("length", "%d bytes, %d entries at %d need more" % (size, count, entries))
        self.type, self.count, self.mask, self.features = h["ring_type"], count, count - 1, h["features"]
        self.entries = entries
        self.head_off, self.tail_off = h["head_off"], h["tail_off"]
        self.flags_off, self.wake_off = h["flags_off"], h["wake_off"]

    def entry(self, i):
        """The byte offset of entry i (a free-running index) in the mapping."""
        return self.entries + (i & self.mask) * ENTRY_SIZE

    def wake_if_asleep(self):
        """Wakes the consumer if it set RING_NEED_WAKEUP: wake += 1 and
        FUTEX_WAKE every waiter, in one call (a full barrier too). Returns
        whether it did."""
        if not self.flags.value & RING_NEED_WAKEUP:
            return False
        atomic_op(self.wake_addr, FUTEX_OP_ADD, 1, _INT_MAX)
        return True

    def post(self, fields):
        """Producer: publishes one work request (the values of WR_FIELDS, as
        wr() makes them). Returns False when the ring is full; the daemon
        frees entries as it takes them, so post again later."""
        t = self.tail.value
        h = self.head.value
        if (t - h) & 0xFFFFFFFF >= self.count:
            flush()  # the caller is about to wait
            return False
        WR.pack_into(self.mm, self.entry(t), *fields)
        if not TSO:
            fence(self.flags_addr)  # the entry before tail (release)
        self.tail.value = (t + 1) & 0xFFFFFFFF
        if not TSO:
            fence(self.flags_addr)  # the seq_cst fence of the protocol
            self.wake_if_asleep()
        elif not self.wake_if_asleep():
            # The flag may have been set while our tail sat in the store
            # buffer: flush() fences and looks again.
            _unfenced.add(self)
        return True

    def take(self):
        """Consumer: the completions that are there (tuples in CQE_FIELDS'
        order), consumed."""
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
        """Consumer: sleeps until something is published, a wake-up or the
        timeout. Check the ring (and RING_DEAD) again afterwards."""
        h = self.head.value
        w = self.wake.value
        atomic_op(self.flags_addr, FUTEX_OP_OR, RING_NEED_WAKEUP)  # also the fence
        _wake_unfenced()  # flush(), the fence being the one above
        if self.tail.value == h:
            ts = timespec(int(seconds), int((seconds % 1) * 1e9))
            r, e = futex(self.wake_addr, FUTEX_WAIT, w, ctypes.byref(ts))
            if r < 0 and e not in (11, 110, 4):  # EAGAIN, ETIMEDOUT, EINTR
                raise Error("%s: FUTEX_WAIT: %s" % (self.path, os.strerror(e)))
        atomic_op(self.flags_addr, FUTEX_OP_ANDN, RING_NEED_WAKEUP)

    def close(self):
        """Unmaps the ring; it must not be used afterwards."""
        flush()
        self.head = self.tail = self.flags = self.wake = None  # the views pin the mapping
        self.mm.close()


def read(path):
    """The text of a small file, without surrounding blanks."""
    with open(path, "rb", buffering=0) as f:
        return f.read(65536).decode().strip()


class Domain:
    """One domain directory of a mounted tree (MOUNT/PROVIDER/DOMAIN) and the
    objects made in it through clone files, which stay open (and the
    objects alive) until close()."""

    def __init__(self, mnt, provider, domain):
        ver = read(os.path.join(mnt, "abi_version"))
        if ver != str(ABI_VERSION):
            raise Error("%s/abi_version is %s; this module speaks %d" % (mnt, ver, ABI_VERSION))
        self.dir = os.path.join(mnt, provider, domain)
        self.fds = []

    def path(self, obj, name):
        return os.path.join(self.dir, obj, name)

    def err(self, obj):
        """The object's err file: why its last command failed."""
        try:
            return read(self.path(obj, "err"))
        except OSError as e:
            return "(cannot read %s: %s)" % (self.path(obj, "err"), e.strerror)

    def write(self, obj, name, text):
        """One write of text and a newline to OBJ/NAME; a failure quotes err."""
        p = self.path(obj, name)
        try:
            fd = os.open(p, os.O_WRONLY)
        except OSError as e:
            raise Error("open %s: %s" % (p, e.strerror))
        try:
            os.write(fd, (text + "\n").encode())
        except OSError as e:
            raise Error("write '%s' to %s: %s (err: %s)" % (text, p, e.strerror, self.err(obj)))
        finally:
            os.close(fd)

    def ctl(self, obj, cmd):
        self.write(obj, "ctl", cmd)

    def read(self, obj, name):
        p = self.path(obj, name)
        try:
            return read(p)
        except OSError as e:
            raise Error("read %s: %s (err: %s)" % (p, e.strerror, self.err(obj)))

    def clone(self, kind):
        """Makes a KIND object and returns "KIND/ID"; it lives until close()."""
        p = self.path(kind, "clone")
        try:
            fd = os.open(p, os.O_RDWR)
            self.fds.append(fd)
            return kind + "/" + os.read(fd, 64).decode().strip()
        except OSError as e:
            raise Error("clone %s: %s" % (p, e.strerror))

    def map(self, obj, name):
        """Maps OBJ/NAME (mr/N/data) whole."""
        p = self.path(obj, name)
        try:
            return map_file(p)
        except OSError as e:
            raise Error("map %s: %s (err: %s)" % (p, e.strerror, self.err(obj)))

    def ring(self, obj, name, want_type):
        """Maps the ring OBJ/NAME (ep/N/tx, ep/N/rx, cq/N/data), checked."""
        p = self.path(obj, name)
        try:
            return Ring(p, want_type)
        except OSError as e:
            raise Error("map %s: %s (err: %s)" % (p, e.strerror, self.err(obj)))

    def close(self):
        """Closes the clone files, which closes the objects."""
        for fd in reversed(self.fds):
            os.close(fd)
        self.fds = []


def ident(obj):
    """The ID of "KIND/ID"."""
    return obj.split("/", 1)[1]
