"""3D-parallel transformer training compiled to flows: a model and a layout -> one training iteration.

    model = TransformerModel(hidden=2048, heads=16, layers=24, seq_len=1024)
    layout = ParallelLayout(tp=2, pp=2, dp=2, micro_batch=4, global_batch=64)
    job = training_workload(topo, topo.workers[:8], model, layout)   # refuses what does not fit
    stats = job.stats(netsim.simulate(job.scenario()))               # iteration time and its breakdown

The compiler reuses the pipeline schedules (`pipeline_order`) and the collective builders: every op of
the schedule becomes a compute task on each tensor-parallel (TP) rank of its stage, followed by
Megatron's TP all-reduces (2 per transformer layer forward, 2 backward, 2 more with full recomputation),
activations and gradients go between stages as flows, and the data-parallel (DP) gradient all-reduce
runs after the pipeline drains (with overlap_dp, in buckets as the last backward pass produces them).
Task durations come from `ComputeModel`, a roofline over the ops of a layer; `memory_per_gpu` says
whether a layout fits; `program_size` counts what a layout compiles to before it is built.
See docs/training.md.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .._checks import choice, count, fraction, number, read_json, read_text, show
from .._scenario import Flow, Scenario, ScenarioError, Task
from ..data import DATA_DIR
from ._base import Fabric, Workload, concat
from ._memory import Memory, check_fits, gpu_memory, gpu_spec, stash_per_layer
from ._pipeline import (
    BACKWARD,
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    FORWARD,
    SCHEDULES,
    Op,
    _waiting,
    in_flight,
    pipeline_order,
)
from .collectives import rail_rings

__all__ = [
    "ComputeModel",
    "IterationTerms",
    "LayoutRow",
    "LinkRates",
    "ParallelLayout",
    "Training",
    "TrainingStats",
    "TransformerModel",
    "estimate_iteration",
    "estimate_seconds",
    "iteration_terms",
    "layer_ops",
    "link_rates",
    "memory_per_gpu",
    "op_seconds",
    "optimizer_seconds",
    "placement",
    "program_size",
    "read_layout_table",
    "training_workload",
]

RECOMPUTE = ("none", "selective", "full")
#: bytes per value of weights, gradients and activations (mixed precision: fp16/bf16)
HALF = 2.0


@dataclasses.dataclass(frozen=True)
class TransformerModel:
    """A GPT-style decoder: `layers` transformer layers of width `hidden`, `heads` attention heads,
    sequences of `seq_len` tokens, a `vocab`-word embedding tied to the output layer (vocab=0: no
    embedding and no output layer, every pipeline stage alike)."""

    hidden: int
    heads: int
    layers: int
    seq_len: int
    vocab: int = 51200
    ffn_multiplier: int = 4

    def __post_init__(self):
        for name in ("hidden", "heads", "layers", "seq_len", "vocab", "ffn_multiplier"):
            count(getattr(self, name), f"TransformerModel.{name}", minimum=0 if name == "vocab" else 1)
        if self.hidden % self.heads:
            raise ScenarioError(
                f"TransformerModel.heads: must divide hidden={self.hidden}, got heads={self.heads}"
            )

    @property
    def layer_parameters(self) -> int:
        """Weights and biases of one layer: QKV, projection, two MLP matrices, two layer norms."""
        h, f = self.hidden, self.ffn_multiplier
        return (4 + 2 * f) * h * h + (9 + f) * h

    @property
    def parameters(self) -> int:
        """All parameters (Megatron's count: layers, word and position embeddings, final norm)."""
        embedding = (self.vocab + self.seq_len) * self.hidden if self.vocab else 0
        return self.layers * self.layer_parameters + embedding + 2 * self.hidden


@dataclasses.dataclass(frozen=True)
class ParallelLayout:
    """How a model is split: tp x pp x dp GPUs, micro-batches of `micro_batch` sequences adding up to
    `global_batch` per iteration, and the memory-saving options.

    Attributes:
        tp, pp, dp: tensor-, pipeline- and data-parallel sizes (TP placed innermost, inside a server).
        micro_batch: sequences per micro-batch (b).
        global_batch: sequences per iteration over all replicas (default micro_batch x dp).
        schedule: one of SCHEDULES; chunks: model chunks per device for "interleaved" and "breadth-first".
        recompute: "none", "selective" (attention scores recomputed) or "full" (each layer's forward
            rerun in its backward; only the layer inputs are kept).
        sequence_parallel: Megatron's sequence parallelism (norms and dropouts split over TP; the
            all-reduces become reduce-scatter + all-gather, the same bytes on a ring).
        zero: ZeRO stage 0-3 (optimizer state, + gradients, + weights split over DP).
        offload: optimizer state in host memory (not counted against the GPU).
        overlap_dp: DP all-reduce in buckets that start during the last backward (Megatron's
            --overlap-grad-reduce), or (default, Megatron's default) one all-reduce of all gradients after
            the whole pipeline has drained.
        dp_bucket_bytes: DP gradient bucket size with overlap_dp (Megatron's default 40 M values of 2 bytes).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    micro_batch: int = 1
    global_batch: int | None = None
    schedule: str = "1f1b"
    chunks: int = 1
    recompute: str = "none"
    sequence_parallel: bool = False
    zero: int = 0
    offload: bool = False
    overlap_dp: bool = False
    dp_bucket_bytes: float = 80e6

    def __post_init__(self):
        for name in ("tp", "pp", "dp", "micro_batch", "chunks"):
            count(getattr(self, name), f"ParallelLayout.{name}")
        if self.global_batch is None:
            object.__setattr__(self, "global_batch", self.micro_batch * self.dp)
        count(self.global_batch, "ParallelLayout.global_batch")
        if self.global_batch % (self.micro_batch * self.dp):
            raise ScenarioError(
                f"ParallelLayout.global_batch: must be a multiple of micro_batch x dp = "
                f"{self.micro_batch * self.dp}, got global_batch={self.global_batch}"
            )
        choice(self.schedule, "ParallelLayout.schedule", SCHEDULES)
        choice(self.recompute, "ParallelLayout.recompute", RECOMPUTE)
        if self.zero not in (0, 1, 2, 3):
            raise ScenarioError(f"ParallelLayout.zero: expected a ZeRO stage 0-3, got zero={self.zero!r}")
        number(self.dp_bucket_bytes, "ParallelLayout.dp_bucket_bytes", positive=True)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def microbatches(self) -> int:
        """Micro-batches per replica per iteration (m)."""
        return self.global_batch // (self.micro_batch * self.dp)

    def check(self, model: TransformerModel) -> None:
        """Raises ScenarioError where this layout cannot split `model`."""
        if model.layers % (self.pp * self.chunks):
            raise ScenarioError(
                f"ParallelLayout.pp: layers={model.layers} must split evenly over pp x chunks = "
                f"{self.pp * self.chunks}"
            )
        if model.heads % self.tp or (model.ffn_multiplier * model.hidden) % self.tp:
            raise ScenarioError(f"ParallelLayout.tp: must divide heads={model.heads}, got tp={self.tp}")
        pipeline_order(self.schedule, self.pp, self.microbatches, self.chunks)  # its own checks


# --- memory ---------------------------------------------------------------------------------------------


def stage_parameters(model: TransformerModel, layout: ParallelLayout) -> float:
    """Parameters held by one GPU of the first stage: its layers and the word embedding, split over TP."""
    layers = model.layers // layout.pp
    return (layers * model.layer_parameters + model.vocab * model.hidden) / layout.tp


def memory_per_gpu(model: TransformerModel, layout: ParallelLayout) -> Memory:
    """Mixed-precision training memory of the first stage's GPUs: fp16 weights (2 B) and gradients (2 B),
    Adam's fp32 master weights, momentum and variance (12 B) per parameter, each split over DP by the
    ZeRO stage; no optimizer state with `offload`; activations of the in-flight micro-batches."""
    n = stage_parameters(model, layout)
    dp = layout.dp
    split = lambda stage: dp if layout.zero >= stage else 1
    optimizer = 0.0 if layout.offload else 12 * n / split(1)
    per_layer = stash_per_layer(
        model.seq_len,
        layout.micro_batch,
        model.hidden,
        model.heads,
        tp=layout.tp,
        sequence_parallel=layout.sequence_parallel,
        recompute=layout.recompute,
    )
    order = pipeline_order(layout.schedule, layout.pp, layout.microbatches, layout.chunks)
    activations = model.layers // layout.pp * per_layer * in_flight(order, layout.chunks)
    return Memory(HALF * n / split(3), HALF * n / split(2), optimizer, activations)


# --- compute --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ComputeModel:
    """Seconds of the ops of a transformer layer on one GPU: a roofline per op with GEMM efficiencies
    that depend on the GEMM's shape, and fixed per-kernel and per-collective costs.

    A GEMM of M x N x K (times `batch`) takes max(2MNK / (peak x eff), bytes / bandwidth) with
    eff = gemm_efficiency / (1 + gemm_knee / M + gemm_knee / N + gemm_knee / K): thin GEMMs run below
    the large-GEMM efficiency. Element-wise ops (norms, softmax, dropout, GeLU) move their bytes at
    memory_bandwidth x memory_efficiency. The host spends kernel_overhead per kernel issuing them ahead
    of the GPU: a pass takes the longer of the two (small layers are host-bound). The fitted values ship in
    netsim/data/training_a100.json (`ComputeModel.load`).

    Attributes:
        peak_flops, memory_bandwidth: FLOP/s and B/s (None: the topology's GPU in GPUS).
        gemm_efficiency: large-GEMM fraction of peak.
        gemm_knee: GEMM dimension (elements) at which each dimension costs a third more time.
        memory_efficiency: fraction of memory bandwidth element-wise kernels reach.
        kernel_overhead: s of host time per kernel (launch, framework overhead).
        launch_overlap: how sharply a pass takes the longer of GPU and host time: (g^q + h^q)^(1/q).
        collective_latency: s per step of a TP or DP ring all-reduce (software and sync cost).
        step_overhead: s per iteration outside the ops (optimizer launch, data loading, logging).
    """

    peak_flops: float | None = None
    memory_bandwidth: float | None = None
    gemm_efficiency: float = 0.75
    gemm_knee: float = 64.0
    memory_efficiency: float = 0.7
    kernel_overhead: float = 5e-6
    launch_overlap: float = 4.0
    collective_latency: float = 10e-6
    step_overhead: float = 1e-3

    #: the fitted fields, in the order `calibrate.training` fits them (log scale)
    FITTED = (
        "gemm_efficiency",
        "gemm_knee",
        "memory_efficiency",
        "kernel_overhead",
        "collective_latency",
        "step_overhead",
        "launch_overlap",
    )

    def __post_init__(self):
        for name in ("peak_flops", "memory_bandwidth"):
            if getattr(self, name) is not None:
                number(getattr(self, name), f"ComputeModel.{name}", positive=True)
        for name in self.FITTED:
            number(getattr(self, name), f"ComputeModel.{name}", positive=name != "step_overhead")
        for name in ("gemm_efficiency", "memory_efficiency"):
            fraction(getattr(self, name), f"ComputeModel.{name}")

    @classmethod
    def load(cls, path: str | pathlib.Path | None = None) -> ComputeModel:
        """The fitted model shipped in netsim/data/training_a100.json (or a JSON file of the same form:
        an object whose "compute" entry holds fields of this class). ScenarioError names the file."""
        path = DATA_DIR / "training_a100.json" if path is None else path
        name = str(path)
        data = read_json(path, "a compute model")
        if not isinstance(data, dict) or "compute" not in data:
            raise ScenarioError(f"{name}: no 'compute' entry")
        values = data["compute"]
        if not isinstance(values, dict):
            raise ScenarioError(f"{name}: compute: expected an object of fields, got {show(values)}")
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(map(str, set(values) - set(known)))
        if unknown:
            raise ScenarioError(f"{name}: compute: unknown field(s) {unknown}; known: {known}")
        try:
            return cls(**values)
        except ScenarioError as e:
            raise ScenarioError(f"{name}: {e}") from None

    def on(self, device: str) -> ComputeModel:
        """This model with peak_flops and memory_bandwidth filled from GPUS[device] where unset."""
        if self.peak_flops is not None and self.memory_bandwidth is not None:
            return self
        spec = gpu_spec(device)
        return dataclasses.replace(
            self,
            peak_flops=self.peak_flops or spec.peak_flops,
            memory_bandwidth=self.memory_bandwidth or spec.memory_bandwidth,
        )

    def vector(self) -> np.ndarray:
        return np.array([getattr(self, k) for k in self.FITTED], dtype=np.float64)


class LayerOps(NamedTuple):
    """The ops of one micro-batch on one TP rank, as arrays (one row per GEMM / per element-wise group).

    gemm: [G, 4] M, N, K, batch; gemm_pass: [G, 3] how often each GEMM runs in forward, input-gradient
    and weight-gradient passes; memory: [3] element-wise bytes per pass; kernels: [3] launches per pass.
    """

    gemm: np.ndarray
    gemm_pass: np.ndarray
    memory: np.ndarray
    kernels: np.ndarray


def layer_ops(model: TransformerModel, layout: ParallelLayout, *, head: bool = False) -> LayerOps:
    """One transformer layer's ops (or, with head, the output layer's: logits and cross-entropy).

    Backward passes run each GEMM twice (input and weight gradient; the attention-score GEMMs have no
    weights, so both of theirs are input gradients) and move twice the forward's element-wise bytes.
    Recomputation reruns the forward (full) or the attention core (selective) in the input-gradient pass.
    """
    b, s, h, a, t = layout.micro_batch, model.seq_len, model.hidden, model.heads, layout.tp
    f = model.ffn_multiplier
    bs, d, heads = b * s, h // a, b * a // t
    if head and not model.vocab:
        return LayerOps(np.ones((1, 4)), np.zeros((1, 3)), np.zeros(3), np.zeros(3))
    if head:
        gemm = np.array([[bs, model.vocab / t, h, 1]], dtype=np.float64)
        passes = np.array([[1, 1, 1]], dtype=np.float64)
        memory = np.array([3, 6, 0]) * 4.0 * bs * model.vocab / t  # fp32 logits: softmax, its gradient
        kernels = np.array([4.0, 6.0, 1.0])
        return LayerOps(gemm, passes, memory, kernels)
    gemm = np.array(
        [
            [bs, 3 * h / t, h, 1],  # QKV
            [s, s, d, heads],  # scores QK^T
            [s, d, s, heads],  # scores x V
            [bs, h, h / t, 1],  # output projection
            [bs, f * h / t, h, 1],  # MLP up
            [bs, h, f * h / t, 1],  # MLP down
        ],
        dtype=np.float64,
    )
    passes = np.array([[1, 1, 1], [1, 2, 0], [1, 2, 0], [1, 1, 1], [1, 1, 1], [1, 1, 1]], dtype=np.float64)
    split = t if layout.sequence_parallel else 1
    norms = (2 * 4 + 2 * 7) * bs * h / split  # two norms (read + write), two bias-dropout-adds
    scores = 9 * heads * s * s  # scale-mask-softmax (read + write) and dropout with its mask
    gelu = 4 * bs * f * h / t
    memory = np.array([1.0, 2.0, 0.0]) * (norms + scores + gelu)
    kernels = np.array([14.0, 20.0, 4.0])
    if layout.recompute == "full":
        passes[:, 1] += passes[:, 0]
        memory[1] += memory[0]
        kernels[1] += kernels[0]
    elif layout.recompute == "selective":
        passes[1:3, 1] += 1
        memory[1] += 1.0 * scores
        kernels[1] += 4
    return LayerOps(gemm, passes, memory, kernels)


def op_seconds(theta, peak_flops, memory_bandwidth, ops: LayerOps, xp=np):
    """[..., 3] seconds of the forward, input-gradient and weight-gradient passes of `ops` (LayerOps whose
    arrays may carry leading batch axes: many layouts at once).

    theta: the FITTED values in order (NumPy or JAX: `xp` is the array module, so that a fit can trace it).
    """
    eff, knee, mem_eff, launch, sharp = theta[0], theta[1], theta[2], theta[3], theta[6]
    m, n, k, batch = (ops.gemm[..., i] for i in range(4))
    flops = 2 * m * n * k * batch
    slow = 1 + knee / m + knee / n + knee / k
    compute = flops * slow / (peak_flops * eff)
    traffic = HALF * (m * k + k * n + m * n) * batch / (memory_bandwidth * mem_eff)
    per_gemm = xp.maximum(compute, traffic)
    gpu = xp.einsum("...gp,...g->...p", xp.asarray(ops.gemm_pass), per_gemm) + xp.asarray(ops.memory) / (
        memory_bandwidth * mem_eff
    )
    host = xp.asarray(ops.kernels) * launch
    # the host issues kernels ahead of the GPU: a pass takes the longer of the two, softly
    return (gpu**sharp + host**sharp) ** (1 / sharp)


def optimizer_seconds(theta, memory_bandwidth, parameters: float):
    """Adam on `parameters` (this GPU's share): memory-bound, ~32 bytes per parameter (fp32 master weight,
    momentum, variance read and written, fp16 gradient read, fp16 weight written), plus step_overhead."""
    return 32 * parameters / (memory_bandwidth * theta[2]) + theta[5]


class IterationTerms(NamedTuple):
    """What the closed-form iteration time of one layout is made of, apart from the fitted values; arrays
    of many layouts stack along a leading axis (`estimate_seconds` takes either).

    body, head: the ops of one layer and of the output layer; body_count, head_count: how often each runs
    on the critical path ((m + (p - 1)/v) x layers per stage, and m); tp_bytes, tp_steps: the TP
    all-reduces' bytes per rank and ring steps on that path; send_bytes: the fill and drain's pipeline
    sends; dp_bytes, dp_steps: one DP bucket's ring; dp_buckets; dp_hide: the fraction of a stage's
    forward + backward time that hides the DP buckets; optimizer_parameters: this GPU's optimizer share.
    """

    body: LayerOps
    head: LayerOps
    body_count: float
    head_count: float
    tp_bytes: float
    tp_steps: float
    send_bytes: float
    dp_bytes: float
    dp_steps: float
    dp_buckets: float
    dp_hide: float
    optimizer_parameters: float


def dp_buckets(parameters: float, layout: ParallelLayout) -> int:
    """DP all-reduces per (stage, TP rank) group: buckets of dp_bucket_bytes with overlap_dp, else one."""
    if layout.dp == 1 or not layout.overlap_dp:
        return 1
    return max(1, math.ceil(parameters * HALF / layout.dp_bucket_bytes))


def iteration_terms(model: TransformerModel, layout: ParallelLayout) -> IterationTerms:
    """The closed form's terms for `model` split by `layout` (see `estimate_seconds`)."""
    t, p, dp, m, v = layout.tp, layout.pp, layout.dp, layout.microbatches, layout.chunks
    layers = model.layers // p
    act = layout.micro_batch * model.seq_len * model.hidden * HALF
    path = m + (p - 1) / v  # stage passes on the critical path
    reduces = 2 * (1 + (2 if layout.recompute == "full" else 1)) * layers * path if t > 1 else 0.0
    params = (layers * model.layer_parameters + model.vocab * model.hidden) / t
    buckets = dp_buckets(params, layout)
    return IterationTerms(
        body=layer_ops(model, layout),
        head=layer_ops(model, layout, head=True),
        body_count=path * layers,
        head_count=float(m),
        tp_bytes=reduces * 2 * (t - 1) / t * act,
        tp_steps=reduces * 2 * (t - 1),
        send_bytes=2 * (p - 1) * act / t,
        dp_bytes=2 * (dp - 1) / dp * params * HALF / buckets,
        dp_steps=2 * (dp - 1),
        dp_buckets=float(buckets),
        dp_hide=(buckets - 1) / (buckets * m) if layout.overlap_dp and dp > 1 else 0.0,
        optimizer_parameters=params / (dp if layout.zero else 1),
    )


class LinkRates(NamedTuple):
    """B/s per direction each kind of traffic of a layout gets on its fabric (`link_rates`): a TP ring
    all-reduce, a pipeline send, a DP ring all-reduce (floats, or arrays over many layouts)."""

    tp: float
    pp: float
    dp: float


def placement(gpus: Sequence[str], layout: ParallelLayout) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """GPU names by [replica][stage][TP rank]: gpus[(stage x dp + replica) x tp + rank], Megatron's order
    (a TP group is consecutive GPUs, inside one server; then DP; then PP)."""
    t, p, dp = layout.tp, layout.pp, layout.dp
    return tuple(
        tuple(tuple(gpus[(d * dp + r) * t + j] for j in range(t)) for d in range(p)) for r in range(dp)
    )


def _bottleneck(topology, bandwidths: dict[str, float], a: str, b: str) -> float:
    return min(bandwidths[x] for x in topology.route(a, b))


def _ring_rate(topology, bandwidths: dict[str, float], ranks: Sequence[str]) -> float:
    """B/s per rank of a ring all-reduce on an idle fabric: its channels split the bytes, each moving at
    its slowest hop; a link that several channels cross (a GPU's port) is shared by them."""
    channels = rail_rings(ranks)
    load: dict[str, int] = {}
    for ring in channels:
        for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
            for x in topology.route(a, b):
                load[x] = load.get(x, 0) + 1
    return len(channels) * min(bandwidths[x] / n for x, n in load.items())


def link_rates(topology, gpus: Sequence[str], layout: ParallelLayout) -> LinkRates:
    """The rates of `layout` placed on `gpus` of `topology` (`placement`): a TP group's ring all-reduce,
    a send from stage 0 to stage 1, a DP group's ring all-reduce over `rail_rings` (the slowest link
    of each route, as the engine gives them on an idle fabric; inf where the layout has no such traffic).
    """
    grid = placement(list(gpus), layout)
    bandwidths = {x.id: x.bandwidth for x in topology.links}
    tp = _ring_rate(topology, bandwidths, grid[0][0]) if layout.tp > 1 else math.inf
    pp = _bottleneck(topology, bandwidths, grid[0][0][0], grid[0][1][0]) if layout.pp > 1 else math.inf
    dp = _ring_rate(topology, bandwidths, [g[0][0] for g in grid]) if layout.dp > 1 else math.inf
    return LinkRates(tp, pp, dp)


def estimate_seconds(terms: IterationTerms, theta, peak_flops, memory_bandwidth, link_bandwidth, xp=np):
    """Closed-form iteration time (s) from `iteration_terms` (or many stacked), traceable with
    xp=jax.numpy for fitting; `estimate_iteration` explains the form. link_bandwidth: B/s for every
    kind of traffic, or LinkRates."""
    alpha = theta[4]
    rate = link_bandwidth if isinstance(link_bandwidth, LinkRates) else LinkRates(*[link_bandwidth] * 3)
    body = op_seconds(theta, peak_flops, memory_bandwidth, terms.body, xp).sum(-1)
    head = op_seconds(theta, peak_flops, memory_bandwidth, terms.head, xp).sum(-1)
    tp = terms.tp_bytes / rate.tp + terms.tp_steps * alpha
    pipe = terms.body_count * body + terms.head_count * head + tp + terms.send_bytes / rate.pp
    one = terms.dp_bytes / rate.dp + terms.dp_steps * alpha
    # the final backward hides all buckets but the last, at most its own length
    exposed = xp.maximum(one, terms.dp_buckets * one - terms.dp_hide * pipe)
    return pipe + exposed + optimizer_seconds(theta, memory_bandwidth, terms.optimizer_parameters)


def estimate_iteration(
    model: TransformerModel,
    layout: ParallelLayout,
    compute: ComputeModel,
    link_bandwidth: float | LinkRates,
) -> float:
    """Closed-form iteration time (s) of what `training_workload` compiles, on a fabric where every GPU
    has its own `link_bandwidth` (B/s per direction) to a non-blocking switch and nothing contends, or
    where each kind of traffic gets its LinkRates (`link_rates(topology, gpus, layout)`).

    Pipeline: (m + (p - 1)/v) x T + m x T_head, T a stage's forward + backward with its TP all-reduces
    (the last stage adds the output layer, T_head), plus the 2(p - 1) activation and gradient sends of
    the fill and drain; then the exposed DP all-reduce (its last bucket, or what the final backward
    could not hide) and the optimizer step. `compute` needs peak_flops and memory_bandwidth set.
    """
    layout.check(model)
    return float(
        estimate_seconds(
            iteration_terms(model, layout),
            compute.vector(),
            compute.peak_flops,
            compute.memory_bandwidth,
            link_bandwidth,
        )
    )


# --- the compiler ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TrainingStats:
    """One simulated iteration and where its time went on the first GPU (stage 0, TP rank 0, replica 0).

    Attributes:
        iteration_time: s, the last flow or task.
        compute: s the first GPU spends computing (optimizer step included).
        tp_exposed: s the first GPU waits on its TP all-reduces.
        pp_exposed: s it waits on pipeline sends (beyond its schedule's bubble).
        dp_exposed: s from its last backward task to the end of its last DP bucket.
        bubble: iteration_time minus the other four parts (idle in the pipeline schedule), at least 0.
        memory: bytes per GPU on the fullest GPU.
    """

    iteration_time: float
    compute: float
    tp_exposed: float
    pp_exposed: float
    dp_exposed: float
    bubble: float
    memory: Memory


@dataclasses.dataclass(frozen=True)
class Training:
    """A compiled training iteration: the flows and tasks, the fabric, and what they came from.

    Attributes:
        workload, fabric: the flow program and the topology it runs on.
        model, layout, compute: the inputs (compute with the GPU's figures filled in).
        grid: GPU name by [replica][stage][tp rank].
        order: per stage, the schedule's op order (`pipeline_order`).
        op_time: s of one compute task of each kind, by (kind, virtual stage).
        memory: the memory model's figures.
    """

    workload: Workload
    fabric: Fabric
    model: TransformerModel
    layout: ParallelLayout
    compute: ComputeModel
    grid: tuple[tuple[tuple[str, ...], ...], ...]
    order: tuple[tuple[Op, ...], ...]
    op_time: dict[tuple[str, int], float]
    memory: Memory

    def scenario(self, *, name: str | None = None) -> Scenario:
        return self.workload.scenario(self.fabric, name=name)

    @property
    def tp_bytes(self) -> float:
        """Bytes of all TP all-reduce traffic (every rank's sends)."""
        return sum(f.bytes for f in self.workload.flows if "/tp" in f.id)

    def stats(self, result) -> TrainingStats:
        """The breakdown of a simulated run of `scenario()` (a netsim Result)."""
        gpu = self.grid[0][0][0]
        tasks = [t for t in self.workload.tasks if t.device == gpu]
        compute = sum(t.duration for t in tasks)
        iteration = float(result.makespan)
        tp = sum(
            max(0.0, result.flow(f.id).finish - result.task(f.after[0]).finish)
            for f in self.workload.flows
            if f.dst == gpu and "/tp" in f.id
        )
        own = {t.id for t in tasks}
        pp = 0.0
        for t in tasks:  # the part of a message's transfer during which the GPU was free but waiting
            msgs = [a for a in t.after if "/act" in a or "/grad" in a]
            if msgs:
                free = max((result.task(a).finish for a in t.after if a in own), default=0.0)
                sent = max(result.flow(a).start for a in msgs)
                pp += max(0.0, max(result.flow(a).finish for a in msgs) - max(free, sent))
        dp_flows = [f for f in self.workload.flows if f.id.startswith("dp/") and gpu in (f.src, f.dst)]
        last_backward = max(result.task(t.id).finish for t in tasks if "optimizer" not in t.id)
        dp = max([result.flow(f.id).finish - last_backward for f in dp_flows] + [0.0])
        bubble = max(0.0, iteration - compute - tp - pp - dp)
        return TrainingStats(iteration, compute, tp, pp, dp, bubble, self.memory)


def training_workload(
    topology,
    gpus: Sequence[str],
    model: TransformerModel,
    layout: ParallelLayout,
    *,
    compute: ComputeModel | None = None,
    memory_capacity: float | str | None = None,
    check_memory: bool = True,
    per_layer: bool = False,
    name: str = "",
) -> Training:
    """Compiles one training iteration of `model` split by `layout` over `gpus` of `topology`.

    GPU g = gpus[(stage x dp + replica) x tp + tp_rank] (Megatron's order: TP innermost, so a TP group
    is consecutive GPUs of one server, then DP, then PP). Per schedule op (`pipeline_order`) and TP rank:
    a compute task, then the op's TP all-reduces as one ring step: each rank sends 2(t - 1)/t of the
    all-reduced bytes to its ring successor, the ring's exact bandwidth term on a fabric where every
    rank has its own port, with 2(t - 1) x collective_latency as the flows' fixed cost. With per_layer
    the op is cut at every all-reduce (two per layer and pass), as Megatron runs it; without, an op's
    all-reduces follow its compute in one message (the same total time on an otherwise idle fabric, far
    fewer events). Activations (b·s·h values) and their gradients go between stages, 1/t per TP rank
    (Megatron's scatter-gather). The DP gradient all-reduce (netsim's ring builder) runs per bucket of
    dp_bucket_bytes over each (stage, TP rank) group, bucket i starting when the last backward op has
    produced it (overlap_dp) or after the pipeline has drained; then each GPU steps its optimizer.

    Args:
        topology: a Topology (or any Fabric); its `device` names the GPU for peak figures and memory.
        gpus: at least tp x pp x dp GPU node names (the first ones are used).
        compute: the ComputeModel (default: the shipped fit, `ComputeModel.load()`).
        memory_capacity: bytes per GPU, or "80 GB" (default: the topology's GPU in GPUS, else the largest
            GPU there); a layout needing more is refused.
        check_memory: False compiles a layout that does not fit too (`Training.memory` says what it
            needs): a measured run that did fit, for instance.
        per_layer: cut every op at each of its all-reduces (equal shares of its compute) instead of one
            task and one all-reduce message per op.

    Raises:
        ScenarioError: a layout that cannot split the model, too few GPUs, a GPU not on the topology,
            or a layout whose memory per GPU exceeds the capacity (naming both).
    """
    if not isinstance(model, TransformerModel):
        raise ScenarioError(f"model: expected a TransformerModel, got {type(model).__name__}")
    if not isinstance(layout, ParallelLayout):
        raise ScenarioError(f"layout: expected a ParallelLayout, got {type(layout).__name__}")
    layout.check(model)
    device = getattr(topology, "device", "")
    memory = memory_per_gpu(model, layout)
    capacity = gpu_memory(device, memory_capacity)
    if check_memory:
        check_fits(memory, capacity, "layout", "use more tp or pp, recompute, zero or offload")
    compute = (ComputeModel.load() if compute is None else compute).on(device)
    gpus = list(gpus)
    if len(gpus) < layout.gpus:
        raise ScenarioError(f"gpus: the layout needs {layout.gpus} GPUs (tp x pp x dp), got {len(gpus)}")
    nodes = {n for link in topology.links for n in (link.src, link.dst)}
    for i, g in enumerate(gpus[: layout.gpus]):
        if g not in nodes:
            raise ScenarioError(f"gpus[{i}]: {g!r} is not a node of the topology")
    t, p, dp = layout.tp, layout.pp, layout.dp
    grid = placement(gpus, layout)
    plan = _Plan.of(model, layout, grid, per_layer)
    order, final, buckets, stage_params = plan.order, plan.final, plan.buckets, plan.stage_params
    theta = compute.vector()
    peak, bandwidth = compute.peak_flops, compute.memory_bandwidth
    body = op_seconds(theta, peak, bandwidth, layer_ops(model, layout))
    head = op_seconds(theta, peak, bandwidth, layer_ops(model, layout, head=True))
    last = p * layout.chunks - 1
    passes = {FORWARD: (0,), BACKWARD: (1, 2), BACKWARD_INPUT: (1,), BACKWARD_WEIGHT: (2,)}
    op_time = {
        (kind, s): float(sum(plan.layers * body[i] + (head[i] if s == last else 0.0) for i in idx))
        for kind, idx in passes.items()
        for s in range(last + 1)
    }
    act = layout.micro_batch * model.seq_len * model.hidden * HALF  # one all-reduce's buffer (S)
    ring_cost = 2 * (t - 1) * compute.collective_latency

    flows: list[Flow] = []
    tasks: list[Task] = []
    last_backward: dict[tuple[int, int, int], list[str]] = {}  # (r, d, j) -> its final op's task ids
    drained: dict[tuple[int, int, int], tuple[str, ...]] = {}  # (r, d, j) -> what ends its schedule
    for r in range(dp):
        for d, ops in enumerate(order):
            ready: dict[int, tuple[str, ...]] = {j: () for j in range(t)}  # what rank j's next task waits on
            for n, op in enumerate(ops):
                msg = _stage_message(op, last)
                if msg is not None:  # activation from the stage before, or gradient from the one after
                    kind, producer = msg
                    for j in range(t):
                        src, dst = grid[r][producer.stage % p][j], grid[r][d][j]
                        done = plan.done_ids(r, producer, j)
                        if src == dst:
                            ready[j] += done
                            continue
                        fid = f"r{r}/{kind}{op.microbatch}.s{producer.stage}-s{op.stage}/t{j}"
                        flows.append(Flow(fid, src, dst, act / t, after=done))
                        ready[j] += (fid,)
                ids_of_op = {j: [] for j in range(t)}
                for i, (share, n_red) in enumerate(plan.segments(op, d, n)):
                    ids = [plan.task_id(r, op, j, i) for j in range(t)]
                    for j in range(t):
                        seconds = op_time[op.kind, op.stage] * share
                        tasks.append(Task(ids[j], grid[r][d][j], seconds, after=ready[j]))
                        ids_of_op[j].append(ids[j])
                    ready = {j: (ids[j],) for j in range(t)}
                    if n_red and t > 1:  # the all-reduces as one ring step; rank j waits on all its flows
                        size = act * n_red * 2 * (t - 1) / t / len(plan.tp_rings)
                        for c in range(len(plan.tp_rings)):
                            for j in range(t):
                                src, dst = grid[r][d][j], grid[r][d][plan.successor(c, j)]
                                fid = plan.ring_id(r, op, j, i, c)
                                overhead = ring_cost * n_red
                                flows.append(Flow(fid, src, dst, size, after=(ids[j],), overhead=overhead))
                        ready = {
                            j: plan.ring_into(r, op, j, i) + plan.ring_from(r, op, j, i) for j in range(t)
                        }
                if n == final[d]:
                    for j in range(t):
                        last_backward[r, d, j] = ids_of_op[j]
            for j in range(t):
                drained[r, d, j] = ready[j]
    extra: list[Workload] = []
    done_dp: dict[tuple[int, int, int], tuple[str, ...]] = {}
    everything = tuple(i for ids in drained.values() for i in ids)
    if dp > 1:
        from .collectives import allreduce

        for d in range(p):
            for j in range(t):
                ranks = [grid[r][d][j] for r in range(dp)]
                sinks: list[str] = []
                for bkt in range(buckets[d]):
                    # bucket bkt (the last layers' gradients first) is ready once its share of the
                    # final backward op has run on every replica
                    waits = (
                        tuple(
                            last_backward[r, d, j][plan.cut(len(last_backward[r, d, j]), buckets[d], bkt)]
                            for r in range(dp)
                        )
                        if layout.overlap_dp
                        else everything
                    )
                    channels = rail_rings(ranks)
                    ring = allreduce(
                        ranks,
                        stage_params[d] * HALF / buckets[d],
                        channels=len(channels),
                        rings=channels,
                        name="ar",
                        step_overhead=compute.collective_latency,
                    )
                    w = _waiting(ring.workload.prefixed(f"dp/s{d}/t{j}/b{bkt}"), waits)
                    extra.append(w)
                    sinks += w.sinks()
                for r in range(dp):
                    done_dp[r, d, j] = tuple(sinks)
    opt = []
    for r in range(dp):
        for d in range(p):
            share = stage_params[d] / (dp if layout.zero >= 1 else 1)
            seconds = float(optimizer_seconds(theta, bandwidth, share))
            for j in range(t):
                after = drained[r, d, j] + done_dp.get((r, d, j), ())
                opt.append(Task(f"r{r}/optimizer.s{d}/t{j}", grid[r][d][j], seconds, after=after))
    workload = concat([Workload(flows, tasks + opt, name), *extra])
    return Training(workload, topology, model, layout, compute, grid, order, op_time, memory)


def program_size(
    topology, gpus: Sequence[str], model: TransformerModel, layout: ParallelLayout, *, per_layer: bool = False
) -> int:
    """How many flows and tasks `training_workload` compiles for `layout` on `gpus` of `topology`, counted
    without building them (the simulation's cost grows with it; `netsim train --table` estimates larger
    rows in closed form)."""
    layout.check(model)
    if len(gpus) < layout.gpus:
        raise ScenarioError(f"gpus: the layout needs {layout.gpus} GPUs (tp x pp x dp), got {len(gpus)}")
    t, p, dp = layout.tp, layout.pp, layout.dp
    grid = placement(list(gpus), layout)
    plan = _Plan.of(model, layout, grid, per_layer)
    last = p * layout.chunks - 1
    per_replica = p * t  # the optimizer steps
    for d, ops in enumerate(plan.order):
        for n, op in enumerate(ops):
            if p > 1 and _stage_message(op, last) is not None:
                per_replica += t  # one message per TP rank
            for _, n_red in plan.segments(op, d, n):
                per_replica += t + (t * len(plan.tp_rings) if n_red and t > 1 else 0)
    size = dp * per_replica
    if dp > 1:  # a ring all-reduce per bucket: 2(dp - 1) steps of dp flows on each channel
        for d in range(p):
            for j in range(t):
                channels = len(rail_rings([grid[r][d][j] for r in range(dp)]))
                size += plan.buckets[d] * channels * dp * 2 * (dp - 1)
    return size


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How each schedule op is cut into compute segments, and the ids of their tasks and TP flows."""

    tp: int
    layers: int  # per model chunk
    full_recompute: bool
    per_layer: bool
    buckets: list[int]  # DP buckets per stage
    order: tuple[tuple[Op, ...], ...]
    final: dict[int, int]  # stage -> index of its final backward op in order
    tp_rings: tuple[tuple[int, ...], ...]  # TP rank order of each channel of the TP ring (`rail_rings`)
    stage_params: list[float]  # parameters per GPU of each stage
    position: dict[Op, int] = dataclasses.field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "position", {op: n for ops in self.order for n, op in enumerate(ops)})

    @classmethod
    def of(cls, model: TransformerModel, layout: ParallelLayout, grid, per_layer: bool) -> _Plan:
        """The plan of `layout` placed as `grid` (`placement`)."""
        t, p, v = layout.tp, layout.pp, layout.chunks
        order = pipeline_order(layout.schedule, p, layout.microbatches, v)
        layers = model.layers // (p * v)
        embedding = model.vocab * model.hidden
        stage_params = [
            (layers * v * model.layer_parameters + (embedding if d in (0, p - 1) else 0)) / t
            for d in range(p)
        ]
        # the op after which each device's weight gradients are final (its last backward or W)
        final = {
            d: max(i for i, op in enumerate(ops) if op.kind in (BACKWARD, BACKWARD_WEIGHT))
            for d, ops in enumerate(order)
        }
        rank = {
            g: j for j, g in enumerate(grid[0][0])
        }  # TP ring channels as TP rank orders (alike in every group)
        tp_rings = tuple(tuple(rank[g] for g in ring) for ring in rail_rings(grid[0][0]))
        buckets = [dp_buckets(n, layout) for n in stage_params]
        full = layout.recompute == "full"
        return cls(t, layers, full, per_layer, buckets, order, final, tp_rings, stage_params)

    def reduces(self, kind: str) -> int:
        """TP all-reduces of one op: 2 per layer forward and input-gradient pass (4 rerunning the forward)."""
        per_layer = {FORWARD: 2, BACKWARD: 2, BACKWARD_INPUT: 2, BACKWARD_WEIGHT: 0}[kind]
        if self.full_recompute and kind in (BACKWARD, BACKWARD_INPUT):
            per_layer = 4
        return per_layer * self.layers

    def segments(self, op: Op, d: int, n: int) -> list[tuple[float, int]]:
        """(share of the op's compute, all-reduces after it) per segment of op number n on stage device d."""
        n_red = self.reduces(op.kind)
        if self.per_layer:
            cuts = n_red or self.layers
            return [(1 / cuts, 1 if n_red else 0)] * cuts
        if n == self.final[d] and self.buckets[d] > 1:  # cut where DP buckets become ready
            k = self.buckets[d]
            return [(1 / k, 0)] * (k - 1) + [(1 / k, n_red)]
        return [(1.0, n_red)]

    def _segments_of(self, op: Op) -> list[tuple[float, int]]:
        d = op.stage % len(self.order)
        return self.segments(op, d, self.position[op])

    @staticmethod
    def task_id(r: int, op: Op, j: int, i: int) -> str:
        return f"r{r}/{op.id}/t{j}.{i}"

    @staticmethod
    def ring_id(r: int, op: Op, j: int, i: int, channel: int = 0) -> str:
        """The TP flow out of rank j after segment i (on ring channel `channel`)."""
        return f"r{r}/{op.id}/tp{j}.{i}" + (f"c{channel}" if channel else "")

    def successor(self, channel: int, j: int) -> int:
        ring = self.tp_rings[channel]
        return ring[(ring.index(j) + 1) % len(ring)]

    def ring_into(self, r: int, op: Op, j: int, i: int) -> tuple[str, ...]:
        """The TP flows into rank j after segment i, one per channel."""
        preds = [(c, ring[ring.index(j) - 1]) for c, ring in enumerate(self.tp_rings)]
        return tuple(self.ring_id(r, op, k, i, c) for c, k in preds)

    def ring_from(self, r: int, op: Op, j: int, i: int) -> tuple[str, ...]:
        return tuple(self.ring_id(r, op, j, i, c) for c in range(len(self.tp_rings)))

    def done_ids(self, r: int, op: Op, j: int) -> tuple[str, ...]:
        """What a message from `op` on TP rank j waits on: its last task, or the TP flows into rank j."""
        segs = self._segments_of(op)
        i = len(segs) - 1
        if segs[-1][1] and self.tp > 1:
            return self.ring_into(r, op, j, i)
        return (self.task_id(r, op, j, i),)

    @staticmethod
    def cut(pieces: int, buckets: int, bucket: int) -> int:
        """The segment after which DP bucket `bucket` of `buckets` is ready."""
        return min(pieces - 1, -(-(bucket + 1) * pieces // buckets) - 1)


def _stage_message(op: Op, last: int) -> tuple[str, Op] | None:
    """("act" | "grad", the producing op) for an op that waits on a neighbouring stage, else None."""
    if op.kind == FORWARD and op.stage > 0:
        return "act", Op(FORWARD, op.microbatch, op.stage - 1)
    if op.kind in (BACKWARD, BACKWARD_INPUT) and op.stage < last:
        return "grad", Op(op.kind, op.microbatch, op.stage + 1)
    return None


# --- tables of layouts ----------------------------------------------------------------------------------

#: vTrain's columns (its data/ground_truth_*.csv): field -> column header
TABLE_COLUMNS = {
    "global_batch": "global batch",
    "micro_batch": "micro batch",
    "hidden": "hidden size",
    "heads": "attention heads",
    "layers": "# layers",
    "seq_len": "sequence length",
    "tp": "tensor parallelism",
    "dp": "data parallelism",
    "pp": "pipeline parallelism",
}
MEASURED_COLUMN = "iteration time (ms)"
GPUS_COLUMN = "# GPUs"


@dataclasses.dataclass(frozen=True)
class LayoutRow:
    """One row of a layout table: the model, the layout, the measured iteration time (s) if given, the
    line it came from and the GPUs it ran on ("# GPUs"; default the layout's tp x pp x dp)."""

    model: TransformerModel
    layout: ParallelLayout
    measured: float | None
    line: int
    gpus: int | None = None

    def __post_init__(self):
        if self.gpus is None:
            object.__setattr__(self, "gpus", self.layout.gpus)


def read_layout_table(path: str | pathlib.Path, **layout_options) -> list[LayoutRow]:
    """Rows of a CSV in vTrain's columns (TABLE_COLUMNS; optional "# GPUs", "Parameters (billion)" and
    MEASURED_COLUMN). The header is the first line naming "hidden size" ("# GPUs" starts it, so it is not
    a comment); lines before it are comments. `layout_options` go to every ParallelLayout (schedule,
    recompute, ...).

    Raises:
        ScenarioError: no header, a missing column, a cell that is not a whole number, or fewer "# GPUs"
            than the layout's tp x pp x dp (naming the line).
    """
    import csv

    lines = read_text(path).lstrip("\ufeff").splitlines()
    cells_of = lambda line: [c.strip() for c in next(csv.reader([line]), [])]
    start = next((k for k, ln in enumerate(lines) if "hidden size" in cells_of(ln)), None)
    if start is None:
        raise ScenarioError(f"{path}: no header line naming the columns {list(TABLE_COLUMNS.values())}")
    table = list(csv.reader(lines[start:]))
    header = [c.strip() for c in table[0]]
    missing = [c for c in TABLE_COLUMNS.values() if c not in header]
    if missing:
        raise ScenarioError(f"{path}: line {start + 1}: missing column(s) {missing}")
    col = {c: header.index(c) for c in header}
    rows = []
    for k, cells in enumerate(table[1:], start=start + 2):
        if not cells or not "".join(cells).strip():
            continue
        try:
            values = {f: int(cells[col[c]]) for f, c in TABLE_COLUMNS.items()}
            gpus = int(cells[col[GPUS_COLUMN]]) if GPUS_COLUMN in col else None
            measured = (
                float(cells[col[MEASURED_COLUMN]]) / 1e3
                if MEASURED_COLUMN in col and cells[col[MEASURED_COLUMN]].strip()
                else None
            )
        except (ValueError, IndexError):
            raise ScenarioError(
                f"{path}: line {k}: expected whole numbers in {header}, got {cells}"
            ) from None
        model = TransformerModel(
            values.pop("hidden"), values.pop("heads"), values.pop("layers"), values.pop("seq_len")
        )
        layout = ParallelLayout(**values, **layout_options)
        gpus = layout.gpus if gpus is None else gpus
        if gpus < layout.gpus:
            raise ScenarioError(
                f"{path}: line {k}: {GPUS_COLUMN} = {gpus} is fewer than the layout's tp x pp x dp = {layout.gpus}"
            )
        rows.append(LayoutRow(model, layout, measured, k, gpus))
    return rows
