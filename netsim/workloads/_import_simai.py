"""SimAI / ASTRA-sim 1.0 text workloads (aliyun/SimAI `example/*.txt`, written by AICB).

Format, as SimAI's astra-sim reads it (astra-sim-alibabacloud/astra-sim/workload/Workload.cc,
`initialize_workload`):

    HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 1 vpp: 8 ga: 1 all_gpus: 16 ...
    2
    embedding_layer  -1  556000  ALLREDUCE  16777216  1  NONE  0  1  ALLREDUCE  67108864  1

line 1: the parallelism policy, then `key: value` pairs; line 2: the number of layer lines; then per layer
12 whitespace-separated columns: name, a reserved -1, forward compute time, forward collective and its
size, input-gradient compute, collective, size, weight-gradient compute, collective, size, and the update
time paid after each of the layer's collectives. Times are simulator ticks of 1 ns (Common.hh: FREQ =
1000 ticks per us); sizes are bytes.

Collectives: ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL or NONE. Forward and input-gradient ones run in
the rank's tensor-parallel (TP) group, weight-gradient ones in its data-parallel (DP) group; a suffix _EP
or _DP_EP names the expert-parallel group or the DP group within experts. Groups follow SimAI's MockNccl
(MockNcclGroup.cc): TP groups are blocks of `tp` consecutive ranks; DP group i is ranks i, i + n/dp, ...;
EP groups take rank k of `ep` consecutive TP groups; DP_EP groups rank k of TP groups i, i + ep, ...

Schedule (Workload.cc, `iterate_hybrid_parallel_Transformer_fwd_in_bckwd`), one pass per rank: layers in
order, forward compute then its collective, blocking; then layers in reverse, input-gradient compute and its
collective (blocking), weight-gradient compute and its collective, which does not block: weight-gradient
collectives run behind later compute, one after another (FIFO), and the pass ends when the last is done.
AICB writes gradient-accumulation micro-batches out as repeated layer lines, so `ga` and `vpp` are read
but not replayed. Pipeline parallelism (pp > 1) and activation recomputation (checkpoints) are refused.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from .._checks import read_text
from .._scenario import ScenarioError
from ._base import Workload
from ._import import RankProgram

if TYPE_CHECKING:
    from .._costs import CostModel

__all__ = ["SimAILayer", "SimAIWorkload", "read_simai"]

POLICIES = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_TRANSFORMER")
#: SimAI's collective names (before any _EP / _DP_EP suffix) -> netsim collective kinds
COLLECTIVES = {
    "ALLREDUCE": "allreduce",
    "ALLGATHER": "allgather",
    "REDUCESCATTER": "reducescatter",
    "ALLTOALL": "alltoall",
}
GROUPS = ("TP", "DP", "EP", "DP_EP")
_NS = 1e-9  # s per SimAI tick


@dataclasses.dataclass(frozen=True)
class SimAIPhase:
    """One phase of a layer: compute (s), then a collective of `size` bytes in `group`
    ("TP", "DP", "EP" or "DP_EP"); kind None when the phase has no collective."""

    compute: float
    kind: str | None = None
    group: str = ""
    size: float = 0.0


@dataclasses.dataclass(frozen=True)
class SimAILayer:
    """One layer line: forward, input-gradient and weight-gradient phases; `update` s after each
    collective; `line`: its line number in the file."""

    name: str
    fwd: SimAIPhase
    ig: SimAIPhase
    wg: SimAIPhase
    update: float
    line: int


@dataclasses.dataclass(frozen=True)
class SimAIWorkload:
    """A parsed SimAI workload file. tp, ep, pp, vpp, ga: the header's parallel sizes; dp = n / (tp * pp)."""

    name: str
    policy: str
    n_ranks: int
    tp: int
    ep: int
    pp: int
    vpp: int
    ga: int
    layers: tuple[SimAILayer, ...]

    @property
    def dp(self) -> int:
        return self.n_ranks // (self.tp * self.pp)

    def groups(self, kind: str) -> list[list[int]]:
        """The rank groups of `kind` ("TP", "DP", "EP", "DP_EP") as SimAI's MockNcclGroup builds them."""
        n, tp, ep = self.n_ranks, self.tp, self.ep
        if kind == "TP":
            return [list(range(i * tp, (i + 1) * tp)) for i in range(n // tp)]
        if kind == "DP":
            stride = n // self.dp
            return [[i + j * stride for j in range(self.dp)] for i in range(stride)]
        if kind == "EP":
            return [
                [(i * ep + m) * tp + k for m in range(ep)] for i in range(n // tp // ep) for k in range(tp)
            ]
        if kind == "DP_EP":
            dp_ep = self.dp // ep
            return [[(i + m * ep) * tp + k for m in range(dp_ep)] for i in range(ep) for k in range(tp)]
        raise ScenarioError(f"group: unknown {kind!r}; known: {list(GROUPS)}")

    def workload(self, ranks, costs: CostModel | None = None) -> Workload:
        """The flows and tasks of one pass on nodes `ranks` (rank i on ranks[i]); see the module docstring."""
        return self.program(ranks, costs).workload(self.name)

    def program(self, ranks, costs: CostModel | None = None) -> RankProgram:
        """The workload's builder, which also lists its collectives (`RankProgram.collectives`)."""
        if len(ranks) != self.n_ranks:
            raise ScenarioError(f"ranks: {self.name} has {self.n_ranks} ranks, got {len(ranks)} nodes")
        p = RankProgram(ranks, costs)
        groups = {g: self.groups(g) for g in GROUPS}
        ready = {r: () for r in range(self.n_ranks)}  # what each rank's next operation waits on
        wg_stream = {r: () for r in range(self.n_ranks)}  # the last weight-gradient collective, per rank

        def phase(i, layer, tag, ph, after, blocking=True):
            out = {r: p.compute(r, f"{i}:{layer.name}/{tag}@{r}", ph.compute, after[r]) for r in after}
            if ph.kind is None:
                return out, out
            issued = out if blocking else {r: out[r] + wg_stream[r] for r in out}
            done = {}
            for g, members in enumerate(groups[ph.group]):
                name = f"{i}:{layer.name}/{tag}.{ph.kind}.{ph.group.lower()}{g}"
                done.update(p.collective(ph.kind, members, ph.size, name, issued))
            done = {r: p.delay(r, f"{i}:{layer.name}/{tag}.update@{r}", layer.update, done[r]) for r in done}
            return (done, out) if blocking else (out, done)

        for i, layer in enumerate(self.layers):
            ready, _ = phase(i, layer, "fwd", layer.fwd, ready)
        for i in reversed(range(len(self.layers))):
            layer = self.layers[i]
            ready, _ = phase(i, layer, "ig", layer.ig, ready)
            ready, stream = phase(i, layer, "wg", layer.wg, ready, blocking=False)
            if layer.wg.kind is not None:
                wg_stream = stream
        return p


def read_simai(path: str | os.PathLike) -> SimAIWorkload:
    """Reads a SimAI / ASTRA-sim 1.0 text workload (see the module docstring).

    Raises:
        ScenarioError: naming file:line and the field for a malformed or unsupported file.
        OSError: the file cannot be read.
    """
    name = os.fspath(path)
    try:
        text = read_text(name)  # UTF-8/16/32, a byte-order mark or none
    except ScenarioError as e:
        raise ScenarioError(f"not a SimAI workload: {e}") from None
    lines = text.splitlines()
    if not lines or not lines[0].split():
        raise ScenarioError(
            f"{name}:1: empty; expected a header such as 'HYBRID_TRANSFORMER_FWD_IN_BCKWD ...'"
        )
    tokens = lines[0].split()
    policy = tokens[0]
    if policy not in POLICIES:
        raise ScenarioError(
            f"{name}:1: parallelism policy {policy!r} is not supported; supported: {', '.join(POLICIES)}"
        )
    header = _header(name, tokens[1:])
    n, tp = header.get("all_gpus"), header.get("model_parallel_NPU_group")
    if n is None or n < 1:
        raise ScenarioError(f"{name}:1: all_gpus: expected a whole number >= 1, got {n}")
    tp = tp or n  # SimAI: a TP group of 0 means all ranks
    ep, pp, vpp, ga = (header.get(k, 1) or 1 for k in ("ep", "pp", "vpp", "ga"))
    if pp != 1:
        raise ScenarioError(f"{name}:1: pp: pipeline parallelism (pp: {pp}) is not supported; only pp: 1")
    if header.get("checkpoints", 0) or header.get("checkpoint_initiates", 0):
        raise ScenarioError(f"{name}:1: checkpoints: activation recomputation is not supported; only 0")
    if n % tp:
        raise ScenarioError(f"{name}:1: model_parallel_NPU_group: {tp} does not divide all_gpus: {n}")
    if (n // tp) % ep:
        raise ScenarioError(f"{name}:1: ep: {ep} does not divide the data-parallel size {n // tp}")
    if len(lines) < 2 or not lines[1].strip().isdigit():
        got = lines[1].strip() if len(lines) > 1 else "(end of file)"
        raise ScenarioError(f"{name}:2: expected the number of layer lines, got {got!r}")
    count = int(lines[1])
    body = [(k + 1, line.split()) for k, line in enumerate(lines) if k >= 2 and line.strip()]
    if len(body) != count:
        raise ScenarioError(f"{name}:2: announces {count} layer lines, the file has {len(body)}")
    layers = tuple(_layer(name, number, cols) for number, cols in body)
    return SimAIWorkload(os.path.splitext(os.path.basename(name))[0], policy, n, tp, ep, pp, vpp, ga, layers)


def _header(name: str, tokens: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, token in enumerate(tokens):
        key = token.rstrip(":")
        if token.endswith(":") or key == "pp_comm":
            value = tokens[k + 1] if k + 1 < len(tokens) else "(end of line)"
            if not value.isdigit():
                raise ScenarioError(f"{name}:1: {key}: expected a whole number, got {value!r}")
            out[key] = int(value)
    return out


def _layer(name: str, number: int, cols: list[str]) -> SimAILayer:
    where = f"{name}:{number}"
    if len(cols) != 12:
        raise ScenarioError(
            f"{where}: expected 12 columns (name, -1, then compute, collective, size for forward, "
            f"input gradient and weight gradient, then the update time), got {len(cols)}"
        )

    def whole(k: int, field: str) -> int:
        if not cols[k].isdigit():
            raise ScenarioError(
                f"{where}: {field} (column {k + 1}): expected a whole number, got {cols[k]!r}"
            )
        return int(cols[k])

    def phase(k: int, tag: str, plain_group: str) -> SimAIPhase:
        compute = whole(k, f"{tag} compute time") * _NS
        comm, size = cols[k + 1], whole(k + 2, f"{tag} collective size")
        if comm == "NONE":
            return SimAIPhase(compute)
        base, _, suffix = comm.partition("_")
        group = {"": plain_group, "EP": "EP", "DP_EP": "DP_EP"}.get(suffix)
        if base not in COLLECTIVES or group is None:
            raise ScenarioError(
                f"{where}: {tag} collective (column {k + 2}): unknown {comm!r}; known: NONE, "
                f"{', '.join(COLLECTIVES)}, each optionally with _EP or _DP_EP"
            )
        return SimAIPhase(compute, COLLECTIVES[base], group, float(size))

    return SimAILayer(
        cols[0],
        phase(2, "forward", "TP"),
        phase(5, "input-gradient", "TP"),
        phase(8, "weight-gradient", "DP"),
        whole(11, "update time") * _NS,
        number,
    )
