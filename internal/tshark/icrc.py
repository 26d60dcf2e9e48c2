#!/usr/bin/env python3
"""An ICRC calculator for RoCEv2 written apart from the Go code, from the
rules alone, to check it: Python's zlib.crc32 over the masked bytes.

  icrc.py hex         stdin: one IP datagram (IPv4 or IPv6, from its IP
                      header on) in hex per line
  icrc.py pcap FILE   every packet of a classic pcap file (Ethernet, as
                      tshark captures loopback, or raw IP)

For each datagram it prints one line: the ICRC computed from the masked
bytes and the ICRC the packet carries (its last 4 bytes, little-endian),
both as 8 hex digits.
"""
import struct
import sys
import zlib


def icrc(ip):
    """Returns (computed, carried) for an IP datagram carrying RoCEv2."""
    b = bytearray(ip)
    version = b[0] >> 4
    if version == 4:
        udp = (b[0] & 0x0F) * 4
        total = struct.unpack(">H", b[2:4])[0]
        b[1] = 0xFF  # TOS
        b[8] = 0xFF  # TTL
        b[10:12] = b"\xff\xff"  # header checksum
    elif version == 6:
        udp = 40
        total = 40 + struct.unpack(">H", b[4:6])[0]
        b[0] |= 0x0F  # traffic class and flow label
        b[1:4] = b"\xff\xff\xff"
        b[7] = 0xFF  # hop limit
    else:
        raise ValueError("IP version %d" % version)
    b = b[:total]  # drop Ethernet padding, if any
    b[udp + 6 : udp + 8] = b"\xff\xff"  # UDP checksum
    b[udp + 8 + 4] = 0xFF  # BTH byte 4: FECN, BECN, reserved
    computed = zlib.crc32(b"\xff" * 8 + bytes(b[:-4]))
    carried = struct.unpack("<I", bytes(b[-4:]))[0]
    return computed, carried


def pcap_datagrams(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        order = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        order = ">"
    else:
        raise ValueError("not a classic pcap file")
    linktype = struct.unpack(order + "I", data[20:24])[0] & 0x0FFFFFFF
    skip = {1: 14, 101: 0}.get(linktype)  # Ethernet, raw IP
    if skip is None:
        raise ValueError("link type %d" % linktype)
    off = 24
    while off + 16 <= len(data):
        caplen = struct.unpack(order + "I", data[off + 8 : off + 12])[0]
        frame = data[off + 16 : off + 16 + caplen]
        off += 16 + caplen
        yield frame[skip:]


def main():
    if sys.argv[1:2] == ["hex"]:
        datagrams = (bytes.fromhex(l) for l in sys.stdin.read().split())
    elif sys.argv[1:2] == ["pcap"] and len(sys.argv) == 3:
        datagrams = pcap_datagrams(sys.argv[2])
    else:
        sys.exit(__doc__)
    for d in datagrams:
        print("%08x %08x" % icrc(d))


if __name__ == "__main__":
    main()
