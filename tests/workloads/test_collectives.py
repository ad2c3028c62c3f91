"""Collectives: closed-form times on ideal fabrics, exact data movement (replayed from the transfer
records against the dependency DAG), nccl-tests' bandwidth accounting, size sweeps, and the examples.

Ideal fabrics: every link has bandwidth B and latency alpha; a flow alone on its link takes
alpha + bytes / B (its latency is paid before the first byte, without holding the link).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import netsim
from netsim import Link
from netsim.workloads import LinkFabric
from netsim.workloads import collectives as coll

B, ALPHA, S = 10e9, 1e-6, 8e6  # B/s, s, bytes
# one shape for every simulation here (and in tests/studies/test_rings.py): one compile
PAD = netsim.Shape(items=512, hops=16, after=4, resources=64)
EVENTS = PAD.max_events
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def names(n):
    return [f"g{i}" for i in range(n)]


def ring_fabric(n, *, both=False, bw=B, alpha=ALPHA):
    """g0 -> g1 -> ... -> g0 (and the reverse links with both=True)."""
    pairs = [(i, (i + 1) % n) for i in range(n)] + ([((i + 1) % n, i) for i in range(n)] if both else [])
    return LinkFabric(Link(f"g{a}->g{b}", f"g{a}", f"g{b}", bw, alpha) for a, b in pairs)


def full_fabric(n, *, bw=B, alpha=ALPHA):
    """A directed link between every ordered pair."""
    return LinkFabric(
        Link(f"g{a}->g{b}", f"g{a}", f"g{b}", bw, alpha) for a in range(n) for b in range(n) if a != b
    )


def star_fabric(n, *, bw=B, alpha=ALPHA):
    """Every rank on one switch: an uplink and a downlink each."""
    links = []
    for i in range(n):
        links += [Link(f"g{i}->sw", f"g{i}", "sw", bw, alpha), Link(f"sw->g{i}", "sw", f"g{i}", bw, alpha)]
    return LinkFabric(links)


def simulate(collective, fabric):
    compiled = netsim.compile_scenario(collective.scenario(fabric), shape=PAD)
    return netsim.simulate(compiled, max_events=EVENTS)


def assert_time(result, expected):
    assert result.makespan == pytest.approx(expected, rel=1e-9)


# --- closed forms on ideal fabrics ---------------------------------------------------------------


@pytest.mark.parametrize(("n", "kind"), [(2, "ring"), (3, "full"), (4, "ring"), (5, "full")])
def test_ring_allreduce_closed_form(n, kind):
    # 2(N-1) steps; every link carries one S/N flow per step: each step takes alpha + overhead + S/(N B)
    fabric = ring_fabric(n) if kind == "ring" else full_fabric(n)
    c = coll.allreduce(names(n), S, step_overhead=3e-7)
    assert c.steps == 2 * (n - 1)
    assert_time(simulate(c, fabric), 2 * (n - 1) * (ALPHA + 3e-7 + S / (n * B)))


@pytest.mark.parametrize(("n", "chunks", "channels"), [(3, 2, 1), (4, 3, 1), (4, 2, 2), (5, 3, 2)])
def test_chunked_ring_allreduce_closed_form(n, chunks, channels):
    # Unbounded slots: chunk c of step s starts when (s-1, c) and (s, c-1) finish: the k_d flows on an
    # anti-diagonal s + c = d start together on every link and share it, taking alpha + k_d * bytes / B.
    # Summed over the 2(N-1) + C - 1 diagonals: (2(N-1) + C - 1) alpha + 2(N-1) S / (N B). Channels on
    # the same ring only share the links further: the bytes term is unchanged.
    c = coll.allreduce(names(n), S, chunks=chunks, channels=channels, slots=None)
    expected = (2 * (n - 1) + chunks - 1) * ALPHA + 2 * (n - 1) * S / (n * B)
    assert_time(simulate(c, ring_fabric(n)), expected)
    if chunks <= coll.SLOTS:  # piece (s, c) waits for (s-1, c) on its connection: finished one diagonal ago
        default = coll.allreduce(names(n), S, chunks=chunks, channels=channels)
        assert_time(simulate(default, ring_fabric(n)), expected)


@pytest.mark.parametrize(("n", "chunks"), [(2, 3), (4, 3)])
def test_one_slot_serializes_each_connection(n, chunks):
    # slots=1: each link (one connection) carries its 2(N-1) C pieces one at a time, each alone on it:
    # tau = alpha + S / (N C B). The data a piece forwards, (s-1, c) one link upstream, finished at
    # ((s-1) C + c + 1) tau <= (s C + c) tau, when the link frees: no stall. T = 2(N-1) C tau, the sum.
    tau = ALPHA + S / (n * chunks * B)
    one = simulate(coll.allreduce(names(n), S, chunks=chunks, slots=1), ring_fabric(n))
    assert_time(one, 2 * (n - 1) * chunks * tau)
    # large slots: as unbounded, the anti-diagonal closed form above
    many = simulate(coll.allreduce(names(n), S, chunks=chunks, slots=10**6), ring_fabric(n))
    assert_time(many, (2 * (n - 1) + chunks - 1) * ALPHA + 2 * (n - 1) * S / (n * B))


def test_slowing_one_direction_of_the_socket_link_is_no_slower_than_both():
    # The README's PCIe server (builder figures): its natural ring crosses the socket link once each
    # way. Unbounded, the ring steps queued behind the slowed direction are all in flight at once and
    # take more than their share of the links they cross: slowing one direction by 30% cost more than
    # slowing both (8.17 ms vs 7.67 ms at 64 MiB). With NCCL's two pieces in flight per connection the
    # one-way slowdown is no slower than the two-way one, as on hardware.
    from netsim.topology import preset

    topo = preset("rtx4090-8x-epyc7542")
    both, one = topo.scaled("socket", 0.7), topo.scaled("socket0->socket1", 0.7)
    shape = netsim.Shape(items=256, hops=16, after=4, resources=64)

    def time(fabric, slots):
        c = coll.allreduce(topo.gpus(), "64 MiB", slots=slots)
        return netsim.simulate(netsim.compile_scenario(c.scenario(fabric), shape=shape)).makespan

    assert time(one, None) > 1.05 * time(both, None)  # the surprise, unbounded
    assert time(one, coll.SLOTS) <= time(both, coll.SLOTS) * (1 + 1e-9)
    assert time(topo, coll.SLOTS) <= time(one, coll.SLOTS)  # and slowing a link never helps


def test_slots_must_be_a_positive_integer():
    for bad in (0, -1, 2.0, True, "2"):
        with pytest.raises(netsim.ScenarioError, match="slots: must be an integer >= 1"):
            coll.allreduce(names(3), S, slots=bad)


def test_two_channels_in_opposite_directions_halve_the_bytes_term():
    n, chunks = 4, 2
    ring = names(n)
    c = coll.allreduce(ring, S, chunks=chunks, channels=2, rings=[ring, ring[::-1]])
    expected = (2 * (n - 1) + chunks - 1) * ALPHA + 2 * (n - 1) * (S / 2) / (n * B)
    assert_time(simulate(c, ring_fabric(n, both=True)), expected)


@pytest.mark.parametrize(("servers", "gpus"), [(2, 4), (2, 8), (3, 4), (4, 2)])
def test_rail_rings_cross_servers_one_rail_at_a_time(servers, gpus):
    ranks = [f"n{s}/gpu{g}" for s in range(servers) for g in range(gpus)]
    rings = coll.rail_rings(ranks, gpus)
    crossings = Counter()
    for ring in rings:
        assert sorted(ring) == sorted(ranks)  # a permutation
        for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
            (sa, ga), (sb, gb) = a.split("/"), b.split("/")
            closing = b == ring[0]
            if sa != sb and not (closing and servers % 2):  # an odd count's closing hop changes rails
                assert ga == gb, (ring, a, b)
                crossings[ga, sa, sb] += 1
    if servers == 2:  # every rail carries exactly one ring each way
        assert crossings == Counter(
            {(f"gpu{g}", a, b): 1 for g in range(gpus) for a, b in (("n0", "n1"), ("n1", "n0"))}
        )
    for bad, msg in (
        ((["a/0", "g1"], 2), "'g1' names no server"),
        ((["a/0", "b/0"], 0), "channels: must be"),
    ):
        with pytest.raises(netsim.ScenarioError, match=msg):
            coll.rail_rings(*bad)


def test_rail_rings_use_every_nic_of_a_rail_optimized_cluster():
    # two servers of 4 GPUs, NICs of 10 GB/s on 4 rails: in rank order every channel leaves a server by
    # the same NIC (busbw = one NIC), on rail rings each channel by its own (busbw = 4 NICs), exactly
    from netsim.topology import cluster, nvswitch_server, rail_optimized

    fabric = cluster(rail_optimized(2, 4, nic_bandwidth=10e9), nvswitch_server(4, gpu_bandwidth=100e9))
    ranks = fabric.gpus()
    for rings, busbw in ((None, 10e9), (coll.rail_rings(ranks, 4), 40e9)):
        c = coll.allreduce(ranks, S, channels=4, rings=rings)
        assert_time(simulate(c, fabric), 2 * 7 / 8 * S / busbw)


@pytest.mark.parametrize("kind", ["allgather", "reducescatter"])
@pytest.mark.parametrize(("n", "chunks"), [(4, 1), (5, 3)])
def test_allgather_reducescatter_closed_form(kind, n, chunks):
    # N-1 steps of S/N per link: (N - 1 + C - 1) alpha + (N-1) S / (N B), by the diagonal argument
    c = getattr(coll, kind)(names(n), S, chunks=chunks, slots=None)
    assert c.steps == n - 1
    assert_time(simulate(c, ring_fabric(n)), (n + chunks - 2) * ALPHA + (n - 1) * S / (n * B))


@pytest.mark.parametrize("kind", ["broadcast", "reduce"])
@pytest.mark.parametrize(("n", "chunks", "root"), [(4, 1, 0), (5, 4, 2)])
def test_pipelined_chain_closed_form(kind, n, chunks, root):
    # a chain of N-1 hops on distinct links, chunk c of hop h done at (h + c + 1) tau
    c = getattr(coll, kind)(names(n), S, chunks=chunks, root=root)
    assert c.steps == n - 1
    assert_time(simulate(c, ring_fabric(n)), (n - 1 + chunks - 1) * (ALPHA + S / (chunks * B)))


@pytest.mark.parametrize(("n", "chunks"), [(4, 1), (5, 2), (8, 1), (8, 3)])
def test_binary_tree_closed_form(n, chunks):
    # Depth D = ceil(log2 N). Up-sends of v finish at (height(v) + c + 1) tau, the root holds chunk c at
    # (D + c) tau, a depth-d node receives it at (D + c + d) tau: (2D + C - 1) tau, tau = alpha + S/(C B).
    # On a fully connected fabric every up and down edge has its own directed link.
    c = coll.allreduce(names(n), S, algorithm="binary_tree", chunks=chunks)
    depth = math.ceil(math.log2(n))
    assert c.steps == 2 * depth
    assert len(c.workload.flows) == 2 * (n - 1) * chunks
    assert_time(simulate(c, full_fabric(n)), (2 * depth + chunks - 1) * (ALPHA + S / (chunks * B)))


@pytest.mark.parametrize(("n", "chunks"), [(4, 2), (6, 1), (8, 2)])
def test_double_tree_closed_form(n, chunks):
    # Each tree carries S/2; for these n the two trees never load one directed link at the same time,
    # so the time is one tree's: (2D + C - 1) (alpha + S / (2 C B)).
    c = coll.allreduce(names(n), S, algorithm="tree", chunks=chunks)
    depth = math.ceil(math.log2(n))
    assert c.steps == 2 * depth
    assert_time(simulate(c, full_fabric(n)), (2 * depth + chunks - 1) * (ALPHA + S / (2 * chunks * B)))


@pytest.mark.parametrize("n", [2, 4, 8])
def test_halving_doubling_closed_form_power_of_two(n):
    # log2 N halving steps of S/2, S/4, ..., S/N, then the same doubling: 2 log2 N alpha + 2 (N-1)/N S/B
    c = coll.allreduce(names(n), S, algorithm="halving_doubling")
    m = int(math.log2(n))
    assert c.steps == 2 * m
    assert_time(simulate(c, full_fabric(n)), 2 * m * ALPHA + 2 * (n - 1) / n * S / B)


@pytest.mark.parametrize("n", [3, 5, 6])
def test_halving_doubling_closed_form_folded(n):
    # p = 2^floor(log2 N): fold (alpha + S/B), the survivors' exchange waiting on it, unfold (alpha + S/B)
    c = coll.allreduce(names(n), S, algorithm="halving_doubling")
    m = n.bit_length() - 1
    p = 1 << m
    assert c.steps == 2 * m + 2
    assert_time(simulate(c, full_fabric(n)), 2 * (ALPHA + S / B) + 2 * m * ALPHA + 2 * (p - 1) / p * S / B)


def test_alltoall_closed_forms():
    n = 4
    c = coll.alltoall(names(n), S)
    # fully connected: every pair on its own link
    assert_time(simulate(c, full_fabric(n)), ALPHA + S / (n * B))
    # one switch: each uplink carries (N-1) S/N; busbw is then exactly B when latency is 0
    r = simulate(c, star_fabric(n, alpha=0.0))
    assert_time(r, (n - 1) * S / (n * B))
    assert c.busbw(r.makespan) == pytest.approx(B, rel=1e-9)


def test_reduction_tasks_add_one_reduction_per_reduce_step():
    # With C = 1 each rank reduces one S/N block per ReduceScatter step before forwarding it; the
    # tasks lie on the critical path once per reduce step: (N-1) S / (N R) on top of the ring time.
    n, rate = 4, 20e9
    c = coll.allreduce(names(n), S, reduce_bandwidth=rate)
    assert len(c.workload.tasks) == n * (n - 1)
    expected = 2 * (n - 1) * (ALPHA + S / (n * B)) + (n - 1) * S / (n * rate)
    assert_time(simulate(c, ring_fabric(n)), expected)


# --- nccl-tests accounting ------------------------------------------------------------------------


def test_bus_factors_follow_nccl_tests():
    n = 8
    assert coll.bus_factor("allreduce", n) == 2 * 7 / 8
    for kind in ("allgather", "reducescatter", "alltoall"):
        assert coll.bus_factor(kind, n) == 7 / 8
    for kind in ("broadcast", "reduce"):
        assert coll.bus_factor(kind, n) == 1.0
    c = coll.allreduce(names(n), S)
    assert c.algbw(2e-3) == S / 2e-3
    assert c.busbw(2e-3) == S / 2e-3 * 2 * 7 / 8
    assert c.busbw(np.float64(2e-3)) == c.busbw(np.asarray(2e-3)) == c.busbw(2e-3)  # a result's makespan


@pytest.mark.parametrize("time", [0, 0.0, -1.0, float("nan"), float("inf"), "2 ms", None, True])
def test_bandwidths_refuse_a_time_that_is_not_a_positive_number(time):
    c = coll.allreduce(names(8), S)
    for method in ("busbw", "algbw"):
        with pytest.raises(
            netsim.ScenarioError, match=rf"{method}: time: must be a finite number of seconds > 0, got "
        ):
            getattr(c, method)(time)


# --- data movement: replay the transfers against the dependency DAG -----------------------------


def ancestors(workload):
    """Item id -> bitset of its ancestors, and id -> bit position (items in topological order)."""
    items = {x.id: x for x in (*workload.flows, *workload.tasks)}
    pending = {i: set(x.after) for i, x in items.items()}
    order, ready = [], [i for i, deps in pending.items() if not deps]
    waiting = {}
    for i, x in items.items():
        for d in x.after:
            waiting.setdefault(d, []).append(i)
    while ready:
        i = ready.pop()
        order.append(i)
        for j in waiting.get(i, ()):
            pending[j].discard(i)
            if not pending[j]:
                ready.append(j)
    assert len(order) == len(items), "dependency cycle"
    bit = {i: k for k, i in enumerate(order)}
    anc = {}
    for i in order:
        a = 0
        for d in items[i].after:
            a |= anc[d] | (1 << bit[d])
        anc[i] = a
    return order, anc, bit


def replay(c):
    """Final contents of every (rank, block, channel, chunk) as a Counter of contributing ranks.

    Checks first that every read of a buffer part is ordered (by the DAG) against every write into it,
    and that writes into one part are ordered unless both are reductions (which commute); then any
    topological order gives the same result.
    """
    order, anc, bit = ancestors(c.workload)
    before = lambda x, y: bool((anc[y] >> bit[x]) & 1)
    ordered = lambda x, y: before(x, y) or before(y, x)
    parts = [(k, ch) for k in range(c.channels) for ch in range(c.chunks)]
    reads, writes = {}, {}
    for t in c.transfers:
        for b in t.blocks:
            reads.setdefault((t.src, b, t.channel, t.chunk), []).append(t)
            writes.setdefault((t.dst, b, t.channel, t.chunk), []).append(t)
    for key, ws in writes.items():
        for w in ws:
            for r in reads.get(key, ()):
                assert ordered(w.flow, r.flow), f"race: {w.flow} writes what {r.flow} reads"
        for w1, w2 in itertools.combinations(ws, 2):
            assert (w1.op == w2.op == "reduce") or ordered(w1.flow, w2.flow), f"race: {w1.flow}, {w2.flow}"
    n = c.n
    state = {}
    for i, r in enumerate(c.ranks):
        for b in range(c.blocks):
            owns = {"allgather": b == i, "broadcast": i == c.root, "alltoall": b // n == i}.get(c.kind, True)
            for k, ch in parts:
                state[(r, b, k, ch)] = Counter({i: 1}) if owns else Counter()
    by_flow = {t.flow: t for t in c.transfers}
    for item in order:
        t = by_flow.get(item)
        if t is None:
            continue
        for b in t.blocks:
            payload = state[(t.src, b, t.channel, t.chunk)].copy()
            key = (t.dst, b, t.channel, t.chunk)
            state[key] = state[key] + payload if t.op == "reduce" else payload
    return state


def expected_final(c, rank_index, block):
    n = c.n
    everyone = Counter(range(n))
    return {
        "allreduce": everyone,
        "reducescatter": everyone if block == rank_index else None,
        "reduce": everyone if rank_index == c.root else None,
        "allgather": Counter({block: 1}),
        "broadcast": Counter({c.root: 1}),
        "alltoall": Counter({block // n: 1}) if block % n == rank_index else None,
    }[c.kind]


CASES = [("allreduce", a) for a in ("ring", "tree", "binary_tree", "halving_doubling")] + [
    ("allgather", "ring"),
    ("reducescatter", "ring"),
    ("broadcast", "ring"),
    ("reduce", "ring"),
    ("alltoall", "direct"),
]


@pytest.mark.parametrize(("kind", "algorithm"), CASES)
@pytest.mark.parametrize(
    ("n", "slots"), [(2, coll.SLOTS), (3, coll.SLOTS), (5, coll.SLOTS), (8, coll.SLOTS), (5, 1)]
)
def test_every_rank_ends_with_the_right_data(kind, algorithm, n, slots):
    rng = np.random.default_rng(n)
    ranks = names(n)
    kwargs = {"algorithm": algorithm, "chunks": 2, "channels": 2, "slots": slots}
    if kind != "alltoall":  # each channel on its own random ring order
        kwargs["rings"] = [list(rng.permutation(ranks)) for _ in range(2)]
    if kind in ("broadcast", "reduce"):
        kwargs["root"] = n - 1
    if kind in ("allreduce", "reducescatter", "reduce"):
        kwargs["reduce_bandwidth"] = 5e9  # reduction tasks must not break the data dependencies
    c = getattr(coll, kind)(ranks, S, **kwargs)
    state = replay(c)
    for (rank, block, _, _), got in state.items():
        want = expected_final(c, ranks.index(rank), block)
        if want is not None:
            assert got == want, (rank, block, got, want)
    # bytes: every flow carries its blocks' share exactly
    part = c.block_bytes / (c.channels * c.chunks)
    for f, t in zip(c.workload.flows, c.transfers, strict=True):
        assert (f.id, f.src, f.dst) == (t.flow, t.src, t.dst)
        assert f.bytes == pytest.approx(part * len(t.blocks), rel=1e-12)


@pytest.mark.parametrize(
    ("kind", "algorithm", "total"),
    [
        ("allreduce", "ring", lambda n: 2 * (n - 1)),
        ("allreduce", "tree", lambda n: 2 * (n - 1)),
        ("allreduce", "binary_tree", lambda n: 2 * (n - 1)),
        ("allgather", "ring", lambda n: n - 1),
        ("reducescatter", "ring", lambda n: n - 1),
        ("broadcast", "ring", lambda n: n - 1),
        ("reduce", "ring", lambda n: n - 1),
        ("alltoall", "direct", lambda n: n - 1),
    ],
)
def test_bytes_on_the_wire(kind, algorithm, total):
    # every algorithm here is bandwidth-optimal: it moves exactly the nccl-tests count of S's in total
    n = 6
    c = getattr(coll, kind)(names(n), S, algorithm=algorithm, chunks=3, channels=2)
    assert sum(f.bytes for f in c.workload.flows) == pytest.approx(total(n) * S, rel=1e-12)


@pytest.mark.parametrize("slots", [None, 1, 2])
def test_ring_dependency_rule_is_exact(slots):
    # send(s, c, i) waits for exactly: the flow into position i at step s-1 of chunk c, send(s, c-1, i),
    # and the piece `slots` earlier on its connection (pieces j = s C + c) when that is of another step
    n, chunks = 5, 3
    ring = ["g3", "g0", "g4", "g1", "g2"]
    c = coll.allreduce(names(n), S, chunks=chunks, rings=[ring], slots=slots)
    at = {(t.step, t.chunk, t.src): t for t in c.transfers}
    flows = {f.id: f for f in c.workload.flows}
    for t in c.transfers:
        want = set()
        if t.step > 0:
            prev = at[(t.step - 1, t.chunk, ring[(ring.index(t.src) - 1) % n])]
            assert prev.dst == t.src and prev.blocks == t.blocks  # it carries the block we forward
            want.add(prev.flow)
        if t.chunk > 0:
            want.add(at[(t.step, t.chunk - 1, t.src)].flow)
        j = t.step * chunks + t.chunk
        if slots is not None and j >= slots and (j - slots) // chunks != t.step:
            want.add(at[(*divmod(j - slots, chunks), t.src)].flow)
        assert set(flows[t.flow].after) == want


def test_link_bytes_are_conserved():
    n = 5
    c = coll.allreduce(names(n), S, algorithm="halving_doubling", chunks=2)
    r = simulate(c, full_fabric(n))
    total = sum(f.bytes * len(route) for f, route in zip(c.workload.flows, r.compiled.routes, strict=True))
    assert r.link_bytes.sum() == pytest.approx(total, rel=1e-9)


# --- trees ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", range(1, 40))
def test_btree_is_a_binary_tree_of_depth_ceil_log2(n):
    for t, parents in enumerate(coll.double_tree_parents(n) if n > 1 else [coll.btree_parents(n)]):
        assert parents.count(-1) == 1
        kids = Counter(p for p in parents if p >= 0)
        assert max(kids.values(), default=0) <= 2
        depths = coll.tree_depths(parents)  # terminates only if acyclic
        assert max(depths) == (math.ceil(math.log2(n)) if n > 1 else 0)
        if t == 1 and n % 2 == 0:  # even n: no rank forwards for both trees
            first = set(coll.double_tree_parents(n)[0]) - {-1}
            assert not first & (set(parents) - {-1})


# --- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: coll.allreduce(["g0"], S), "at least 2 ranks"),
        (lambda: coll.allreduce(["g0", "g0"], S), "appears twice"),
        (lambda: coll.allreduce(names(3), S, algorithm="magic"), "algorithm"),
        (lambda: coll.allgather(names(3), S, algorithm="tree"), "algorithm"),
        (lambda: coll.allreduce(names(3), S, chunks=0), "chunks"),
        (lambda: coll.allreduce(names(3), S, channels=1.5), "channels"),
        (lambda: coll.allreduce(names(3), -1.0), "size"),
        (lambda: coll.allreduce(names(3), "4 parsecs"), "size"),
        (lambda: coll.allreduce(names(3), S, rings=[["g0", "g1"]]), r"rings\[0\]"),
        (lambda: coll.broadcast(names(3), S, root=3), "root"),
        (lambda: coll.allreduce(names(3), S, routes={("g0", "x"): ["l"]}), "routes"),
        (lambda: coll.allreduce(names(3), S, reduce_bandwidth=0.0), "reduce_bandwidth"),
        (lambda: coll.bus_factor("gather", 4), "unknown"),
    ],
)
def test_bad_arguments_name_the_field(call, match):
    with pytest.raises(netsim.ScenarioError, match=match):
        call()


def test_units_are_accepted():
    c = coll.allreduce(names(2), "8 MB", step_overhead="2 us", reduce_bandwidth="20 GB/s")
    assert c.size == 8e6
    assert all(f.overhead == 2e-6 for f in c.workload.flows)
    assert c.workload.tasks[0].duration == pytest.approx(4e6 / 20e9)


# --- examples ------------------------------------------------------------------------------------


def example_files():
    return sorted(EXAMPLES.glob("coll_*.json"))


def test_there_are_collective_examples():
    assert len(example_files()) >= 3


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.name)
def test_example_loads_and_simulates(path):
    scenario = netsim.Scenario.load(path)
    assert scenario.flows
    result = netsim.simulate(netsim.compile_scenario(scenario, shape=PAD), max_events=EVENTS)
    assert result.makespan > 0
    # the generator writes the closed-form or searched time it expects into the description
    expected = re.search(r"makespan ([0-9.eE+-]+) s", json.loads(path.read_text()).get("description", ""))
    if expected:
        assert result.makespan == pytest.approx(float(expected.group(1)), rel=1e-6)
