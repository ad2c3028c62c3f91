"""BookSim2's k-ary n-cubes (`mesh:KxK`, `torus:KxK`, one terminal per router) with dimension-order routing,
reduced to what the steady-state model needs: each channel's packets per cycle per unit injection rate.

Channel c = (router * n + dim) * 2 + direction (0: towards +1 along dim, 1: towards -1); a mesh's edge
routers keep their missing channels with zero load. Routing follows BookSim's dor: dimension 0 (the id's
lowest digit) first; on a torus each dimension the short way round, and at an exact tie (half a ring)
either way with probability 1/2 (its dor_next_torus draws RandomInt(1) per packet).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from .._errors import ScenarioError

#: the VC class a packet arrived in at a router, by index: from its injection port (any VC), then BookSim's
#: dateline classes on a torus (a mesh has the first only)
ARRIVED = ("any", "not wrapping", "wrapping")

#: the most nodes a shape may have (mesh:64x64, 16x16x16): the model holds the N x N traffic matrix and each
#: source's part of every channel's load, N x (2n + 1) N, in float64: 0.1 GB and 0.7 GB on a 64x64 mesh (its
#: loads take 40 s), 3.4 GB on a 2-ary 12-cube
MAX_NODES = 4096


@dataclasses.dataclass(frozen=True)
class Cube:
    """A k-ary n-cube: k routers along each of n dimensions, one terminal each."""

    k: int
    n: int = 2
    torus: bool = False

    @property
    def link_cycles(self) -> float:
        """Cycles per router-to-router channel as BookSim lays the cube out (use_noc_latency = 1, its
        default): 1 on a mesh, 2 on a torus (folded, so that wrap-around channels are no longer than the rest)."""
        return 2.0 if self.torus else 1.0

    @property
    def vc_classes(self) -> int:
        """Disjoint VC sets a packet picks one of: 2 on a torus (BookSim's dateline classes), else 1."""
        return 2 if self.torus else 1

    @property
    def nodes(self) -> int:
        return self.k**self.n

    @property
    def channels(self) -> int:
        return self.nodes * self.n * 2

    @property
    def name(self) -> str:
        return f"{'torus' if self.torus else 'mesh'}:{'x'.join([str(self.k)] * self.n)}"

    def channel_name(self, c: int) -> str:
        router, rest = divmod(c, 2 * self.n)
        dim, direction = divmod(rest, 2)
        return f"r{router}.d{dim}{'+-'[direction]}"

    def distance(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Router-to-router channel hops of each (a, b) pair under dimension order."""
        hops = np.zeros(np.broadcast(a, b).shape)
        for dim in range(self.n):
            x, y = (a // self.k**dim) % self.k, (b // self.k**dim) % self.k
            hops = hops + (np.minimum((y - x) % self.k, (x - y) % self.k) if self.torus else np.abs(y - x))
        return hops

    def channel_load(self, traffic: np.ndarray, *, by_source: bool = False, block: int = 64):
        """Packets per cycle when every node injects 1 packet per cycle with pattern T[s, d].

        Returns (load, inputs, wrapping): load[c] on each of the channels, then on each node's ejection
        channel; inputs[c, p, a] the part of it that enters its router through port p (2 * dim + direction
        of the channel it arrived on; 2n: the router's own injection port) in VC class a (`ARRIVED`: the
        class it had on the channel it arrived by, which holds it in an input VC there); wrapping[c] the
        part of load[c] whose ring crossing in that dimension wraps around (k-1 -> 0 or 0 -> k-1): on a
        torus BookSim's dim_order_torus puts those packets in one half of the VCs and the others in the
        other half, for the whole dimension (its dor_next_torus picks the class once, on turning into the
        dimension). Ties on a torus split the packet's weight between both ways. by_source: also [nodes,
        channels + nodes], the part of each channel's load that each source injects. Sources walk `block`
        at a time, so that each step's sums stay small (a 32x32 mesh: 1.0 s with each source's part).
        """
        ports = 2 * self.n + 1
        total = self.channels + self.nodes
        inputs = np.zeros(total * ports * len(ARRIVED))
        wrapping = np.zeros(total)
        sources = np.zeros((self.nodes, total)) if by_source else None
        for first in range(0, self.nodes, block):
            part = np.zeros(block * total) if by_source else None
            for src, channel, port, came, w, wraps in self._crossings(traffic[first : first + block], first):
                inputs += np.bincount(
                    (channel * ports + port) * len(ARRIVED) + came, w, minlength=inputs.size
                )
                wrapping += np.bincount(channel[wraps], w[wraps], minlength=total)
                if by_source:
                    part += np.bincount((src - first) * total + channel, w, minlength=part.size)
            if by_source:
                sources[first : first + block] = part.reshape(block, total)[: self.nodes - first]
        inputs = inputs.reshape(total, ports, len(ARRIVED))
        load = inputs.sum(axis=(1, 2))
        return (load, inputs, wrapping, sources) if by_source else (load, inputs, wrapping)

    def _crossings(self, rows: np.ndarray, first: int = 0):
        """The channels the packets of pattern rows T[first:, d] cross under dimension order, a step at a
        time: per step, (source, channel, input port, class arrived in, weight, wraps) of every packet still
        moving, then their ejection channels (channels + destination)."""
        k, n = self.k, self.n
        src, dst = np.nonzero(rows)
        w = rows[src, dst]
        src = src + first
        port = np.full(src.shape, 2 * n)  # arrived from the injection port
        came = np.zeros(src.shape, int)  # ... in any VC (ARRIVED)
        for dim in range(n):
            sx, dx = (src // k**dim) % k, (dst // k**dim) % k
            ahead = (dx - sx) % k
            if self.torus:  # the short way; both ways, half each, at a tie
                tie = (2 * ahead == k) & (ahead > 0)
                extra = np.flatnonzero(tie)
                src, dst, w, port, came, sx, dx, ahead = (
                    np.concatenate([a, a[extra]]) for a in (src, dst, w, port, came, sx, dx, ahead)
                )
                twin = np.zeros(src.size, bool)
                twin[src.size - extra.size :] = True
                tie = np.concatenate([tie, np.ones(extra.size, bool)])
                w = np.where(tie, w / 2, w)
                minus = np.where(tie, twin, 2 * ahead > k)
                steps = np.where(minus, (k - ahead) % k, ahead)
                wraps = np.where(minus, dx > sx, dx < sx)
            else:
                minus = dx < sx
                steps = np.abs(dx - sx)
                wraps = np.zeros(src.size, bool)
            direction = minus.astype(int)
            # the packet moves along `dim` in the line through its current position: dims < dim are already
            # at the destination's coordinates, dims > dim still at the source's
            base = src - src % k ** (dim + 1) + dst % k**dim
            along, held = 2 * dim + direction, 1 + wraps  # the port and class once moving along dim
            for step in range(int(steps.max(initial=0))):
                on = np.flatnonzero(step < steps)
                x = (sx[on] + np.where(minus[on], -step, step)) % k
                channel = ((base[on] + x * k**dim) * n + dim) * 2 + direction[on]
                entry, entered = (port[on], came[on]) if step == 0 else (along[on], held[on])
                yield src[on], channel, entry, entered, w[on], wraps[on]
            port = np.where(steps > 0, along, port)
            came = np.where(steps > 0, held, came)
        yield src, self.channels + dst, port, came, w, np.zeros(src.size, bool)

    def upstream(self) -> np.ndarray:
        """[channels + nodes, 2n + 1]: the channel a packet entering each channel's router by each port
        (as `channel_load`'s inputs) arrived on; -1 for the injection port and a mesh's missing edges."""
        k, n = self.k, self.n
        router = np.concatenate([np.arange(self.channels) // (2 * n), np.arange(self.nodes)])
        out = np.full((router.size, 2 * n + 1), -1)
        for dim in range(n):
            x = (router // k**dim) % k
            for direction in (0, 1):  # arrived moving +1 (from x - 1) or -1 (from x + 1)
                before = x - 1 + 2 * direction
                there = (before >= 0) & (before < k) if not self.torus else np.ones(router.size, bool)
                prev = router + (before % k - x) * k**dim
                out[:, 2 * dim + direction] = np.where(there, (prev * n + dim) * 2 + direction, -1)
        return out

    def mean_hops(self, traffic: np.ndarray) -> float:
        """Router-to-router hops averaged over packets (BookSim's "Hops average" counts one more: the
        ejecting router)."""
        s = np.arange(self.nodes)
        return float((traffic * self.distance(s[:, None], s[None, :])).sum() / traffic.sum())


def parse_shape(text: str) -> Cube:
    """`mesh:KxK` or `torus:KxK` (n dimensions: KxKxK...; all sides equal, as BookSim's k-ary n-cube), of at
    most MAX_NODES nodes."""
    m = re.fullmatch(r"(mesh|torus):(\d+(?:x\d+)*)", text.strip())
    if not m:
        raise ScenarioError(
            f"topology: expected mesh:KxK or torus:KxK, got {text!r} (a netsim topology such as mi300x takes "
            "its traffic from Python: netsim.latency.topology_load, as examples/latency_mi300x.py does)"
        )
    sides = [int(x) for x in m.group(2).split("x")]
    if len(set(sides)) != 1:
        raise ScenarioError(f"topology: {text!r} has unequal sides; BookSim's k-ary n-cube needs KxK")
    if sides[0] < 2:
        raise ScenarioError(f"topology: {text!r} needs at least 2 routers per side")
    if sides[0] ** len(sides) > MAX_NODES:
        raise ScenarioError(
            f"topology: {text!r} has {sides[0] ** len(sides)} nodes, more than the {MAX_NODES} netsim models "
            "(e.g. mesh:64x64)"
        )
    return Cube(sides[0], max(len(sides), 1), m.group(1) == "torus")
