"""GPU datasheets and what a training iteration keeps in a GPU's memory: the one place that says whether a
pipeline (`pipeline`) or a 3D-parallel layout (`training_workload`) fits, and refuses it with the figures."""

from __future__ import annotations

import dataclasses

from .._checks import quantity
from .._scenario import ScenarioError

__all__ = ["GPUS", "GpuSpec", "Memory", "gpu_memory"]


@dataclasses.dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of a GPU: dense fp16/bf16 tensor FLOP/s, memory bandwidth (B/s), memory (B)."""

    peak_flops: float
    memory_bandwidth: float
    memory: float


#: by `Topology.device` name; vendor datasheets (dense, no sparsity; the SXM parts where there are two)
GPUS: dict[str, GpuSpec] = {
    "A100": GpuSpec(312e12, 2.039e12, 80e9),
    "H100": GpuSpec(989e12, 3.35e12, 80e9),
    "H100 PCIe": GpuSpec(756e12, 2.0e12, 80e9),
    "V100": GpuSpec(125e12, 0.9e12, 32e9),
    "A40": GpuSpec(149.7e12, 0.696e12, 48e9),
    "RTX 4090": GpuSpec(165.2e12, 1.008e12, 24e9),
    "RTX 3090": GpuSpec(71e12, 0.936e12, 24e9),
}


def gpu_spec(device: str) -> GpuSpec:
    if device not in GPUS:
        raise ScenarioError(
            f"device: no datasheet figures for GPU {device!r} (known: {', '.join(GPUS)}); pass "
            "ComputeModel(peak_flops=..., memory_bandwidth=...) and memory_capacity="
        )
    return GPUS[device]


@dataclasses.dataclass(frozen=True)
class Memory:
    """Bytes a GPU holds at its fullest, by kind (activations: those of every micro-batch in flight)."""

    parameters: float
    gradients: float
    optimizer: float
    activations: float

    @property
    def total(self) -> float:
        return self.parameters + self.gradients + self.optimizer + self.activations


def gpu_memory(device: str, capacity: float | str | None = None) -> tuple[float, str]:
    """(bytes per GPU, where that figure comes from): `capacity` when given (bytes, or "80 GB"), else the
    datasheet of the fabric's GPU `device`, else the largest GPU in GPUS: what fits no GPU netsim knows is
    refused."""
    if capacity is not None:
        return quantity(capacity, "bytes", "memory_capacity", positive=True), "memory_capacity"
    if device in GPUS:
        return GPUS[device].memory, f"{device} datasheet"
    largest = max(GPUS, key=lambda name: GPUS[name].memory)
    return GPUS[largest].memory, f"the fabric names no GPU: the largest netsim knows, {largest}"


def check_fits(memory: Memory, capacity: tuple[float, str], field: str, advice: str) -> None:
    """Raises ScenarioError naming `field`, the bytes per GPU by kind and the capacity when they exceed it."""
    limit, source = capacity
    if memory.total > limit:
        gb = lambda x: f"{x / 1e9:.1f}"
        raise ScenarioError(
            f"{field}: needs {gb(memory.total)} GB per GPU (weights {gb(memory.parameters)}, gradients "
            f"{gb(memory.gradients)}, optimizer {gb(memory.optimizer)}, activations {gb(memory.activations)}) "
            f"but a GPU holds {gb(limit)} GB ({source}); {advice}"
        )


def stash_per_layer(
    seq_len: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    *,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> float:
    """Activation bytes one transformer layer keeps per micro-batch for its backward at 16-bit (Korthikanti
    et al., MLSys'23, table 2): sbh(34 + 5as/h) without parallelism; TP splits all but the 10sbh of norms
    and dropouts, which sequence parallelism splits too; selective recomputation drops the 5as²b of
    attention scores, full recomputation keeps only the layer input (2sbh)."""
    s, b, h, a, t = seq_len, micro_batch, hidden, heads, tp
    if recompute == "full":
        return 2 * s * b * h / (t if sequence_parallel else 1)
    scores = 0.0 if recompute == "selective" else 5 * a * s / h
    return s * b * h * ((10 / t if sequence_parallel else 10) + 24 / t + scores / t)
