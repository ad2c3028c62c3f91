"""BookSim2's synthetic traffic patterns as matrices: T[s, d] = the share of source s's packets sent to d.

Each definition follows BookSim2's src/traffic.cpp (node ids are its k-ary n-cube ids: digit i of the id
in base k is the coordinate along dimension i). Permutations give one 1 per row; `uniform` picks every node,
the source included, with probability 1/N (BookSim's RandomInt(N - 1)); `hotspot` spreads each source's
packets over the hot nodes by their weights.
"""

from __future__ import annotations

import numpy as np

from .._errors import ScenarioError

PATTERNS = (
    "uniform",
    "transpose",
    "bitcomp",
    "bitrev",
    "shuffle",
    "tornado",
    "neighbor",
    "randperm",
    "hotspot",
)


def _power_of_two(nodes: int, pattern: str) -> int:
    if nodes & (nodes - 1) or nodes < 2:
        raise ScenarioError(f"traffic: {pattern!r} needs a power-of-two node count, got {nodes} nodes")
    return nodes.bit_length() - 1


def destination(pattern: str, source: np.ndarray, nodes: int, k: int, n: int, seed: int = 0) -> np.ndarray:
    """The destination of each source under a permutation pattern (BookSim's dest(source))."""
    s = np.asarray(source)
    if pattern == "bitcomp":
        _power_of_two(nodes, pattern)
        return ~s & (nodes - 1)
    if pattern == "transpose":
        bits = _power_of_two(nodes, pattern)
        if bits % 2:
            raise ScenarioError(
                f"traffic: 'transpose' needs an even power of two nodes (a square), got {nodes}"
            )
        half = bits // 2
        lo = (1 << half) - 1
        return ((s >> half) & lo) | ((s << half) & (lo << half))
    if pattern == "bitrev":
        bits = _power_of_two(nodes, pattern)
        return np.array([int(format(int(x), f"0{bits}b")[::-1], 2) for x in s.ravel()]).reshape(s.shape)
    if pattern == "shuffle":
        _power_of_two(nodes, pattern)
        shifted = s << 1
        return (shifted & (nodes - 1)) | ((shifted & nodes) > 0)
    if pattern in ("tornado", "neighbor"):
        out = np.zeros_like(s)
        for dim in range(n):
            digit = (s // k**dim) % k
            step = (k + 1) // 2 - 1 if pattern == "tornado" else 1
            out = out + k**dim * ((digit + step) % k)
        return out
    if pattern == "randperm":
        return np.random.default_rng(seed).permutation(nodes)[s]
    raise ScenarioError(f"traffic: {pattern!r} is not a permutation pattern")


def traffic_matrix(
    pattern: str, k: int, n: int = 2, *, seed: int = 0, hotspots: tuple[int, ...] = (0,), weights=None
) -> np.ndarray:
    """T[s, d] for a k-ary n-cube of N = k**n nodes; rows sum to 1.

    Args:
        pattern: one of PATTERNS.
        seed: randperm's permutation (NumPy's generator: BookSim's own draws differ, the statistics do not).
        hotspots, weights: hotspot's destinations and their relative weights (BookSim's hotspot({..},{..})).
    """
    if pattern not in PATTERNS:
        raise ScenarioError(f"traffic: unknown pattern {pattern!r}; choose one of {', '.join(PATTERNS)}")
    nodes = k**n
    if pattern == "uniform":
        return np.full((nodes, nodes), 1.0 / nodes)
    if pattern == "hotspot":
        w = np.ones(len(hotspots)) if weights is None else np.asarray(weights, float)
        if any(h < 0 or h >= nodes for h in hotspots) or w.shape != (len(hotspots),) or np.any(w <= 0):
            raise ScenarioError(
                f"traffic: hotspot nodes {hotspots} / weights {weights} invalid for {nodes} nodes"
            )
        t = np.zeros((nodes, nodes))
        for h, wi in zip(hotspots, w, strict=True):
            t[:, h] += wi / w.sum()
        return t
    t = np.zeros((nodes, nodes))
    src = np.arange(nodes)
    t[src, destination(pattern, src, nodes, k, n, seed)] = 1.0
    return t
