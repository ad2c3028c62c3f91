"""Chakra execution traces (mlcommons/chakra, schema/protobuf/et_def.proto), as ASTRA-sim 2 reads them.

One file per rank (ASTRA-sim's naming: PREFIX.0.et, PREFIX.1.et, ...), optionally gzipped. A file is a
sequence of protobuf messages, each preceded by its length as a varint (chakra's protolib.py
`encodeMessage`): first a GlobalMetadata, then the Nodes. The messages are decoded here by a small
protobuf wire-format reader (varints, length-delimited fields, fixed32/fixed64; packed or unpacked
repeated fields), so no protobuf package is needed. Field numbers are the schema's:

    Node: id 1, name 2, type 3, ctrl_deps 4, data_deps 5, start_time_micros 6, duration_micros 7, attr 10
    AttributeProto: name 1, then one value field 3-32 (double 3, int64 9, uint64 13, bool 27, string 29, ...)
    GlobalMetadata: version 1, attr 2

Mapping: COMP_NODE -> a task of duration_micros on the rank's GPU (ASTRA-sim: runtimes are in us);
COMM_COLL_NODE (attrs comm_type, comm_size, optional pg_name) -> a netsim collective over the ranks whose
traces hold the same collective: the k-th collective of one process group (pg_name, or none) in each
file is one collective; COMM_SEND_NODE / COMM_RECV_NODE (comm_src, comm_dst, comm_tag, comm_size) -> one
flow per matched pair (the k-th send from s to d with a tag meets the k-th such receive). Data and control
dependencies both become `after`; other node types (metadata, memory) take no time and pass their
dependencies on.

Send/recv timing follows ASTRA-sim's analytical backends (network_frontend/analytical: `sim_send` injects
the chunk when the send node is issued; `sim_recv` completes at once if the chunk has already arrived):
the flow starts when the *send's* dependencies are met; the send node finishes when the flow does; the
recv node finishes when both the flow and the recv's own dependencies are done. So a recv may wait on its
own rank's send, as in ASTRA-sim's custom ring all-reduce (send, then recv from the left neighbour, per
step): waiting for both ends before starting the flow would make that ring a dependency cycle.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import gzip
import os
import re
import struct
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._scenario import ScenarioError
from ._base import Workload
from ._import import RankProgram

if TYPE_CHECKING:
    from .._costs import CostModel

__all__ = ["ChakraNode", "ChakraTrace", "read_chakra"]

#: the NodeType values (et_def.proto) that take time or carry bytes; the others (0 INVALID, 1 METADATA,
#: 2-3 MEM_LOAD/STORE, 8 STORAGE, 9 BATCH, 10 CHECKPOINT) pass their dependencies through
COMP, SEND, RECV, COLL = 4, 5, 6, 7
#: CollectiveCommType (et_def.proto) -> netsim collective kind; None: a barrier (no bytes)
COMM_TYPES = {
    0: "allreduce",
    1: "reduce",
    2: "allgather",
    5: "broadcast",
    6: "alltoall",
    7: "reducescatter",
    8: "reducescatter",
    9: None,
}
COMM_NAMES = {
    0: "ALL_REDUCE",
    1: "REDUCE",
    2: "ALL_GATHER",
    3: "GATHER",
    4: "SCATTER",
    5: "BROADCAST",
    6: "ALL_TO_ALL",
    7: "REDUCE_SCATTER",
    8: "REDUCE_SCATTER_BLOCK",
    9: "BARRIER",
}
# AttributeProto value fields: number -> (kind, packed element wire type / decoder)
_SCALARS = {3: "double", 5: "float", 7: "int", 9: "int", 11: "uint", 13: "uint", 15: "sint", 17: "sint"}
_SCALARS |= {
    19: "fixed32",
    21: "fixed64",
    23: "sfixed32",
    25: "sfixed64",
    27: "bool",
    29: "string",
    31: "bytes",
}
_LISTS = {n + 1: kind for n, kind in _SCALARS.items()}  # DoubleList = 4, ..., BytesList = 32


@dataclasses.dataclass(frozen=True)
class ChakraNode:
    """One Node of an execution trace; attrs: AttributeProto name -> value (lists as tuples)."""

    id: int
    name: str
    type: int
    ctrl_deps: tuple[int, ...] = ()
    data_deps: tuple[int, ...] = ()
    duration_micros: int = 0
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def deps(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(self.data_deps + self.ctrl_deps))


@dataclasses.dataclass(frozen=True)
class ChakraTrace:
    """The execution traces of all ranks: files[i] and nodes[i] are rank i's; versions from GlobalMetadata."""

    name: str
    files: tuple[str, ...]
    versions: tuple[str, ...]
    nodes: tuple[tuple[ChakraNode, ...], ...]

    @property
    def n_ranks(self) -> int:
        return len(self.nodes)

    def workload(self, ranks: Sequence[str], costs: CostModel | None = None) -> Workload:
        """The flows and tasks of the traces on nodes `ranks` (rank i on ranks[i]); see the module docstring."""
        return self.program(ranks, costs).workload(self.name)

    def program(self, ranks: Sequence[str], costs: CostModel | None = None) -> RankProgram:
        """The traces' builder, which also lists their collectives (`RankProgram.collectives`)."""
        if len(ranks) != self.n_ranks:
            raise ScenarioError(f"ranks: {self.name} has {self.n_ranks} ranks, got {len(ranks)} nodes")
        return _Replay(self, RankProgram(ranks, costs)).run()


