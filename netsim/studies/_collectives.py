"""Collective size sweeps: one collective simulated at many sizes, as an nccl-tests `*_perf` run."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .._batch import compile_batch
from .._compile import compile_scenario
from .._costs import CostModel
from .._runner import run_batch
from .._scenario import Scenario, ScenarioError
from ..kernels import Program
from ..workloads import Collective, Fabric
from ..workloads.collectives import quantity

__all__ = ["SweepTable", "collective_sweep", "nccl_rows", "nccl_sizes"]

MAX_SIZES = 1000  # rows of one table: a typo such as -i 1 must not ask for millions of simulations


@dataclasses.dataclass(frozen=True)
class SweepTable:
    """A collective's time and bandwidths over sizes, as in an nccl-tests `*_perf` table (SI units).

    Attributes:
        kind, algorithm, n: the collective swept.
        size: S per row (bytes), in nccl-tests' sense.
        time: simulated time per row (s).
        algbw: S / time (bytes/s).
        busbw: algbw * nccl-tests' bus factor (bytes/s).
    """

    kind: str
    algorithm: str
    n: int
    size: np.ndarray
    time: np.ndarray
    algbw: np.ndarray
    busbw: np.ndarray

    def rows(self) -> list[tuple[float, float, float, float]]:
        """(size B, time s, algbw B/s, busbw B/s) per size."""
        return [tuple(map(float, r)) for r in zip(self.size, self.time, self.algbw, self.busbw, strict=True)]

    def format(self) -> str:
        """The table in nccl-tests' units: size (B), time (us), algbw and busbw (GB/s)."""
        lines = [
            f"# {self.kind} ({self.algorithm}), {self.n} ranks",
            f"# {'size (B)':>14} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}",
        ]
        for size, t, alg, bus in self.rows():
            lines.append(f"  {size:>14.0f} {t * 1e6:>12.2f} {alg / 1e9:>13.2f} {bus / 1e9:>13.2f}")
        return "\n".join(lines)


def collective_sweep(
    collective: Collective, fabric: Fabric, sizes: Sequence[float | str], costs: CostModel | None = None
) -> SweepTable:
    """Simulates `collective` on `fabric` at each size S, like one run of nccl-tests' `*_perf -b -e`.

    Every flow's bytes and every reduction task's duration are linear in S, so the collective is
    compiled once and its sizes scaled inside one jitted vmap: a new list of sizes reuses the compile.

    Args:
        collective: built at any positive size (its flows set the shape; the sizes here set the bytes).
        fabric: provides links and routes.
        sizes: S values (bytes, or strings with units).
        costs: a calibrated machine's software costs (`netsim.topology.load_costs`), paid as
            `Collective.scenario` pays them.

    Raises:
        ScenarioError: a bad size, or a collective of size 0.
    """
    if not collective.size > 0:
        raise ScenarioError(
            f"collective_sweep: build the collective at a positive size, got size={collective.size!r}"
        )
    if isinstance(sizes, str | int | float) or len(sizes) == 0:
        raise ScenarioError(f"sizes: expected a non-empty list of sizes, got {sizes!r}")
    values = np.array([quantity(x, "bytes", f"sizes[{i}]", positive=True) for i, x in enumerate(sizes)])
    scales = values / collective.size
    if costs is not None and collective.step_overhead is None:
        # fitted per-step costs depend on the bytes per step: each size is its own scenario (one batch)
        base = collective.workload.scenario(fabric)
        times = compile_batch(costs.apply_each([_scaled(base, k) for k in scales])).run(width=16)["makespan"]
    else:
        compiled = compile_scenario(collective.scenario(fabric))
        p = compiled.program
        # only the sizes vary: one shared network, routes and dependencies for every point, and a batch
        # width rounded up to 16 so that size lists of up to 16 entries share one compile
        program = Program(p.route, scales[:, None] * p.size[None, :], p.release, p.overhead, p.after)
        times = run_batch(compiled.network, program, max_events=compiled.max_events, width=16)["makespan"]
    algbw = values / times
    return SweepTable(
        collective.kind,
        collective.algorithm,
        collective.n,
        values,
        times,
        algbw,
        algbw * collective.bus_factor,
    )


def _scaled(scenario: Scenario, k: float) -> Scenario:
    """`scenario` with every flow's bytes and task's duration times k."""
    flows = tuple(dataclasses.replace(f, bytes=f.bytes * k) for f in scenario.flows)
    return dataclasses.replace(
        scenario,
        flows=flows,
        tasks=tuple(dataclasses.replace(t, duration=t.duration * k) for t in scenario.tasks),
    )


def nccl_sizes(min_bytes: int, max_bytes: int, factor: int, step: int) -> list[int]:
    """nccl-tests' sizes (`-b min_bytes -e max_bytes -f factor -i step`): from min_bytes to max_bytes,
    times `factor` when it is above 1, else plus `step`; ScenarioError naming the option otherwise."""
    if min_bytes > max_bytes:
        raise ScenarioError(f"-b: minimum size {min_bytes} is above the -e maximum {max_bytes}")
    if factor < 1:
        raise ScenarioError(f"-f: step factor must be an integer >= 1, got {factor}")
    if factor == 1 and step < 1:
        raise ScenarioError(f"-i: step must be at least 1 byte, got {step}")
    if factor > 1 and min_bytes == 0:
        raise ScenarioError("-b: a size of 0 never grows with -f; start at 1 byte or more")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        if len(sizes) > MAX_SIZES:
            raise ScenarioError(f"-b/-e/-f/-i: more than {MAX_SIZES} sizes; use a larger -f or -i")
        size = size * factor if factor > 1 else size + step
    return sizes


def nccl_rows(kind: str, sizes: Sequence[int], n: int, word: int) -> list[tuple[int, int]]:
    """(size B, count) per row as nccl-tests prints them for a collective `kind` on n ranks and `word`-byte
    elements: element counts rounded down to whole words, and to a multiple of the ranks for the kinds
    that split the buffer; rows left at 0 bytes and repeats are dropped. count is per rank for allgather,
    reducescatter and alltoall, as nccl-tests prints it."""
    split = kind in ("allgather", "reducescatter", "alltoall")
    out, seen = [], set()
    for size in sizes:
        count = size // word
        if split:
            count = count // n * n
        if count == 0 or count in seen:
            continue
        seen.add(count)
        out.append((count * word, count // n if split else count))
    return out
