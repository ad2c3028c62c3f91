"""Collective size sweeps (netsim.studies.collective_sweep): the closed form of a ring AllReduce at every
size, busbw tending to the link bandwidth, one compile for new size lists, and clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import netsim
from netsim import Link
from netsim.studies import collective_sweep
from netsim.workloads import LinkFabric, allreduce

B, ALPHA = 10e9, 1e-6  # B/s, s
PAD = netsim.Shape(items=512, hops=16, after=4, resources=64)  # as tests/workloads/test_collectives.py


def names(n):
    return [f"g{i}" for i in range(n)]


def ring_fabric(n):
    """g0 -> g1 -> ... -> g0, links of bandwidth B and latency ALPHA."""
    return LinkFabric(Link(f"g{i}->g{(i + 1) % n}", f"g{i}", f"g{(i + 1) % n}", B, ALPHA) for i in range(n))


def simulate(collective, fabric):
    return netsim.simulate(netsim.compile_scenario(collective.scenario(fabric), shape=PAD))


def test_sweep_matches_the_closed_form_and_tends_to_link_bandwidth():
    # ring AllReduce: busbw = S / (N (alpha + S/(N B))) = B S / (S + N alpha B) -> B as S grows
    n = 4
    c = allreduce(names(n), 1e6)
    sizes = [2.0**k for k in range(10, 34, 4)]
    table = collective_sweep(c, ring_fabric(n), sizes)
    np.testing.assert_allclose(table.time, [2 * (n - 1) * (ALPHA + s / (n * B)) for s in sizes], rtol=1e-9)
    np.testing.assert_allclose(table.algbw, np.array(sizes) / table.time, rtol=1e-12)
    np.testing.assert_allclose(table.busbw, [B * s / (s + n * ALPHA * B) for s in sizes], rtol=1e-9)
    assert table.busbw[-1] > 0.999 * B
    assert len(table.rows()) == len(sizes) and "busbw" in table.format()


def test_sweep_reuses_the_compile(monkeypatch):
    # Changing sizes only scales the program's sizes: the vmapped engine is not traced again.
    n = 4
    fabric = ring_fabric(n)
    c = allreduce(names(n), 1e6, chunks=2)
    collective_sweep(c, fabric, [1e5, 1e6, 1e7])
    traces = []
    real = netsim.kernels.run
    monkeypatch.setattr(netsim.kernels, "run", lambda *a, **k: traces.append(1) or real(*a, **k))
    again = collective_sweep(c, fabric, [3e5, 3e6, 3e7])
    assert traces == []
    one = simulate(allreduce(names(n), 3e6, chunks=2), fabric)  # independent: a fresh build at 3e6
    assert again.time[1] == pytest.approx(one.makespan, rel=1e-9)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: collective_sweep(allreduce(names(3), 8e6), ring_fabric(3), []), "sizes"),
        (lambda: collective_sweep(allreduce(names(3), 0.0), ring_fabric(3), [1.0]), "positive size"),
        (
            lambda: collective_sweep(allreduce(names(3), 8e6), ring_fabric(3), [1e6, "4 parsecs"]),
            r"sizes\[1\]",
        ),
    ],
)
def test_bad_arguments_name_the_field(call, match):
    with pytest.raises(netsim.ScenarioError, match=match):
        call()
