"""Pipeline-parallel training compiled to a flow program: GPipe, 1F1B, interleaved 1F1B, ZB-H1 and
breadth-first (SPipe-style) model chunks.

A schedule is an order of compute ops on each stage device. The compiler turns every op into a Task on
its device, chained to the device's previous op with an `after` edge (tasks that overlap on one device
would share it), sends activations forward and gradients backward as flows over the fabric's real
routes, and optionally adds the data-parallel gradient AllReduce across pipeline replicas and a CPU
optimizer with gradient offload / parameter reload over PCIe (parameters in host memory: per-chunk
parameter fetches and gradient offloads, as SPipe runs them, with its breadth-first schedule and remapped
backward chunks). See docs/pipelines.md for pictures and closed forms.

    costs = TransformerStage(hidden=4096, seq_len=2048, micro_batch=1, layers=8).costs(device_flops=300e12)
    pipe = pipeline(topo, ["gpu0", "gpu1", "gpu2", "gpu3"], schedule="1f1b", microbatches=8, costs=costs)
    result = netsim.simulate(pipe.scenario())
    stats = pipe.stats(result)  # iteration time, bubble fraction, per-device timeline
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from .._checks import count as _count
from .._checks import number, quantity
from .._scenario import Flow, Scenario, ScenarioError, Task
from ._base import Fabric, Workload
from ._memory import Memory, check_fits, gpu_memory, stash_per_layer

__all__ = [
    "SCHEDULES",
    "Offload",
    "Op",
    "Pipeline",
    "PipelineStats",
    "Span",
    "StageCosts",
    "TransformerStage",
    "in_flight",
    "pipeline",
    "pipeline_memory",
    "pipeline_order",
]

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1", "breadth-first")
#: schedules that split each device's layers into `chunks` model chunks
_CHUNKED = ("interleaved", "breadth-first")

#: op kinds: forward, whole backward (input + weight gradient), input-gradient only, weight-gradient only
FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT = "F", "BW", "B", "W"

AllReduce = Callable[[Sequence[str], float], Workload]


@dataclasses.dataclass(frozen=True, kw_only=True)
class StageCosts:
    """Per-micro-batch costs of one pipeline stage (all of its layers).

    Attributes:
        forward: s of the forward pass (F).
        backward_input: s of the input-gradient pass (B). Schedules other than ZB-H1 run B and W as one
            backward task of backward_input + backward_weight seconds.
        activation_bytes: bytes a stage sends to the next one per micro-batch; the gradient sent back has
            the same size. An interleaved chunk sends this much at each of its boundaries.
        backward_weight: s of the weight-gradient pass (W).
        gradient_bytes: bytes of the stage's parameter gradients, reduced across data-parallel replicas
            and offloaded to the host; 0 for neither.
        parameter_bytes: bytes reloaded host -> GPU after an offloaded optimizer step (None: gradient_bytes).
        optimizer_bytes: bytes of the stage's optimizer state on its GPU (none with `Offload`).
        stash_bytes: bytes of activations the stage keeps per micro-batch from its forward to its backward.
        A pipeline's GPU memory (`pipeline_memory`) counts the last three, gradient_bytes, and the stash
        of every micro-batch in flight.
    """

    forward: float
    backward_input: float
    activation_bytes: float
    backward_weight: float = 0.0
    gradient_bytes: float = 0.0
    parameter_bytes: float | None = None
    optimizer_bytes: float = 0.0
    stash_bytes: float = 0.0

    def __post_init__(self):  # numbers or strings with units ("1 ms", "4 MiB"), stored as SI floats
        kinds = {
            "forward": "time",
            "backward_input": "time",
            "activation_bytes": "bytes",
            "backward_weight": "time",
            "gradient_bytes": "bytes",
            "parameter_bytes": "bytes",
            "optimizer_bytes": "bytes",
            "stash_bytes": "bytes",
        }
        for name, kind in kinds.items():
            if name != "parameter_bytes" or self.parameter_bytes is not None:
                value = quantity(
                    getattr(self, name),
                    kind,
                    f"StageCosts.{name}",
                    positive=name in ("forward", "backward_input", "activation_bytes"),
                )
                object.__setattr__(self, name, value)

    @property
    def backward(self) -> float:
        """s of the whole backward pass (B + W)."""
        return self.backward_input + self.backward_weight

    @property
    def reload_bytes(self) -> float:
        return self.gradient_bytes if self.parameter_bytes is None else self.parameter_bytes


@dataclasses.dataclass(frozen=True)
class TransformerStage:
    """FLOP model of a stage of `layers` transformer layers (Narayanan et al., SC'21, with B/W split).

    Per layer and micro-batch (b = micro_batch, s = seq_len, h = hidden, f = ffn_multiplier):
    GEMMs 2bsh²(4 + 2f) (QKV and output projections, two MLP matrices; 24bsh² at f = 4) and attention
    scores 4bs²h. Forward = GEMMs + scores; input gradient B = GEMMs + 2 x scores (both operands of
    QKᵀ and AV); weight gradient W = GEMMs (the scores have no weights). B + W = 2 x forward.
    Parameters: (4 + 2f)h² per layer (biases and norms left out). Activations sent between stages:
    b·s·h values of `bytes_per_value` each. A gated MLP (SwiGLU: three matrices of h x ffn) is
    f = 3·ffn / 2h. With `recompute` (full activation recomputation, Megatron's
    `--recompute-granularity full`) the backward reruns the forward first: B += forward.
    Memory (mixed precision when bytes_per_value < 4): weights and gradients of bytes_per_value, Adam's
    moments (8 B) and fp32 master weights (4 B) per parameter; `stash_per_layer` activations per layer and
    micro-batch (only the layer inputs with recompute), scaled from 16-bit to bytes_per_value; `heads`
    (None: one per 128 of hidden, GPT-3's head size) sizes the attention scores.
    """

    hidden: int
    seq_len: int
    micro_batch: int
    layers: int
    ffn_multiplier: float = 4.0
    bytes_per_value: float = 2.0
    recompute: bool = False
    heads: int | None = None

    def __post_init__(self):
        for name in ("hidden", "seq_len", "micro_batch", "layers"):
            _count(getattr(self, name), f"TransformerStage.{name}")
        if self.heads is not None:
            _count(self.heads, "TransformerStage.heads")
        for name in ("ffn_multiplier", "bytes_per_value"):
            number(getattr(self, name), f"TransformerStage.{name}", positive=True)

    @property
    def parameters(self) -> float:
        return self.layers * (4 + 2 * self.ffn_multiplier) * self.hidden**2

    def flops(self) -> tuple[float, float, float]:
        """(forward, input-gradient (recomputed forward included), weight-gradient) FLOPs of the stage for
        one micro-batch."""
        b, s, h = self.micro_batch, self.seq_len, self.hidden
        gemm = 2 * b * s * h * h * (4 + 2 * self.ffn_multiplier) * self.layers
        scores = 4 * b * s * s * h * self.layers
        forward = gemm + scores
        return forward, gemm + 2 * scores + (forward if self.recompute else 0), gemm

    def costs(self, device_flops: float, *, gradient_bytes_per_value: float | None = None) -> StageCosts:
        """StageCosts on a device that sustains `device_flops` FLOP/s.

        gradient_bytes_per_value: bytes per gradient value (None: bytes_per_value).
        """
        number(device_flops, "device_flops", positive=True)
        per_value = self.bytes_per_value if gradient_bytes_per_value is None else gradient_bytes_per_value
        number(per_value, "gradient_bytes_per_value", positive=True)
        f, b, w = self.flops()
        return StageCosts(
            forward=f / device_flops,
            backward_input=b / device_flops,
            backward_weight=w / device_flops,
            activation_bytes=self.micro_batch * self.seq_len * self.hidden * self.bytes_per_value,
            gradient_bytes=self.parameters * per_value,
            parameter_bytes=self.parameters * self.bytes_per_value,
            optimizer_bytes=self.parameters * (8 + 4 * (self.bytes_per_value < 4)),
            stash_bytes=self.layers
            * self.bytes_per_value
            / 2
            * stash_per_layer(
                self.seq_len,
                self.micro_batch,
                self.hidden,
                self.heads or max(1, self.hidden // 128),
                recompute="full" if self.recompute else "none",
            ),
        )


@dataclasses.dataclass(frozen=True)
class Offload:
    """Optimizer state kept in host memory; the optimizer step runs on a CPU.

    With the parameters on the GPU (Megatron / ZeRO-Offload runs), after a stage's last backward op (and
    its data-parallel AllReduce) its gradients move GPU -> host memory, the CPU steps the optimizer, and
    the new parameters move host -> GPU. With `overlap` each stage starts as soon as its own backward is
    done, in `pieces` pipelined parts (the transfer of part i+1 overlaps the step of part i); without it
    every stage waits for the whole pipeline to finish (the mixed-precision optimizer's global overflow
    check), then moves and steps its state in one piece.

    With `host_parameters` the parameters live in host memory, as in SPipe's runtime: each model chunk's
    parameters move host -> GPU before the chunk runs, each chunk's gradients go to the host as soon as
    its backward has seen the last micro-batch (while the device runs the rest of its backward), and
    nothing is reloaded after the step: the next iteration fetches the parameters. The breadth-first
    schedule needs it and works chunk by chunk (SPipe's stage optimizer): each chunk's parameters are
    fetched before each of its passes, prefetched while the previous pass runs (two chunks resident at
    most), and each chunk is stepped as soon as its gradients are in. Other schedules fetch each chunk
    once (all of a device's chunks stay resident) and step the device's whole state once its gradients
    are in (`overlap`) or after every device's backward (not `overlap`).

    Attributes:
        memory: host memory node the gradients go to: one name, or a mapping GPU -> node.
        cpu: device name of the CPU that runs the step: one name, or a mapping GPU -> CPU.
        step_time: s the CPU needs to step one stage's optimizer state alone (steps sharing a CPU share it;
            a breadth-first chunk's step takes step_time / chunks).
        overlap: start each stage's (chunk's) offload or step when its own backward is done (True) or
            after the whole pipeline.
        pieces: parts each stage's (breadth-first chunk's) gradients and step are split into when
            overlapping (not used by other schedules with host_parameters, which move each chunk's
            gradients in one piece).
        host_parameters: parameters in host memory, fetched before use (see above).
        step_stall: GPU seconds each GPU driven from a CPU loses per second of optimizer step on that CPU,
            in [0, 1): the step's threads take cores from the processes that launch the GPUs' kernels and
            copies. Charged as a task of step_stall x the step's time on each such GPU from the step's
            start, sharing the GPU with its compute, so a GPU that is idle meanwhile loses nothing. 0 (the
            default): steps cost the GPUs nothing.
    """

    memory: str | Mapping[str, str]
    cpu: str | Mapping[str, str]
    step_time: float
    overlap: bool = True
    pieces: int = 4
    host_parameters: bool = False
    step_stall: float = 0.0

    def __post_init__(self):
        object.__setattr__(
            self, "step_time", quantity(self.step_time, "time", "Offload.step_time", positive=True)
        )
        _count(self.pieces, "Offload.pieces")
        stall = number(self.step_stall, "Offload.step_stall")
        if stall >= 1:
            raise ScenarioError(f"Offload.step_stall: must be < 1, got {self.step_stall!r}")
        object.__setattr__(self, "step_stall", stall)

    def memory_of(self, gpu: str) -> str:
        return _lookup(self.memory, gpu, "Offload.memory")

    def cpu_of(self, gpu: str) -> str:
        return _lookup(self.cpu, gpu, "Offload.cpu")


class Op(NamedTuple):
    """One compute op of a schedule: kind (F, BW, B or W), micro-batch, virtual stage."""

    kind: str
    microbatch: int
    stage: int

    @property
    def id(self) -> str:
        return f"{self.kind}{self.microbatch}.s{self.stage}"


def pipeline_order(
    schedule: str, stages: int, microbatches: int, chunks: int = 1, backward_chunks: int | None = None
) -> tuple[tuple[Op, ...], ...]:
    """The op order on each of `stages` devices (device d holds virtual stages d, d + p, ...).

    gpipe: all forwards, then all backwards. 1f1b: p - d - 1 warm-up forwards, then one forward / one
    backward, then the remaining backwards (PipeDream-flush). interleaved: Megatron-LM's interleaved
    1F1B over `chunks` model chunks per device. zb-h1: 1F1B with the backward split into B and W, the
    W passes of device d delayed by d ops so that every device holds p micro-batches in flight (Qi et
    al., ICLR'24, "ZB-H1"). breadth-first: each device runs its `chunks` model chunks one at a time,
    each over all micro-batches: the forwards of chunks 0, 1, ..., then the backwards of the chunks in
    reverse (SPipe's schedule; Lamy-Poirier, "Breadth-First Pipeline Parallelism", MLSys'23).
    `backward_chunks` (breadth-first only; None: chunks) cuts the backward pass into other chunks than
    the forward, as SPipe's remapping does: backward virtual stage b (of p x backward_chunks) lives on
    device b mod p, whatever device ran those layers' forward.

    Raises:
        ScenarioError: unknown schedule, counts < 1, chunks != 1 outside interleaved and breadth-first,
            or an interleaved schedule whose micro-batches are not a multiple of the stages (Megatron-LM's
            rule).
    """
    if schedule not in SCHEDULES:
        raise ScenarioError(f"schedule: unknown schedule {schedule!r}; expected one of {list(SCHEDULES)}")
    p = _count(stages, "stages")
    m = _count(microbatches, "microbatches")
    v = _count(chunks, "chunks")
    if schedule not in _CHUNKED and v != 1:
        raise ScenarioError(
            f"chunks: only the interleaved and breadth-first schedules have model chunks, got chunks={v} "
            f"with schedule {schedule!r}"
        )
    vb = v if backward_chunks is None else _count(backward_chunks, "backward_chunks")
    if schedule != "breadth-first" and vb != v:
        raise ScenarioError(
            f"backward_chunks: only the breadth-first schedule cuts its backward pass into other chunks, "
            f"got backward_chunks={vb} with schedule {schedule!r} and chunks={v}"
        )
    if schedule == "interleaved" and m % p:
        raise ScenarioError(
            f"microbatches: the interleaved schedule needs a multiple of stages={p} "
            f"micro-batches, got microbatches={m}"
        )
    build = {
        "gpipe": _gpipe,
        "1f1b": _one_f_one_b,
        "interleaved": _interleaved,
        "zb-h1": _zb_h1,
        "breadth-first": functools.partial(_breadth_first, vb=vb),
    }[schedule]
    return tuple(tuple(build(d, p, m, v)) for d in range(p))


def _gpipe(d: int, p: int, m: int, v: int) -> list[Op]:
    return [Op(FORWARD, k, d) for k in range(m)] + [Op(BACKWARD, k, d) for k in range(m)]


def _one_f_one_b(d: int, p: int, m: int, v: int) -> list[Op]:
    warmup = min(p - d - 1, m)
    ops = [Op(FORWARD, k, d) for k in range(warmup)]
    for k in range(m - warmup):
        ops += [Op(FORWARD, warmup + k, d), Op(BACKWARD, k, d)]
    return ops + [Op(BACKWARD, k, d) for k in range(m - warmup, m)]


def _interleaved(d: int, p: int, m: int, v: int) -> list[Op]:
    # Megatron-LM's order: "virtual" micro-batch j runs chunk (j // p) % v on micro-batch
    # (j // pv) p + j % p; backwards visit the chunks in reverse. Warm-up is longer than 1F1B's so
    # that the first backward's gradients have come back when the steady phase starts.
    total = m * v

    def op(kind: str, j: int) -> Op:
        chunk = (j % (p * v)) // p
        if kind != FORWARD:
            chunk = v - 1 - chunk
        return Op(kind, (j // (p * v)) * p + j % p, chunk * p + d)

    warmup = min((p - d - 1) * 2 + (v - 1) * p, total)
    ops = [op(FORWARD, j) for j in range(warmup)]
    for j in range(total - warmup):
        ops += [op(FORWARD, warmup + j), op(BACKWARD, j)]
    return ops + [op(BACKWARD, j) for j in range(total - warmup, total)]


def _zb_h1(d: int, p: int, m: int, v: int) -> list[Op]:
    warmup = min(p - d - 1, m)
    ops = [Op(FORWARD, k, d) for k in range(warmup)]
    waiting: list[int] = []  # micro-batches whose W is delayed

    def backward(k: int) -> None:
        ops.append(Op(BACKWARD_INPUT, k, d))
        waiting.append(k)
        if len(waiting) > d:  # device d keeps d weight-gradient passes in reserve
            ops.append(Op(BACKWARD_WEIGHT, waiting.pop(0), d))

    for k in range(m - warmup):
        ops.append(Op(FORWARD, warmup + k, d))
        backward(k)
    for k in range(m - warmup, m):
        backward(k)
    return ops + [Op(BACKWARD_WEIGHT, k, d) for k in waiting]


def _breadth_first(d: int, p: int, m: int, v: int, *, vb: int) -> list[Op]:
    # no bubble between chunks once m >= p: micro-batch 0 leaves the last device before the first
    # device has run chunk c's m micro-batches
    forwards = [Op(FORWARD, k, c * p + d) for c in range(v) for k in range(m)]
    return forwards + [Op(BACKWARD, k, c * p + d) for c in reversed(range(vb)) for k in range(m)]


def in_flight(order: Sequence[Sequence[Op]], chunks: int = 1, backward_chunks: int | None = None) -> float:
    """The most micro-batches' activations a device of `order` (pipeline_order) holds at once, in units of a
    stage's: each forward op keeps 1/chunks of a stage's stash until a backward op of 1/backward_chunks
    (its input-gradient pass for ZB-H1) frees its share. GPipe and breadth-first hold all m, 1F1B p."""
    vb = chunks if backward_chunks is None else backward_chunks
    step = {FORWARD: 1 / chunks, BACKWARD: -1 / vb, BACKWARD_INPUT: -1 / vb, BACKWARD_WEIGHT: 0.0}
    most = 0.0
    for ops in order:
        held = 0.0
        for op in ops:
            held += step[op.kind]
            most = max(most, held)
    return most


class Span(NamedTuple):
    """One compute task on a device's timeline (s)."""

    id: str
    kind: str
    start: float
    finish: float


@dataclasses.dataclass(frozen=True)
class PipelineStats:
    """What one simulated training iteration did.

    Attributes:
        iteration_time: s from the start to the last flow or task (AllReduce and offload included).
        compute_time: s to the end of the last compute task on a pipeline device.
        busy: pipeline device -> s spent computing.
        bubble_fraction: idle fraction of the pipeline devices over the iteration,
            1 - sum(busy) / (devices x iteration_time).
        timeline: pipeline device -> its compute spans in time order.
    """

    iteration_time: float
    compute_time: float
    busy: dict[str, float]
    bubble_fraction: float
    timeline: dict[str, tuple[Span, ...]]


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """A compiled pipeline: its flow program, the fabric it runs on, and the schedule it came from.

    Attributes:
        workload: the flows and tasks.
        fabric: the topology the flows are routed on.
        devices: replicas x stages device names.
        order: per stage index, the op order every replica runs.
        schedule, microbatches, chunks, costs, backward_chunks: the inputs (backward_chunks = chunks when
            not given).
        memory: bytes on the fullest device (`pipeline_memory`).
    """

    workload: Workload
    fabric: Fabric
    devices: tuple[tuple[str, ...], ...]
    order: tuple[tuple[Op, ...], ...]
    schedule: str
    microbatches: int
    chunks: int
    costs: StageCosts
    backward_chunks: int
    memory: Memory

    def scenario(self, *, name: str | None = None) -> Scenario:
        return self.workload.scenario(self.fabric, name=name)

    def compute_ops(self) -> dict[str, tuple[tuple[str, Op], ...]]:
        """Pipeline device -> (task id, op) of its compute tasks in schedule order."""
        return {
            dev: tuple((f"r{r}/{op.id}", op) for op in self.order[d])
            for r, row in enumerate(self.devices)
            for d, dev in enumerate(row)
        }

    def stats(self, result) -> PipelineStats:
        """Iteration time, bubble fraction and per-device timeline of a simulated run of `scenario()`."""
        timeline = {}
        for dev, ops in self.compute_ops().items():
            spans = [Span(i, op.kind, result.task(i).start, result.task(i).finish) for i, op in ops]
            timeline[dev] = tuple(sorted(spans, key=lambda s: s.start))
        busy = {dev: sum(s.finish - s.start for s in spans) for dev, spans in timeline.items()}
        iteration = float(result.makespan)
        compute = max(s.finish for spans in timeline.values() for s in spans)
        bubble = 1.0 - sum(busy.values()) / (len(busy) * iteration) if iteration > 0 else 0.0
        return PipelineStats(iteration, compute, busy, bubble, timeline)


def pipeline(
    fabric: Fabric,
    devices: Sequence[str] | Sequence[Sequence[str]],
    *,
    microbatches: int,
    costs: StageCosts,
    schedule: str = "1f1b",
    chunks: int = 1,
    backward_chunks: int | None = None,
    allreduce: AllReduce | None = None,
    optimizer_time: float = 0.0,
    offload: Offload | None = None,
    memory_capacity: float | str | None = None,
    check_memory: bool = True,
    name: str = "",
) -> Pipeline:
    """Compiles one training iteration of pipeline-parallel training to flows and tasks.

    Args:
        fabric: the topology (its links and routes).
        devices: the stage devices of one pipeline, or a list of pipelines (data-parallel replicas,
            each with one device per stage).
        microbatches: micro-batches per iteration per replica (m).
        costs: per-stage, per-micro-batch compute times (s) and message sizes (bytes).
        schedule: one of SCHEDULES.
        chunks: model chunks per device (v) for the interleaved and breadth-first schedules; each
            costs 1/v of a stage. Breadth-first (and `offload` with host_parameters) reduces and
            offloads each (backward) chunk's state on its own, as soon as the chunk's backward is done.
        backward_chunks: breadth-first only: chunks per device of the backward pass (None: chunks), each
            1/backward_chunks of a stage, on the devices in turn whatever device ran their forward (SPipe's
            remapping: its `-f 2 -b 6` runs). A backward chunk whose input checkpoint was computed on
            another device receives it (activation_bytes per micro-batch) after that forward; offload,
            reduction and optimizer work per backward chunk.
        allreduce: builds the data-parallel gradient AllReduce of `gradient_bytes` over one rank per
            replica (default: netsim.workloads.collectives' ring allreduce). Used with >= 2 replicas.
        optimizer_time: s of an on-GPU optimizer step after the gradients are reduced (0: none).
            Ignored with `offload`, whose step runs on the CPU. Breadth-first steps each backward chunk
            for its share of optimizer_time after its backward, sharing the GPU with the backwards still
            to run.
        offload: keep the optimizer on the host (see Offload).
        memory_capacity: bytes per GPU, or "80 GB" (default: the fabric's `device` in GPUS, else the largest GPU
            there); a pipeline whose fullest device needs more (`Pipeline.memory`) is refused.
        check_memory: False compiles a pipeline that does not fit too.
        name: workload name.

    Raises:
        ScenarioError: a device not on the fabric or used twice, replicas of unequal length, a
            breadth-first offload without host_parameters, a pipeline that does not fit in memory, or
            any problem pipeline_order reports.
    """
    if not isinstance(costs, StageCosts):
        raise ScenarioError(f"costs: expected a StageCosts, got {type(costs).__name__}")
    nodes = {n for link in fabric.links for n in (link.src, link.dst)}
    rows = _replicas(devices, nodes)
    p = len(rows[0])
    order = pipeline_order(schedule, p, microbatches, chunks, backward_chunks)
    optimizer_time = quantity(optimizer_time, "time", "optimizer_time")
    v = chunks
    vb = v if backward_chunks is None else backward_chunks
    memory = _memory(costs, order, schedule, v, vb, offload=offload is not None)
    capacity = gpu_memory(getattr(fabric, "device", ""), memory_capacity)
    if check_memory:
        advice = "use more stages, recompute, offload, or fewer micro-batches in flight"
        check_fits(memory, capacity, "costs", advice)
    duration = {
        FORWARD: costs.forward / v,
        BACKWARD: costs.backward / vb,
        BACKWARD_INPUT: costs.backward_input / vb,
        BACKWARD_WEIGHT: costs.backward_weight / vb,
    }

    # The optimizer works on units: a device's whole state, or (breadth-first, parameters on the host)
    # each chunk's, keyed by its (backward) virtual stage; `share` is the unit's part of the stage's
    # gradients and step.
    breadth_first = schedule == "breadth-first"
    host = offload is not None and offload.host_parameters
    if breadth_first and offload is not None and not host:
        raise ScenarioError(
            "Offload.host_parameters: the breadth-first schedule fetches each chunk's parameters from "
            "host memory before each pass; set host_parameters=True"
        )
    per_chunk = breadth_first or host
    share = vb if per_chunk else 1
    flows: list[Flow] = []
    tasks: list[Task] = []
    done: dict[int, list[str]] = {}  # unit -> what its optimizer waits on (one id per replica)
    for r, row in enumerate(rows):
        pre = f"r{r}/"
        device_of = lambda s, row=row: row[s % p]  # virtual stage s lives on device s mod p
        for d, ops in enumerate(order):
            prev: str | None = None
            last: dict[int, str] = {}  # unit -> its last op on this device
            fetched = (
                _prefetch(
                    flows,
                    pre,
                    ops,
                    row[d],
                    _host_memory(offload, row[d], nodes),
                    costs.reload_bytes,
                    (v, vb),
                    per_pass=breadth_first,
                )
                if host
                else {}
            )
            for op in ops:
                s, k = op.stage, op.microbatch
                after = [prev] if prev else []
                if pre + op.id in fetched:
                    after.append(fetched[pre + op.id])
                here, size = device_of(s), costs.activation_bytes
                if op.kind == FORWARD and s > 0:
                    producer = pre + Op(FORWARD, k, s - 1).id
                    fid = f"{pre}act{k}.s{s - 1}-s{s}"
                    after.append(_message(flows, fid, device_of(s - 1), here, producer, size))
                elif op.kind in (BACKWARD, BACKWARD_INPUT) and s < p * vb - 1:
                    producer = pre + Op(op.kind, k, s + 1).id
                    fid = f"{pre}grad{k}.s{s + 1}-s{s}"
                    after.append(_message(flows, fid, device_of(s + 1), here, producer, size))
                if op.kind in (BACKWARD, BACKWARD_INPUT) and vb != v:
                    f = s * v // vb  # the forward chunk that holds this backward chunk's first layer
                    fid = f"{pre}ckpt{k}.f{f}-s{s}"  # its input checkpoint
                    after.append(_message(flows, fid, device_of(f), here, pre + Op(FORWARD, k, f).id, size))
                prev = pre + op.id
                tasks.append(Task(prev, row[d], duration[op.kind], after=tuple(after)))
                if op.kind != FORWARD:  # a unit's state is done with its last backward op
                    last[s if per_chunk else d] = prev
            for unit, i in last.items():
                done.setdefault(unit, []).append(i)

    extra: list[Workload] = []
    if len(rows) > 1 and costs.gradient_bytes > 0:
        reduce = _ring_allreduce if allreduce is None else allreduce
        for unit in sorted(done):
            ring = reduce([row[unit % p] for row in rows], costs.gradient_bytes / share)
            ring = ring.prefixed(f"dp.s{unit}")
            extra.append(_waiting(ring, done[unit]))
            done[unit] = list(ring.sinks())
    if offload is not None:
        extra.append(
            _offload(
                offload, rows, costs, done, nodes, chunks=vb if host else None, chunk_steps=breadth_first
            )
        )
    elif optimizer_time > 0:
        unit_id = lambda unit: f"s{unit}" if per_chunk else f"d{unit}"
        extra.append(
            Workload(
                tasks=[
                    Task(
                        f"r{r}/optimizer.{unit_id(unit)}",
                        row[unit % p],
                        optimizer_time / share,
                        after=tuple(done[unit]),
                    )
                    for r, row in enumerate(rows)
                    for unit in sorted(done)
                ]
            )
        )
    workload = Workload(flows, tasks)
    for w in extra:
        workload = workload + w
    return Pipeline(
        dataclasses.replace(workload, name=name),
        fabric,
        rows,
        order,
        schedule,
        microbatches,
        chunks,
        costs,
        vb,
        memory,
    )


def pipeline_memory(
    costs: StageCosts,
    *,
    stages: int,
    microbatches: int,
    schedule: str = "1f1b",
    chunks: int = 1,
    backward_chunks: int | None = None,
    offload: bool = False,
) -> Memory:
    """The bytes `pipeline` puts on its fullest device, without compiling it: the stage's parameters,
    gradients and optimizer state (none with `offload`: the optimizer state in host memory), and the
    stash of the micro-batches in flight (`in_flight`). An offloaded breadth-first device (its parameters
    in host memory) holds two chunks' parameters, the one running and the one arriving, and two backward
    chunks' gradients, the one being computed and the one going to the host."""
    if not isinstance(costs, StageCosts):
        raise ScenarioError(f"costs: expected a StageCosts, got {type(costs).__name__}")
    order = pipeline_order(schedule, stages, microbatches, chunks, backward_chunks)
    vb = chunks if backward_chunks is None else backward_chunks
    return _memory(costs, order, schedule, chunks, vb, offload=offload)


def _memory(costs: StageCosts, order, schedule: str, chunks: int, vb: int, *, offload: bool) -> Memory:
    """`pipeline_memory` of a built `order`."""
    streamed = offload and schedule == "breadth-first"  # which needs host_parameters
    parameters = min(1.0, 2 / min(chunks, vb)) if streamed else 1.0
    gradients = min(1.0, 2 / vb) if streamed else 1.0
    return Memory(
        costs.reload_bytes * parameters,
        costs.gradient_bytes * gradients,
        0.0 if offload else costs.optimizer_bytes,
        costs.stash_bytes * in_flight(order, chunks, vb),
    )


def _message(flows: list[Flow], fid: str, src: str, dst: str, producer: str, size: float) -> str:
    """The id the consumer waits on: flow `fid` of `size` bytes sent when `producer` ends, or the producer
    itself when both are on one device."""
    if src == dst:
        return producer
    flows.append(Flow(fid, src, dst, size, after=(producer,)))
    return fid


def _prefetch(
    flows: list[Flow],
    pre: str,
    ops: Sequence[Op],
    gpu: str,
    mem: str,
    size: float,
    chunks: tuple[int, int],
    *,
    per_pass: bool,
) -> dict[str, str]:
    """Host -> GPU parameter fetches of a device's chunks, one after the other on one copy stream, each
    `size` / the chunks per device of its pass (forward, backward). per_pass: a fetch before each pass
    (a run of ops of one kind and virtual stage), which also waits until the pass two before it has
    ended, so that at most two chunks' parameters are on the GPU (SPipe's prefetch); else one fetch per
    chunk before its first op, all chunks staying resident. Returns first op id -> the fetch it waits on."""
    passes: list[list[Op]] = []
    for op in ops:
        if per_pass and passes and (passes[-1][0].kind, passes[-1][0].stage) == (op.kind, op.stage):
            passes[-1].append(op)
        elif per_pass or all(op.stage != q[0].stage for q in passes):
            passes.append([op])
    fetched: dict[str, str] = {}
    for j, ops_j in enumerate(passes):
        kind, stage = ops_j[0].kind, ops_j[0].stage
        fid = f"{pre}fetch.{kind}.s{stage}" if per_pass else f"{pre}fetch.s{stage}"
        after = [fetched[pre + passes[j - 1][0].id]] if j else []
        if per_pass and j >= 2:
            after.append(pre + passes[j - 2][-1].id)
        flows.append(Flow(fid, mem, gpu, size / chunks[kind != FORWARD], after=tuple(after)))
        fetched[pre + ops_j[0].id] = fid
    return fetched


def _offload(
    off: Offload,
    rows,
    costs: StageCosts,
    done: dict[int, list[str]],
    nodes: set[str],
    *,
    chunks: int | None,
    chunk_steps: bool,
) -> Workload:
    """Gradients GPU -> host, CPU step and (parameters on the GPU) parameters back, for each unit of `done`.

    chunks: None for one unit per device (keyed by device index), reloaded after its step; else the
    chunks per device, parameters on the host, `done` keyed by virtual stage: each chunk moves 1/chunks
    of the stage's gradients, in the device's backward order on one copy stream, and nothing is
    reloaded (the next pass fetches the parameters). chunk_steps: each chunk is also stepped for
    1/chunks of step_time on one CPU thread as soon as its gradients are in; else the device's state is
    stepped once, after its last chunk's gradients (and, without overlap, every device's backward).
    Every step also stalls the GPUs its CPU drives (`Offload.step_stall`).
    """
    flows: list[Flow] = []
    tasks: list[Task] = []
    served: dict[str, list[str]] = {}  # CPU -> the GPUs whose processes run on it
    for row in rows:
        for gpu in row:
            served.setdefault(off.cpu_of(gpu), []).append(gpu)

    def step(task_id: str, cpu: str, duration: float, after: tuple[str, ...]) -> None:
        tasks.append(Task(task_id, cpu, duration, after=after))
        if off.step_stall:
            stall = off.step_stall * duration
            tasks.extend(Task(f"{task_id}/stall.{g}", g, stall, after=after) for g in served[cpu])

    barrier = tuple(i for ids in done.values() for i in ids)
    pieces = off.pieces if off.overlap else 1
    share = 1 if chunks is None else chunks
    for r, row in enumerate(rows):
        for d, gpu in enumerate(row):
            mem, cpu = _host_memory(off, gpu, nodes), off.cpu_of(gpu)
            units = [d] if chunks is None else sorted((u for u in done if u % len(row) == d), reverse=True)
            if chunks is not None and not chunk_steps:
                d2h: tuple[str, ...] = ()
                for unit in units:
                    after = (*done[unit], *d2h)
                    d2h = (f"r{r}/offload.s{unit}/d2h",)
                    flows.append(Flow(d2h[0], gpu, mem, costs.gradient_bytes / chunks, after=after))
                wait = d2h if off.overlap else (*d2h, *barrier)
                step(f"r{r}/offload.d{d}/step", cpu, off.step_time, wait)
                continue
            prev = {"d2h": (), "step": (), "h2d": ()}  # the copy stream's and the CPU thread's last item
            for unit in units:
                pre = f"r{r}/offload.d{d}" if chunks is None else f"r{r}/offload.s{unit}"
                prev["d2h"] = (*(tuple(done[unit]) if off.overlap else barrier), *prev["d2h"])
                for i in range(pieces):
                    sfx = f".{i}" if pieces > 1 else ""
                    d2h, step_id, h2d = f"{pre}/d2h{sfx}", f"{pre}/step{sfx}", f"{pre}/h2d{sfx}"
                    flows.append(
                        Flow(d2h, gpu, mem, costs.gradient_bytes / (share * pieces), after=prev["d2h"])
                    )
                    step(step_id, cpu, off.step_time / (share * pieces), (d2h, *prev["step"]))
                    if chunks is None:
                        flows.append(
                            Flow(h2d, mem, gpu, costs.reload_bytes / pieces, after=(step_id, *prev["h2d"]))
                        )
                    prev = {"d2h": (d2h,), "step": (step_id,), "h2d": (h2d,)}
    return Workload(flows, tasks)


def _host_memory(off: Offload, gpu: str, nodes: set[str]) -> str:
    mem = off.memory_of(gpu)
    if mem not in nodes:
        raise ScenarioError(f"Offload.memory: {mem!r} (for device {gpu!r}) is not a node of the fabric")
    return mem


def _waiting(w: Workload, ids: Sequence[str]) -> Workload:
    """`w` with its roots also waiting on `ids`."""
    roots = set(w.roots())
    extend = lambda x: dataclasses.replace(x, after=tuple(x.after) + tuple(ids)) if x.id in roots else x
    return Workload([extend(f) for f in w.flows], [extend(t) for t in w.tasks], w.name)


def _ring_allreduce(ranks: Sequence[str], size: float) -> Workload:
    from .collectives import allreduce

    return allreduce(ranks, size, name="allreduce").workload


def _replicas(devices, nodes: set[str]) -> tuple[tuple[str, ...], ...]:
    if isinstance(devices, str) or not isinstance(devices, Sequence) or not devices:
        raise ScenarioError(
            f"devices: expected a non-empty list of stage devices (or of replicas), got {devices!r}"
        )
    rows = (tuple(devices),) if all(isinstance(x, str) for x in devices) else tuple(map(tuple, devices))
    seen: dict[str, str] = {}
    for r, row in enumerate(rows):
        if not row or len(row) != len(rows[0]):
            raise ScenarioError(
                f"devices[{r}]: every replica needs the same number of stages "
                f"({len(rows[0])}), got {len(row)}"
            )
        for d, dev in enumerate(row):
            where = f"devices[{r}][{d}]" if len(rows) > 1 else f"devices[{d}]"
            if not isinstance(dev, str) or dev not in nodes:
                raise ScenarioError(f"{where}: {dev!r} is not a node of the fabric")
            if dev in seen:
                raise ScenarioError(f"{where}: device {dev!r} is used twice (also {seen[dev]})")
            seen[dev] = where
    return rows


def _lookup(value: str | Mapping[str, str], gpu: str, field: str) -> str:
    if isinstance(value, str):
        return value
    if gpu not in value:
        raise ScenarioError(f"{field}: no entry for device {gpu!r}")
    return value[gpu]