def read_chakra(source: str | os.PathLike | Sequence[str | os.PathLike]) -> ChakraTrace:
    """Reads Chakra execution traces, one file per rank.

    Args:
        source: a list of .et files (rank i is the i-th), one .et file (a single rank), or an ASTRA-sim
            prefix: PREFIX.0.et, PREFIX.1.et, ... (or a file of that set: its siblings are read too).

    Raises:
        ScenarioError: naming the file (and node) for a malformed trace.
        OSError: a file cannot be read.
    """
    files = _files(source)
    versions, nodes = [], []
    for path in files:
        version, rank_nodes = _read_file(path)
        versions.append(version)
        nodes.append(rank_nodes)
    base = os.path.basename(files[0])
    name = re.sub(r"(\.\d+)?\.et(\.gz)?$", "", base) or base
    return ChakraTrace(name, tuple(files), tuple(versions), tuple(nodes))


def _files(source) -> list[str]:
    if isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        match = re.fullmatch(r"(.*)\.\d+\.et(\.gz)?", path)
        prefix = match.group(1) if match else None if os.path.isfile(path) else path
        if prefix is None:
            return [path]
        numbered = {}
        for f in glob.glob(glob.escape(prefix) + ".*.et*"):
            m = re.fullmatch(re.escape(prefix) + r"\.(\d+)\.et(\.gz)?", f)
            if m:
                numbered[int(m.group(1))] = f
        if not numbered:
            raise OSError(f"{path}: no such file, and no Chakra traces {path}.0.et, {path}.1.et, ...")
        missing = sorted(set(range(max(numbered) + 1)) - set(numbered))
        if missing:
            raise ScenarioError(
                f"{prefix}.{missing[0]}.et: missing (rank {missing[0]} of 0..{max(numbered)})"
            )
        return [numbered[i] for i in range(len(numbered))]
    files = [os.fspath(f) for f in source]
    if not files:
        raise ScenarioError("traces: expected at least one .et file")
    return files


# --- the protobuf wire format ------------------------------------------------------------------------


