"""DeepShare (ICPADS 2023, arXiv 2310.20209): its cluster, its measured tables and traces like its own.

`deepshare_cluster` is the one DeepShare-like fabric (the scheduler, the environment and the fit of
`MODELS` all run on it); `DeepShareTable` is the one reader of the two measured tables shipped in
`netsim/data/traces/sched_deepshare_*.csv`: each job configuration's isolated throughput, keyed
"Model,total_gpus,num_nodes_spanned", and the pairwise co-location table, [A, B] = A's throughput next
to B over A's throughput alone. See docs/jobs.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from .. import ScenarioError
from .._checks import samples
from ..data import trace_path
from ..traces import read_csv
from ._traffic import MODELS, Job

__all__ = [
    "DEEPSHARE_REFERENCE",
    "DeepShareTable",
    "deepshare_cluster",
    "deepshare_mix",
    "deepshare_trace",
    "parse_key",
    "spearman",
]

#: the reductions DeepShare reports for its RL-trained policies against state-of-the-art schedulers
#: (its repository: training latency "improved by up to 20.7%"): the reference that `netsim jobs`
#: prints next to each policy's mean JCT against the best and the worst heuristic
DEEPSHARE_REFERENCE = (-0.182, -0.207)

Config = tuple[str, int, int]  # (model, total GPUs, servers spanned)


def deepshare_cluster(
    servers: int = 4, gpus: int = 8, *, nic_bandwidth="100 Gbps", oversubscription: float = 2.0
):
    """A DeepShare-like cluster: 4 PCIe servers of 8 GPUs (two sockets, one NIC each) on a two-leaf,
    one-spine leaf-spine (2:1 oversubscribed by default; one leaf for fewer than 4 servers). GPUs are
    "n{s}/gpu{g}"."""
    from ..topology import cluster, leaf_spine, pcie_server

    leaves = 2 if servers >= 4 and servers % 2 == 0 else 1
    fabric = leaf_spine(
        leaves, 1, servers // leaves, host_bandwidth=nic_bandwidth, oversubscription=oversubscription
    )
    server = pcie_server(gpus, sockets=2 if gpus % 2 == 0 else 1, nics=1)
    return cluster(fabric, server, name=f"deepshare{servers}x{gpus}")


def parse_key(key: str, *, where: str = "key", models: Mapping[str, object] = MODELS) -> Config:
    """Parses a key: "MoE,8,2" -> ("MoE", 8, 2), checked: a known model, GPUs >= 2 divisible over >= 2 servers.

    Raises:
        ScenarioError: naming `where` and the key.
    """
    parts = key.split(",") if isinstance(key, str) else []
    if len(parts) != 3 or not parts[1].strip().isdigit() or not parts[2].strip().isdigit():
        raise ScenarioError(f"{where}: expected 'Model,total_gpus,num_nodes_spanned', got {key!r}")
    model, gpus, nodes = parts[0].strip(), int(parts[1]), int(parts[2])
    if model not in models:
        raise ScenarioError(f"{where}: unknown model {model!r} in {key!r}; known: {sorted(models)}")
    if nodes < 2 or gpus < nodes or gpus % nodes:
        raise ScenarioError(
            f"{where}: {key!r} needs >= 2 servers and a whole number of GPUs per server "
            f"(total_gpus a multiple of num_nodes_spanned)"
        )
    return model, gpus, nodes


def _number_cell(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ScenarioError(f"{where}: expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ScenarioError(f"{where}: expected a finite number > 0, got {text!r}")
    return value


@dataclasses.dataclass(frozen=True, eq=False)
class DeepShareTable:
    """DeepShare's two measured tables.

    Attributes:
        configs: the co-location table's keys, in its order.
        isolated: per config, the measured isolated throughput (samples/s; units differ per model), in
            the isolated file's order.
        ratio: C x C, [a, b] = throughput of configs[a] next to configs[b] over its throughput alone
            (the file clips values at 1.0).
    """

    configs: tuple[Config, ...]
    isolated: Mapping[Config, float]
    ratio: np.ndarray

    @classmethod
    def load(cls, isolated: str | None = None, ratio: str | None = None) -> DeepShareTable:
        """Reads the tables (default: the shipped sched_deepshare_*.csv)."""
        iso = read_csv(isolated or trace_path("sched_deepshare_isolated_thp.csv")).rows
        shared = read_csv(ratio or trace_path("sched_deepshare_shared_thp_ratio.csv"))
        header, tab = shared.columns, shared.rows
        thp = {}
        for i, row in enumerate(iso):
            cfg = parse_key(row[0], where=f"isolated row {i + 1}")
            thp[cfg] = _number_cell(row[1], f"isolated row {i + 1} ({row[0]!r})")
        cols = [parse_key(c, where=f"ratio column {j}") for j, c in enumerate(header[1:], 1)]
        rows = [parse_key(r[0], where=f"ratio row {i + 1}") for i, r in enumerate(tab)]
        if rows != cols:
            raise ScenarioError("ratio: rows and columns must list the same keys in the same order")
        missing = [c for c in rows if c not in thp]
        if missing:
            raise ScenarioError(f"isolated: no throughput for {missing[:3]}")
        values = np.array(
            [
                [_number_cell(x, f"ratio row {i + 1} ({r[0]!r}) column {j + 1}") for j, x in enumerate(r[1:])]
                for i, r in enumerate(tab)
            ]
        )
        return cls(tuple(rows), thp, values)

    def pairs(self) -> tuple[tuple[int, int], ...]:
        """Every unordered pair (a <= b) of configs: one simulation gives [a, b] and [b, a]."""
        n = len(self.configs)
        return tuple((a, b) for a in range(n) for b in range(a, n))

    def split(self, seed: int = 0) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
        """The unordered pairs shuffled (seeded) and cut in two halves: (fit, held out)."""
        pairs = self.pairs()
        order = np.random.default_rng(seed).permutation(len(pairs))
        half = len(pairs) // 2
        return tuple(pairs[i] for i in sorted(order[:half])), tuple(pairs[i] for i in sorted(order[half:]))

    def noise(self) -> dict[str, float]:
        """The table's own scatter, a floor for any model: entries clipped at exactly 1.000; the table
        against its transpose (r[a, b] against r[b, a], a != b: who slows whom is not symmetric, but
        the contention they share is); and the same for jobs of one model at different placements."""
        r = self.ratio
        n = len(self.configs)
        off = [(a, b) for a in range(n) for b in range(a + 1, n)]
        same = [(a, b) for a, b in off if self.configs[a][0] == self.configs[b][0]]
        d = lambda pairs: [abs(r[a, b] - r[b, a]) for a, b in pairs]
        return {
            "entries": float(r.size),
            "clipped_at_1": float(np.sum(r == 1.0)),
            "transpose_mae": float(np.mean(d(off))),
            "transpose_spearman": spearman([r[a, b] for a, b in off], [r[b, a] for a, b in off]),
            "same_model_transpose_mae": float(np.mean(d(same))),
        }


def spearman(x, y) -> float:
    """Spearman rank correlation (ties share their mean rank) of as many x as y, at least 2 finite numbers
    each (ScenarioError otherwise); nan where x or y is constant."""

    x, y = samples(x, "spearman: x"), samples(y, "spearman: y")
    if len(x) != len(y):
        raise ScenarioError(f"spearman: x has {len(x)} values but y has {len(y)}; expected as many")
    if len(x) < 2:
        raise ScenarioError(f"spearman: expected at least 2 points, got {len(x)}")

    def rank(v):
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for value in np.unique(v):
            tie = v == value
            r[tie] = r[tie].mean()
        return r

    rx, ry = rank(x), rank(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def deepshare_mix() -> tuple[Config, ...]:
    """The (model, GPUs, nodes) configurations DeepShare measured (the isolated table's keys, in its
    order): its job mix."""
    return tuple(DeepShareTable.load().isolated)


def deepshare_trace(
    n: int,
    *,
    seed: int = 0,
    arrival_rate: float = 0.5,
    iterations: tuple[int, int] = (50, 500),
    prefix: str = "j",
) -> list[Job]:
    """A seeded DeepShare-like trace of n jobs.

    Each job is one of `deepshare_mix()`'s configurations drawn uniformly (its model from MODELS, its
    GPU count; the measured node count is kept in the trace file only), arrivals are Poisson
    (exponential gaps of mean 1 / arrival_rate s, the first at 0), iterations log-uniform in
    [iterations[0], iterations[1]].
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ScenarioError(f"n: expected a number of jobs >= 1, got {n!r}")
    if not (isinstance(arrival_rate, int | float) and arrival_rate > 0 and math.isfinite(arrival_rate)):
        raise ScenarioError(f"arrival_rate: expected jobs/s > 0, got {arrival_rate!r}")
    lo, hi = iterations
    if not 1 <= lo <= hi:
        raise ScenarioError(f"iterations: expected 1 <= low <= high, got {iterations!r}")
    mix = [m for m in deepshare_mix() if m[0] in MODELS]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(mix), n)
    gaps = rng.exponential(1 / arrival_rate, n)
    gaps[0] = 0.0
    its = np.exp(rng.uniform(math.log(lo), math.log(hi), n)).round().astype(int)
    arrivals = np.cumsum(gaps)
    jobs = []
    for i in range(n):
        model, gpus, _ = mix[picks[i]]
        jobs.append(
            Job.of(f"{prefix}{i}", model, arrival=float(arrivals[i]), gpus=gpus, iterations=int(its[i]))
        )
    return jobs
