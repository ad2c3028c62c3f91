"""Tree AllReduce: NCCL's double binary tree and the single binary tree, and the trees' shapes."""

from __future__ import annotations

from collections.abc import Sequence

from ._builder import Builder, Schedule


def btree_parents(n: int) -> list[int]:
    """Parent of each position in NCCL's binary tree over positions 0..n-1 (root 0: parent -1).

    In-order layout: position p with lowest set bit `bit` hangs under (p ^ bit) | (bit << 1), or under
    p ^ bit when that is out of range; odd positions are leaves, so a mirrored or shifted copy makes
    them interior (the double binary tree). Depth: ceil(log2 n).
    """
    parents = [-1] * n
    for p in range(1, n):
        bit = p & -p
        up = (p ^ bit) | (bit << 1)
        parents[p] = up if up < n else p ^ bit
    return parents


def double_tree_parents(n: int) -> list[list[int]]:
    """The two trees of NCCL's double binary tree: the binary tree, and its mirror (n even) or its
    shift by one position (n odd). For even n no position is interior in both (each rank forwards
    for one tree only); for odd n position 0 is interior in both."""
    first = btree_parents(n)
    if n % 2 == 0:
        second = [-1 if first[n - 1 - p] < 0 else n - 1 - first[n - 1 - p] for p in range(n)]
    else:
        second = [-1 if first[(p - 1) % n] < 0 else (first[(p - 1) % n] + 1) % n for p in range(n)]
    return [first, second]


def tree_depths(parents: Sequence[int]) -> list[int]:
    """Edges from each position up to the root."""
    out = []
    for p in range(len(parents)):
        d = 0
        while parents[p] >= 0:
            p, d = parents[p], d + 1
        out.append(d)
    return out


def _bottom_up(parents: Sequence[int]) -> list[int]:
    """Positions ordered deepest first (children before parents)."""
    depths = tree_depths(parents)
    return sorted(range(len(parents)), key=lambda p: (-depths[p], p))


def _tree(double: bool) -> Schedule:
    """Tree AllReduce: reduce up each tree, then broadcast down, pipelined per chunk.

    Tree t carries block t (half the bytes each in the double tree). Dependency rules, per tree and
    channel: up-send(v, c) to the parent waits for the up-receives of chunk c from all of v's children
    (or their reduction tasks) and for up-send(v, c - 1); down-send(v -> w, c) waits, at the root, for
    the root's up-receives of chunk c, elsewhere for v's down-receive of chunk c, and for
    down-send(v -> w, c - 1). Reduce and broadcast of different chunks overlap.
    """

    def schedule(b: Builder) -> tuple[int, int]:
        n = b.n
        trees = double_tree_parents(n) if double else [btree_parents(n)]
        part = b.size / (len(trees) * b.channels * b.chunks)
        for k in range(b.channels):
            pos = b.order(k)
            for t, parents in enumerate(trees):
                children = [[q for q in range(n) if parents[q] == p] for p in range(n)]
                top = parents.index(-1)
                for c in range(b.chunks):
                    up: dict[int, str] = {}  # position -> ready id of its up-send's receive at the parent
                    for v in _bottom_up(parents):
                        if v == top:
                            continue
                        _, up[v] = b.send(
                            k,
                            c,
                            f"t{t}/up{v}",
                            pos[v],
                            pos[parents[v]],
                            part,
                            [up[w] for w in children[v]],
                            blocks=(t,),
                            step=0,
                            op="reduce",
                            lane=t,
                        )
                    down: dict[int, str] = {}
                    for w in reversed(_bottom_up(parents)):
                        if w == top:
                            continue
                        v = parents[w]
                        down[w], _ = b.send(
                            k,
                            c,
                            f"t{t}/down{w}",
                            pos[v],
                            pos[w],
                            part,
                            [up[u] for u in children[top]] if v == top else [down[v]],
                            blocks=(t,),
                            step=1,
                            op="copy",
                            lane=t,
                        )
        return len(trees), 2 * max(max(tree_depths(p)) for p in trees)

    return schedule


double_tree = _tree(double=True)
binary_tree = _tree(double=False)
