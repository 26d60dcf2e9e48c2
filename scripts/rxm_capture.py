#!/usr/bin/env python3
"""Reassembles the TCP streams of a loopback pcap and prints them as
libfabric 1.17 tcp / tcp;ofi_rxm messages, for providers/rxm/wire/testdata.

usage: rxm_capture.py FILE.pcap OOBPORT
       rxm_capture.py FILE.pcap PORT1,PORT2   (the rxm ports, for rxm_probe)

The fi_pingpong control connection (OOBPORT) tells which ports are the rxm
endpoints' listening ports (each side sends u32 BE name length, u32 addr
format, sockaddr). Every other TCP connection that touches one of those
ports is printed: first the CM message each side sends, then each data
message, one per line:

  <conn> <dir> <kind> <hex>

conn is the connection number in order of its SYN, dir is "c>s" (from the
side that connected) or "s>c", kind is cm, msg or raw (bytes that do not
parse), hex is the message's bytes (a data message's payload is cut after
512 bytes, with the total length noted).
"""
import struct
import sys


def packets(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    if magic != 0xA1B2C3D4:
        sys.exit("not a little-endian microsecond pcap")
    linktype = struct.unpack("<I", data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        _, _, caplen, _ = struct.unpack("<IIII", data[off:off + 16])
        off += 16
        pkt = data[off:off + caplen]
        off += caplen
        if linktype == 1:  # Ethernet (tcpdump -i lo)
            if struct.unpack("!H", pkt[12:14])[0] != 0x0800:
                continue
            pkt = pkt[14:]
        elif linktype == 113:  # Linux cooked
            pkt = pkt[16:]
        else:
            sys.exit("unsupported link type %d" % linktype)
        if len(pkt) < 20 or pkt[0] >> 4 != 4 or pkt[9] != 6:
            continue
        ihl = (pkt[0] & 15) * 4
        total = struct.unpack("!H", pkt[2:4])[0] or len(pkt)  # 0: TSO
        src, dst = pkt[12:16], pkt[16:20]
        tcp = pkt[ihl:total]
        sport, dport, seq = struct.unpack("!HHI", tcp[:8])
        doff = (tcp[12] >> 4) * 4
        flags = tcp[13]
        yield (src, sport), (dst, dport), seq, flags, tcp[doff:]


def streams(path):
    """Returns connections in SYN order: [(client, server, c2s, s2c)]."""
    conns = {}
    order = []
    for src, dst, seq, flags, payload in packets(path):
        syn, ack = flags & 0x02, flags & 0x10
        if syn and not ack:
            key = (src, dst)
            conns[key] = {"isn": {src: seq}, "data": {src: {}, dst: {}}}
            order.append(key)
            continue
        key = (src, dst) if (src, dst) in conns else (dst, src)
        c = conns.get(key)
        if c is None:
            continue
        if syn and ack:
            c["isn"][src] = seq
            continue
        if payload and src in c["isn"]:
            c["data"][src][(seq - c["isn"][src] - 1) & 0xFFFFFFFF] = payload
    out = []
    for key in order:
        c = conns[key]
        cli, srv = key
        out.append((cli, srv, join(c["data"][cli]), join(c["data"][srv])))
    return out


def join(segs):
    """The bytes of one direction, or None if segments are missing."""
    buf = bytearray()
    for off in sorted(segs):
        seg = segs[off]
        if off > len(buf):
            return None
        buf[off:off + len(seg)] = seg
    return bytes(buf)


def oob_ports(c2s, s2c):
    """The rxm listening ports from fi_pingpong's address exchange."""
    ports = []
    for b in (s2c, c2s):
        n = struct.unpack("!I", b[:4])[0]
        sa = b[8:8 + n]
        ports.append(struct.unpack("!H", sa[2:4])[0])
    return ports


def split(b):
    """Splits one direction into its CM message and data messages."""
    msgs = []
    if len(b) < 32:
        return [("raw", b)]
    n = struct.unpack("!H", b[2:4])[0]
    msgs.append(("cm", b[:32 + n]))
    off = 32 + n
    while off < len(b):
        if len(b) - off < 16:
            msgs.append(("raw", b[off:]))
            break
        size = struct.unpack("<Q", b[off + 8:off + 16])[0]
        msgs.append(("msg", b[off:off + size]))
        off += size
    return msgs


def main():
    path = sys.argv[1]
    all_streams = streams(path)
    ports = None
    if "," in sys.argv[2]:
        ports = [int(p) for p in sys.argv[2].split(",")]
    else:
        oob = int(sys.argv[2])
        for cli, srv, c2s, s2c in all_streams:
            if srv[1] == oob:
                ports = oob_ports(c2s, s2c)
        if ports is None:
            sys.exit("no control connection on port %d" % oob)
    print("# rxm listening ports: %d, %d" % tuple(ports))
    n = 0
    empty = 0
    for cli, srv, c2s, s2c in all_streams:
        if srv[1] not in ports:
            continue
        if c2s is None or s2c is None:
            sys.exit("segments missing from a connection to port %d" % srv[1])
        if not c2s and not s2c:
            empty += 1  # refused or closed before the CM message
            continue
        n += 1
        print("# conn %d: %s:%d -> %s:%d" % (n, ".".join(map(str, cli[0])), cli[1],
                                             ".".join(map(str, srv[0])), srv[1]))
        # Interleaving between directions is not kept: print the first
        # direction in full, then the other.
        for d, b in (("c>s", c2s), ("s>c", s2c)):
            for kind, m in split(b):
                note = ""
                if len(m) > 64 + 16 + 512:
                    note = " # %d bytes" % len(m)
                    m = m[:64 + 16 + 512]
                print("%d %s %s %s%s" % (n, d, kind, m.hex(), note))
    if empty:
        print("# %d connections carried no data" % empty)


if __name__ == "__main__":
    main()
