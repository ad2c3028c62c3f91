"""BookSim2's synthetic traffic patterns as matrices: T[s, d] = the share of source s's packets sent to d.

Each definition follows BookSim2's src/traffic.cpp (node ids are its k-ary n-cube ids: digit i of the id
in base k is the coordinate along dimension i). Permutations give one 1 per row; `uniform` picks every node,
the source included, with probability 1/N (BookSim's RandomInt(N - 1)); `hotspot` spreads each source's
packets over the hot nodes by their weights.
"""

from __future__ import annotations

import numpy as np

from .._errors import ScenarioError
from ._shapes import MAX_NODES

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


def booksim_list(data: str) -> list[str]:
    """BookSim2's reading of a parameter list (tokenize_str, src/config_utils.cpp): "" -> []; text that
    does not start with "{" -> [text]; "{a,b,{c,d}}" -> its top-level elements ["a", "b", "{c,d}"]. As in
    BookSim, an element ends at a comma or at the brace that closes the list, so "{5,10}" is two elements
    and "{0,27},{3,1}" reads as the first list's, ["0", "27"]."""
    if not data:
        return []
    if data[0] != "{":
        return [data]
    values, start, nested = [], 1, 0
    for at in range(1, len(data)):
        char = data[at]
        if char == "{":
            nested += 1
        elif char == "}" and nested:
            nested -= 1
        elif char in ",}" and not nested:
            if at > start:
                values.append(data[start:at])
            start = at + 1
    if nested:
        raise ValueError(f"unbalanced braces in {data!r}")
    return values


def parse_pattern(text: str) -> tuple[str, dict]:
    """A pattern name, or one with parameters read as BookSim2 reads them (TrafficPattern::New): the text
    between the first "(" and the last ")" is a list (`booksim_list`). `hotspot({{0,5},{3,1}})`: hot nodes
    {0,5} with relative weights {3,1} (fewer weights than nodes repeat the last; none: all alike);
    `hotspot(7)` or `hotspot({7})`: node 7. BookSim reads `hotspot({5,10})` as node 5 with weight 10, one
    hot node, and so does netsim. `randperm(SEED)`. BookSim draws a random hot node where none is given
    (or one is < 0); netsim needs them named (default node 0). Returns (name, keyword arguments of
    traffic_matrix)."""
    text = str(text).strip()
    left = text.find("(")
    if left < 0:
        return text, {}
    name, right = text[:left].strip(), text.rfind(")")
    try:
        params = booksim_list(text[left + 1 : right if right > left else len(text)].strip())
        numbers = [[int(x) for x in booksim_list(p.strip())] for p in params]
    except ValueError:
        numbers = None
    if numbers is not None and name == "randperm" and len(numbers) == 1 and len(numbers[0]) == 1:
        return name, {"seed": numbers[0][0]}
    if numbers and name == "hotspot" and len(numbers) <= 2 and numbers[0] and min(numbers[0]) >= 0:
        hot = tuple(numbers[0])
        if len(numbers) == 1 or not numbers[1]:
            return name, {"hotspots": hot}
        weights = (numbers[1] + [numbers[1][-1]] * len(hot))[: len(hot)]
        return name, {"hotspots": hot, "weights": tuple(weights)}
    raise ScenarioError(
        f"traffic: cannot read {text!r}: parameters as BookSim2 writes them are hotspot({{{{NODE,...}},"
        "{WEIGHT,...}}) with nodes >= 0 (or hotspot(NODE)), or randperm(SEED); the other patterns take "
        "theirs from the shape"
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
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ScenarioError(f"traffic: randperm's seed must be a whole number >= 0, got seed={seed!r}")
        return np.random.default_rng(seed).permutation(nodes)[s]
    raise ScenarioError(f"traffic: {pattern!r} is not a permutation pattern")


def traffic_matrix(
    pattern: str, k: int, n: int = 2, *, seed: int = 0, hotspots: tuple[int, ...] = (0,), weights=None
) -> np.ndarray:
    """T[s, d] for a k-ary n-cube of N = k**n nodes (k, n >= 1; N at most MAX_NODES); rows sum to 1.

    Args:
        pattern: one of PATTERNS, or with BookSim2's parameters (`parse_pattern`: "hotspot({{0,5},{3,1}})",
            "randperm(3)"), which take the place of the keywords below.
        seed: randperm's permutation, >= 0 (NumPy's generator: BookSim's own draws differ, the statistics
            do not).
        hotspots, weights: hotspot's destinations, each named once, and their relative weights, finite and
            > 0 (BookSim's hotspot({..},{..})).
    """
    pattern, given = parse_pattern(pattern)
    seed = given.get("seed", seed)
    hotspots, weights = given.get("hotspots", hotspots), given.get("weights", weights)
    if pattern not in PATTERNS:
        raise ScenarioError(f"traffic: unknown pattern {pattern!r}; choose one of {', '.join(PATTERNS)}")
    for name, value in (("k", k), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ScenarioError(f"traffic: {name} must be a whole number >= 1, got {name}={value!r}")
    nodes = k**n
    if nodes > MAX_NODES:
        raise ScenarioError(
            f"traffic: k={k}, n={n} is {nodes} nodes, more than the {MAX_NODES} netsim models"
        )
    if pattern == "uniform":
        return np.full((nodes, nodes), 1.0 / nodes)
    if pattern == "hotspot":
        for h in hotspots:
            if isinstance(h, bool) or not isinstance(h, int | np.integer) or not 0 <= h < nodes:
                raise ScenarioError(f"traffic: hotspot node {h!r} is not a node of 0..{nodes - 1}")
        if len(set(hotspots)) < len(hotspots):
            twice = next(h for i, h in enumerate(hotspots) if h in hotspots[:i])
            raise ScenarioError(f"traffic: hotspot node {twice} is named twice in {tuple(hotspots)}")
        try:
            w = np.ones(len(hotspots)) if weights is None else np.asarray(weights, float)
        except (TypeError, ValueError):
            w = None
        if w is None or w.shape != (len(hotspots),) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ScenarioError(
                f"traffic: hotspot weights must be {len(hotspots)} finite numbers > 0 (one per hot node), "
                f"got weights={weights!r}"
            )
        t = np.zeros((nodes, nodes))
        for h, wi in zip(hotspots, w, strict=True):
            t[:, h] += wi / w.sum()
        return t
    t = np.zeros((nodes, nodes))
    src = np.arange(nodes)
    t[src, destination(pattern, src, nodes, k, n, seed)] = 1.0
    return t
