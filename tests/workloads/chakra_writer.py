"""A small Chakra execution-trace writer for tests: the protobuf wire format, written independently of
netsim's reader from et_def.proto's field numbers, framed as chakra's protolib.encodeMessage does
(each message preceded by its length as a varint)."""

from __future__ import annotations

import gzip
import struct

COMP, SEND, RECV, COLL, METADATA = 4, 5, 6, 7, 1
ALL_REDUCE, ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER, BARRIER, GATHER = 0, 2, 6, 7, 9, 3


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64: two's complement, 10 bytes
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(0x80 | bits)
        else:
            out.append(bits)
            return bytes(out)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def length_delimited(number: int, payload: bytes) -> bytes:
    return key(number, 2) + varint(len(payload)) + payload


def attribute(name: str, value) -> bytes:
    """AttributeProto: bool -> bool_val 27, int -> int64_val 9, float -> double_val 3, str -> string_val 29,
    list of int -> int64_list 10 (packed), list of bool -> bool_list 28."""
    out = length_delimited(1, name.encode())
    if isinstance(value, bool):
        out += key(27, 0) + varint(int(value))
    elif isinstance(value, int):
        out += key(9, 0) + varint(value)
    elif isinstance(value, float):
        out += key(3, 1) + struct.pack("<d", value)
    elif isinstance(value, str):
        out += length_delimited(29, value.encode())
    elif all(isinstance(v, bool) for v in value):
        out += length_delimited(28, length_delimited(1, b"".join(varint(int(v)) for v in value)))
    else:
        out += length_delimited(10, length_delimited(1, b"".join(varint(v) for v in value)))
    return out


def node(
    id, name="", type=COMP, *, data_deps=(), ctrl_deps=(), duration_micros=0, packed=True, **attrs
) -> bytes:
    """A Node message; deps packed (proto3's default) or one field per element."""
    out = key(1, 0) + varint(id)
    if name:
        out += length_delimited(2, name.encode())
    out += key(3, 0) + varint(type)
    for number, deps in ((4, ctrl_deps), (5, data_deps)):
        if deps and packed:
            out += length_delimited(number, b"".join(varint(d) for d in deps))
        else:
            out += b"".join(key(number, 0) + varint(d) for d in deps)
    if duration_micros:
        out += key(7, 0) + varint(duration_micros)
    for name_, value in attrs.items():
        out += length_delimited(10, attribute(name_, value))
    return out


def trace(nodes: list[bytes], version: str = "0.0.4") -> bytes:
    """A whole file: GlobalMetadata, then the nodes, each with its varint length."""
    messages = [length_delimited(1, version.encode()), *nodes]
    return b"".join(varint(len(m)) + m for m in messages)


def write(path, nodes: list[bytes], *, compress: bool = False) -> None:
    data = trace(nodes)
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if compress else data)