class _WireError(Exception):
    pass


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise _WireError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise _WireError("varint longer than 10 bytes")


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message: an int for varints, bytes for the rest."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _WireError("field number 0")
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1 or wire == 5:
            width = 8 if wire == 1 else 4
            value, pos = buf[pos : pos + width], pos + width
            if len(value) < width:
                raise _WireError("truncated fixed-width field")
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
            if len(value) < size:
                raise _WireError(f"field {number}: length {size} runs past the message")
        else:
            raise _WireError(f"field {number}: unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _scalar(kind: str, wire: int, value) -> Any:
    if kind in ("int", "uint", "sint", "bool"):
        if wire != 0:
            raise _WireError(f"{kind} value with wire type {wire}")
        if kind == "int":
            return _signed(value)
        if kind == "sint":
            return (value >> 1) ^ -(value & 1)
        return bool(value) if kind == "bool" else value
    if kind in ("string", "bytes"):
        if wire != 2:
            raise _WireError(f"{kind} value with wire type {wire}")
        return value.decode("utf-8", "replace") if kind == "string" else bytes(value)
    fmt = {
        "double": "<d",
        "float": "<f",
        "fixed32": "<I",
        "fixed64": "<Q",
        "sfixed32": "<i",
        "sfixed64": "<q",
    }
    if wire not in (1, 5) or struct.calcsize(fmt[kind]) != len(value):
        raise _WireError(f"{kind} value with wire type {wire}")
    return struct.unpack(fmt[kind], value)[0]


def _repeated(kind: str, wire: int, value) -> list[Any]:
    """Elements of a repeated scalar field: packed (one length-delimited run) or one element."""
    if wire != 2 or kind in ("string", "bytes"):
        return [_scalar(kind, wire, value)]
    out, pos = [], 0
    if kind in ("int", "uint", "sint", "bool"):
        while pos < len(value):
            v, pos = _varint(value, pos)
            out.append(_scalar(kind, 0, v))
        return out
    width = 8 if kind in ("double", "fixed64", "sfixed64") else 4
    if len(value) % width:
        raise _WireError(f"packed {kind} list of {len(value)} bytes")
    return [_scalar(kind, 1 if width == 8 else 5, value[k : k + width]) for k in range(0, len(value), width)]


def _attribute(buf: bytes) -> tuple[str, Any]:
    name, value = "", None
    for number, wire, v in _fields(buf):
        if number == 1 and wire == 2:
            name = v.decode("utf-8", "replace")
        elif number in _SCALARS:
            value = _scalar(_SCALARS[number], wire, v)
        elif number in _LISTS and wire == 2:
            kind = _LISTS[number]
            value = tuple(x for n, w, e in _fields(v) if n == 1 for x in _repeated(kind, w, e))
    return name, value


def _node(buf: bytes) -> ChakraNode:
    fields: dict[str, Any] = {"ctrl_deps": [], "data_deps": [], "attrs": {}}
    for number, wire, v in _fields(buf):
        if number == 1:
            fields["id"] = _scalar("uint", wire, v)
        elif number == 2:
            fields["name"] = _scalar("string", wire, v)
        elif number == 3:
            fields["type"] = _scalar("uint", wire, v)
        elif number in (4, 5):
            fields["ctrl_deps" if number == 4 else "data_deps"] += _repeated("uint", wire, v)
        elif number == 7:
            fields["duration_micros"] = _scalar("uint", wire, v)
        elif number == 10:
            key, value = _attribute(v)
            fields["attrs"][key] = value
    return ChakraNode(
        fields.get("id", 0),
        fields.get("name", ""),
        fields.get("type", 0),
        tuple(fields["ctrl_deps"]),
        tuple(fields["data_deps"]),
        fields.get("duration_micros", 0),
        fields["attrs"],
    )


def _read_file(path: str) -> tuple[str, tuple[ChakraNode, ...]]:
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ScenarioError(f"{path}: not a Chakra trace: bad gzip data ({e})") from None
    messages, pos = [], 0
    try:
        while pos < len(raw):
            size, pos = _varint(raw, pos)
            if pos + size > len(raw):
                raise _WireError(f"message {len(messages)} of {size} bytes runs past the end of the file")
            messages.append(raw[pos : pos + size])
            pos += size
        if not messages:
            raise _WireError("empty file")
        version = next((_scalar("string", w, v) for n, w, v in _fields(messages[0]) if n == 1), "")
        nodes = []
        for k, message in enumerate(messages[1:], start=1):
            try:
                nodes.append(_node(message))
            except _WireError as e:
                raise _WireError(f"node message {k}: {e}") from None
    except _WireError as e:
        raise ScenarioError(f"{path}: not a Chakra trace: {e}") from None
    seen: set[int] = set()
    for node in nodes:
        if node.id in seen:
            raise ScenarioError(f"{path}: node id {node.id} appears twice")
        seen.add(node.id)
    for node in nodes:
        unknown = [d for d in node.deps if d not in seen]
        if unknown:
            raise ScenarioError(
                f"{path}: node {node.id} ({node.name!r}) depends on unknown node id {unknown[0]}"
            )
    return version, tuple(nodes)


# --- replay ------------------------------------------------------------------------------------------


class _Replay:
    """Walks all ranks' nodes in dependency order; collectives wait for every participant, a transfer for
    its send (its recv for the transfer and its own dependencies). `done[(rank, node id)]`: the ids a
    node's successors wait on; `sent[key]`: the ids that finish the transfer of send/recv pair `key`."""

    def __init__(self, trace: ChakraTrace, program: RankProgram):
        self.trace, self.p = trace, program
        self.done: dict[tuple[int, int], tuple[str, ...]] = {}
        # the k-th collective of each process group, and the k-th send/recv of each (src, dst, tag)
        self.colls: dict[tuple[str, int], dict[int, ChakraNode]] = collections.defaultdict(dict)
        self.coll_key: dict[tuple[int, int], tuple[str, int]] = {}
        self.pairs: dict[tuple[int, int, int, int], dict[str, tuple[int, ChakraNode]]] = (
            collections.defaultdict(dict)
        )
        self.pair_key: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        self.sent: dict[tuple[int, int, int, int], tuple[str, ...]] = {}
        for rank, nodes in enumerate(trace.nodes):
            counts: collections.Counter = collections.Counter()
            for node in nodes:
                if node.type == COLL:
                    group = str(node.attrs.get("pg_name", "") or "")
                    key = (group, counts[("coll", group)])
                    counts[("coll", group)] += 1
                    self.colls[key][rank] = node
                    self.coll_key[(rank, node.id)] = key
                elif node.type in (SEND, RECV):
                    src, dst = self._ends(rank, node)
                    tag = int(node.attrs.get("comm_tag", 0) or 0)
                    side = "send" if node.type == SEND else "recv"
                    key = (src, dst, tag, counts[(side, src, dst, tag)])
                    counts[(side, src, dst, tag)] += 1
                    self.pairs[key][side] = (rank, node)
                    self.pair_key[(rank, node.id)] = key
        for key, ends in self.pairs.items():
            if len(ends) != 2:
                side, (rank, node) = next(iter(ends.items()))
                raise ScenarioError(
                    f"{trace.files[rank]}: node {node.id} ({node.name!r}): {side} from rank {key[0]} to rank "
                    f"{key[1]} (tag {key[2]}, #{key[3]}) has no matching {'recv' if side == 'send' else 'send'}"
                )

    def _ends(self, rank: int, node: ChakraNode) -> tuple[int, int]:
        where = f"{self.trace.files[rank]}: node {node.id} ({node.name!r})"
        other = "comm_dst" if node.type == SEND else "comm_src"
        peer = node.attrs.get(other)
        if not isinstance(peer, int) or isinstance(peer, bool) or not 0 <= peer < self.trace.n_ranks:
            raise ScenarioError(
                f"{where}: {other}: expected a rank in [0, {self.trace.n_ranks}), got {peer!r}"
            )
        return (rank, peer) if node.type == SEND else (peer, rank)

    def _after(self, rank: int, node: ChakraNode) -> tuple[str, ...] | None:
        """What the node waits on, or None while a dependency is not placed yet."""
        out: list[str] = []
        for d in node.deps:
            got = self.done.get((rank, d))
            if got is None:
                return None
            out += got
        return tuple(dict.fromkeys(out))

    def _size(self, rank: int, node: ChakraNode) -> float:
        size = node.attrs.get("comm_size", 0) or 0
        if not isinstance(size, int | float) or isinstance(size, bool) or size < 0:
            raise ScenarioError(
                f"{self.trace.files[rank]}: node {node.id} ({node.name!r}): comm_size: expected bytes >= 0, "
                f"got {size!r}"
            )
        return float(size)

    def run(self) -> RankProgram:
        pending = [list(nodes) for nodes in self.trace.nodes]
        while any(pending):
            progress = False
            for rank in range(self.trace.n_ranks):
                left = []
                for node in pending[rank]:
                    if (rank, node.id) in self.done or self._place(rank, node):
                        progress = True  # placed now, or with its collective or send/recv partner
                    else:
                        left.append(node)
                pending[rank] = left
            if not progress:
                rank = next(r for r, nodes in enumerate(pending) if nodes)
                node = pending[rank][0]
                raise ScenarioError(
                    f"{self.trace.files[rank]}: node {node.id} ({node.name!r}) can never start: a dependency "
                    "cycle, or a collective or send/recv that another rank never reaches"
                )
        return self.p

    def _place(self, rank: int, node: ChakraNode) -> bool:
        after = self._after(rank, node)
        if after is None:
            return False
        label = f"r{rank}.{node.id}" + (f" {node.name}" if node.name else "")
        if node.type == COMP:
            self.done[(rank, node.id)] = self.p.compute(rank, label, node.duration_micros * 1e-6, after)
        elif node.type == COLL:
            return self._collective(self.coll_key[(rank, node.id)])
        elif node.type == SEND:
            self.done[(rank, node.id)] = self._transfer(self.pair_key[(rank, node.id)], after)
        elif node.type == RECV:
            sent = self.sent.get(self.pair_key[(rank, node.id)])
            if sent is None:  # its send is not issued yet
                return False
            self.done[(rank, node.id)] = tuple(dict.fromkeys(sent + after))
        else:
            self.done[(rank, node.id)] = after
        return True

    def _collective(self, key: tuple[str, int]) -> bool:
        members = self.colls[key]
        afters = {}
        for rank, node in members.items():
            after = self._after(rank, node)
            if after is None:
                return False
            afters[rank] = after
        (first, node), *_ = members.items()
        where = f"{self.trace.files[first]}: node {node.id} ({node.name!r})"
        code = node.attrs.get("comm_type")
        if code not in COMM_TYPES:
            known = ", ".join(f"{c} {COMM_NAMES[c]}" for c in COMM_TYPES)
            got = f"{code} {COMM_NAMES[code]}" if code in COMM_NAMES else repr(code)
            raise ScenarioError(f"{where}: comm_type: {got} is not supported; supported: {known}")
        kind, size = COMM_TYPES[code], self._size(first, node)
        for rank, other in members.items():
            if other.attrs.get("comm_type") != code or self._size(rank, other) != size:
                raise ScenarioError(
                    f"{self.trace.files[rank]}: node {other.id} ({other.name!r}): collective #{key[1]} of process "
                    f"group {key[0] or '(none)'!r} differs from rank {first}'s (comm_type {code}, comm_size {size:g})"
                )
        group = sorted(members)
        name = f"{kind or 'barrier'}.{key[0] or 'all'}#{key[1]}"
        if kind is None:  # a barrier: every member waits for all of them
            joined = tuple(dict.fromkeys(a for r in group for a in afters[r]))
            done = {r: joined for r in group}
        else:
            done = self.p.collective(kind, group, size, name, afters)
        for rank, node in members.items():
            self.done[(rank, node.id)] = done[rank]
        return True

    def _transfer(self, key: tuple[int, int, int, int], after: tuple[str, ...]) -> tuple[str, ...]:
        """The flow of send/recv pair `key`, started once the send's dependencies `after` are done."""
        s_rank, send = self.pairs[key]["send"]
        src, dst, tag, k = key
        self.sent[key] = self.p.transfer(
            f"p2p r{src}->r{dst} tag{tag}#{k}", src, dst, self._size(s_rank, send), after, ()
        )
        return self.sent[key]
