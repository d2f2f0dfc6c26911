#!/usr/bin/env python3
"""Writes the seed inputs of the convertor, datatype_ctor and portals_ring targets.

Each seed is a few dozen bytes laid out as the target reads them (see `Input` and `grow` in
fuzz/src/lib.rs and fuzz_targets/portals_ring.rs): a handful of deliberate cases the fuzzer
mutates from. Run from anywhere: `python3 fuzz/seeds/make-seeds.py` (it rewrites the files).
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# Index of each predefined type in stormpi_fuzz::PREDEFINED.
BYTE, CHAR, SHORT, INT, FLOAT, DOUBLE, LONG_LONG, DCOMPLEX, DOUBLE_INT, SHORT_INT, TWO_INT, \
    LONG_DOUBLE, LB, UB = range(14)
# Constructors, as `grow` numbers them.
CONTIG, VECTOR, HVECTOR, INDEXED, HINDEXED, IBLOCK, HIBLOCK, STRUCT, RESIZED, SUBARRAY, \
    DARRAY, DUP = range(12)


def u16(v):
    return struct.pack("<H", v)


def write(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(bytes(data))


# ---- datatype_ctor (Args::Extreme) ------------------------------------------------------------
# Input::int(small): a selector byte (0 MAX, 1 MIN, 2 -1, 3 u32 follows, 4 1<<(next % 31),
# 5 -(next), else next % (small + 1)); Input::aint likewise (0 MAX, 1 MIN, 4 u64 follows,
# 5 1<<(next % 63), 6 -(1<<(next % 63)), else i16 % (small + 1)).
def small(v):
    return [8, v]


def pow2(k):
    return [4, k]


# 2^30 doubles, 2^29 of those (2^62 bytes), then 8 of those: 2^65 bytes must be refused.
write("datatype_ctor", "contiguous-2-65",
      [CONTIG] + pow2(30) + list(u16(DOUBLE))
      + [CONTIG] + pow2(29) + list(u16(14))
      + [CONTIG] + small(8) + list(u16(15)))
# A vector of 2^31-1 pairs of INTs with a stride of -64 extents.
write("datatype_ctor", "vector-negative-stride",
      [VECTOR] + [0] + small(2) + list(u16(INT)) + [5, 64])
# An hvector whose byte stride is isize::MIN, over a struct with LB and UB markers.
write("datatype_ctor", "struct-markers-hvector",
      [STRUCT, 3] + list(u16(LB)) + list(u16(DOUBLE_INT)) + list(u16(UB))
      + small(1) + small(2) + small(1) + [7, 0xf0, 0xff] + [7, 8, 0] + [7, 64, 0]
      + [HVECTOR] + small(3) + small(1) + list(u16(14)) + [1])
# A resized type at the bottom of the address space, then a contiguous of it.
write("datatype_ctor", "resized-bottom",
      [RESIZED] + list(u16(SHORT_INT)) + [3, 100] + [7, 16, 0]
      + [CONTIG] + small(2) + list(u16(14)))
# A 3-dimensional subarray with large sizes, and a darray over it.
write("datatype_ctor", "subarray-darray",
      [SUBARRAY] + list(u16(DOUBLE)) + [1, 2] + [0]
      + [3] + list(struct.pack("<I", 1 << 20)) + [3] + list(struct.pack("<I", 1 << 20)) + small(5)
      + small(4) + small(4) + small(3) + small(0) + small(1) + small(2)
      + [DARRAY] + list(u16(14)) + [1, 1] + [1] + small(6) + small(5)
      + list(u16(1)) + list(u16(2)) + [0] + [1] + small(2) + small(2) + small(3) + [1]
      + small(4))

# ---- convertor (Args::Small) ------------------------------------------------------------------
# Small counts are `byte % 4`, strides in extents `byte % 9 - 4`, byte displacements
# `byte % 129 - 64`, subarray sizes `1 + byte % 4`. After the types: which of the newest four
# (u16), the count (`1 + byte % 3`), the filler's seed (u64), then fragment lengths.
TAIL = list(u16(0)) + [1] + list(struct.pack("<Q", 0x9e3779b97f4a7c15)) \
    + [3, 50, 1, 200, 7, 0, 9, 13, 2, 90, 5, 0, 77, 31, 1, 120] * 4
write("convertor", "vector-of-double-int",
      [0, VECTOR, 3, 2] + list(u16(DOUBLE_INT)) + [7] + TAIL)
write("convertor", "struct-padded",
      [0, STRUCT, 2] + list(u16(INT)) + list(u16(SHORT_INT)) + list(u16(CHAR))
      + [1, 2, 3] + [64, 72, 84] + TAIL)
write("convertor", "subarray-fortran",
      [1, SUBARRAY] + list(u16(DCOMPLEX)) + [1, 1] + [3, 3] + [1, 2] + [1, 0]
      + [CONTIG, 2] + list(u16(14)) + TAIL)
write("convertor", "resized-negative-hindexed",
      [1, RESIZED] + list(u16(DOUBLE)) + [56, 80]
      + [HINDEXED] + list(u16(14)) + [2] + [0] + [1, 3, 2] + [60, 64, 100] + TAIL)

# ---- portals_ring ---------------------------------------------------------------------------
KIND = dict(PUT=1, GET=2, ATOMIC=3, FETCH=4, DATA=5, ACK=6, REPLY=7, WRAP=8)
MORE, CMA = 1, 2
PTL_ME_OP_PUT, PTL_ME_OP_GET, PTL_ME_USE_ONCE, PTL_ME_MANAGE_LOCAL = 2, 4, 8, 1 << 16
PTL_SUM, PTL_CSWAP, PTL_INT64_T, PTL_ACK_REQ = 4, 10, 6, 1
OPS = [0xE0000000, 0xE0000001, 0xE0000002]  # the target's own get, put and fetch


def hdr(kind, flags=0, ni=0, ack=0, match=0, hdr_data=0, length=0, offset=0, addr=0, op=0, pt=0,
        uid=0, extra=0, payload=0):
    word = KIND[kind] | flags << 8 | ni << 16 | ack << 24 | payload << 32
    return struct.pack("<QQQQQQIIII", word, match, hdr_data, length, offset, addr, op, pt, uid,
                       extra)


def framed(kind, payload=b"", **kw):
    # Framed mode: 64 header bytes, the payload length (u16), the payload.
    return hdr(kind, **kw) + u16(len(payload)) + payload


def setup(mode, entry_opts=(0, 0, 0, 0)):
    # mode; four buffer sizes; queue capacity; flow control; four entries (portal table entry,
    # list, options, [scatter/gather for the last], counter, match bits, ignore bits, min free).
    b = [mode] + list(u16(256)) + list(u16(64)) + list(u16(600)) + list(u16(32)) + [6, 1]
    for i, opts in enumerate(entry_opts):
        b += [0, i % 2] + list(struct.pack("<I", opts))
        if i == 3:
            b += [1]
        b += [0, 5 + i, 0, 16]
    return bytes(b)


puts = (framed("PUT", b"x" * 32, match=5, length=32)
        + framed("GET", match=6, length=16, ack=PTL_ACK_REQ, op=77)
        + framed("ATOMIC", struct.pack("<q", 3), match=5, length=8,
                 extra=PTL_SUM | PTL_INT64_T << 8)
        + framed("FETCH", struct.pack("<qq", 1, 2), match=5, length=8,
                 extra=PTL_CSWAP | PTL_INT64_T << 8, op=78)
        + framed("REPLY", b"r" * 128, length=128, op=OPS[0])
        + framed("ACK", length=64, op=OPS[1])
        + framed("REPLY", b"f" * 8, length=8, op=OPS[2]))
write("portals_ring", "framed-each-kind", setup(1, (PTL_ME_USE_ONCE, 0, PTL_ME_MANAGE_LOCAL, 0))
      + puts)
staged = (framed("PUT", b"a" * 1000, flags=MORE, match=7, length=2500, ack=PTL_ACK_REQ, op=9)
          + framed("DATA", b"b" * 1000, flags=MORE)
          + framed("DATA", b"c" * 500)
          + framed("PUT", b"", flags=CMA, match=5, length=100, addr=0x1000, ack=PTL_ACK_REQ))
write("portals_ring", "framed-staged-and-cma", setup(3) + staged)


def raw(kind, payload=b"", **kw):
    # Raw mode: the ring's bytes themselves, each record padded to 64 bytes.
    r = hdr(kind, payload=len(payload), **kw) + payload
    return r + b"\0" * (-len(r) % 64)


write("portals_ring", "raw-put-then-wrap", setup(0)
      + raw("PUT", b"p" * 16, match=5, length=16)
      + raw("PUT", b"q" * 8, match=5, length=64)
      + struct.pack("<Q", KIND["WRAP"]))
write("portals_ring", "raw-past-the-end", setup(2)
      + raw("ACK", op=OPS[1]) + hdr("PUT", payload=1 << 20, length=1 << 20))
