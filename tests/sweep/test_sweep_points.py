"""Sweep points are what netsim.simulate gives for the same scenario, built by hand; grids are laid out
right; scenario axes (failed links, callbacks) rebuild and reroute on the host; sampling is seeded."""

import dataclasses
import itertools

import numpy as np
import pytest
from sweep_cases import CHUNK, diamond, grid_sweep, modified, move_f3, one_link, reference, scenario_sweep

import netsim
from netsim import Status
from netsim.sweep import FailedLinks, LinkBandwidth, LinkLatency, MessageSize, Sweep, SweepError


def test_grid_closed_form_one_link():
    # one flow alone on one link: finish = latency + bytes / bandwidth, exactly
    sweep = Sweep(
        one_link(),
        [
            LinkBandwidth("bw", value=[1e9, 2.5e9, 1e10]),
            LinkLatency("lat", value=[0, 2e-6, 1e-3]),
            MessageSize("bytes", scale=[1.0, 3.0]),
        ],
    )
    result = sweep.run(progress=False)
    assert result.grid_shape == (3, 3, 2) and result.complete
    bw, lat, nbytes = np.meshgrid([1e9, 2.5e9, 1e10], [0, 2e-6, 1e-3], [1e6, 3e6], indexing="ij")
    np.testing.assert_allclose(result.grid("makespan"), lat + nbytes / bw, rtol=1e-14)
    # one flow on one link: it is busy exactly for its transfer, so utilization = transfer / makespan
    np.testing.assert_allclose(
        result.grid("link_utilization")[..., 0], (nbytes / bw) / (lat + nbytes / bw), rtol=1e-12
    )
    assert result.axis("bw").labels[0] == "1 GB/s"


def test_grid_matches_simulate_point_by_point():
    sweep = grid_sweep()
    result = sweep.run(progress=False, chunk_size=CHUNK)
    assert result.n_points == 24 and result.complete
    grid_ms, grid_ff, grid_lb = (result.grid(m) for m in ("makespan", "flow_finish", "link_bytes"))
    for idx in np.ndindex(*result.grid_shape):
        row = {a.name: float(a.values[i]) for a, i in zip(result.axes, idx, strict=True)}
        ref = reference(sweep, row)
        assert grid_ms[idx] == pytest.approx(ref.makespan, rel=1e-13)
        np.testing.assert_allclose(grid_ff[idx], ref.flow_finish, rtol=1e-13)
        np.testing.assert_allclose(grid_lb[idx], ref.link_bytes, rtol=1e-12)
    # a conservation law per point: each link carries the bytes of the flows routed over it
    f1 = np.broadcast_to(np.array([0.25, 1.0, 2.0, 8.0]) * 4e6, result.grid_shape)
    np.testing.assert_allclose(grid_lb[..., 0], f1, rtol=1e-12)  # ab carries f1 only
    np.testing.assert_allclose(grid_lb[..., 1], f1 + 2e6, rtol=1e-12)  # bd carries f1 and f2


def test_scenario_axes_reroute_and_report_unbuilt_points():
    sweep = scenario_sweep()
    result = sweep.run(progress=False)
    assert result.grid_shape == (2, 3, 3)
    status = result.grid("status")
    # failing bd disconnects b from d (flow f2): those 6 points cannot be built
    assert np.all(status[:, :, 2] == Status.NOT_BUILT) and np.all(np.isnan(result.grid("makespan")[:, :, 2]))
    assert any("'f2'" in e and "bd" in e for e in result.errors)
    unbuilt = int(np.flatnonzero(result.status == Status.NOT_BUILT)[0])
    (why,) = result.reasons(unbuilt)  # the Status sentence, with the scenario's own error
    assert why.startswith("its scenario could not be built: ") and "'f2'" in why
    assert result.point_status(unbuilt) is Status.NOT_BUILT and result.reasons(0) == []
    assert np.all(status[:, :, :2] == 0)
    for i, scale in enumerate([1.0, 3.0]):
        for j, src in enumerate(["c", "a", "b"]):
            base = modified(move_f3(diamond(), src), bw={x.id: scale for x in diamond().links})
            healthy = netsim.simulate(base)
            assert result.grid("makespan")[i, j, 0] == pytest.approx(healthy.makespan, rel=1e-13)
            # ab failed: f1 (and f3 when placed at a) take a -> c -> d; the others keep their routes
            rerouted = dataclasses.replace(
                base,
                flows=tuple(
                    dataclasses.replace(f, route=("ac", "cd")) if f.src == "a" else f for f in base.flows
                ),
            )
            ref = netsim.simulate(rerouted)
            np.testing.assert_allclose(result.grid("flow_finish")[i, j, 1], ref.flow_finish, rtol=1e-13)
            assert result.grid("link_bytes")[i, j, 1][result.link_ids.index("ab")] == 0.0


def test_random_samples_are_seeded_and_exact():
    base = diamond()
    axes = [
        LinkBandwidth("bw", scale_range=(0.25, 4.0), log=True, independent=True),
        MessageSize("f1_bytes", match="f1", value=[1e6, 8e6]),
    ]
    a = Sweep(base, axes, samples=6, seed=3).run(progress=False)
    b = Sweep(base, axes, samples=6, seed=3).run(progress=False)
    c = Sweep(base, axes, samples=6, seed=4).run(progress=False)
    bw = a.axis("bw")
    assert bw.value.shape == (6, 4) and bw.ids == ("ab", "bd", "ac", "cd") and a.grid_shape is None
    assert np.all((bw.value >= 0.25) & (bw.value <= 4.0))
    np.testing.assert_array_equal(a.makespan, b.makespan)
    assert not np.allclose(bw.value, c.axis("bw").value)
    for p in range(6):
        scales = dict(zip(bw.ids, bw.value[p], strict=True))
        sc = modified(base, bw=scales)
        sc = dataclasses.replace(
            sc,
            flows=tuple(
                dataclasses.replace(f, bytes=a.axis("f1_bytes").value[p]) if f.id == "f1" else f
                for f in sc.flows
            ),
        )
        assert a.makespan[p] == pytest.approx(netsim.simulate(sc).makespan, rel=1e-13)


@pytest.mark.parametrize(
    ("axis", "message"),
    [
        (lambda: LinkBandwidth("bw", match="nope*", scale=[1.0]), "'nope*'"),
        (lambda: LinkBandwidth("bw", scale=[0.0, 1.0]), "failed-links axis"),
        (lambda: LinkBandwidth("bw", scale=[1.0], value=[1e9]), "exactly one of"),
        (lambda: LinkLatency("lat", scale_range=(2.0, 1.0)), "low <= high"),
        (lambda: FailedLinks("f", sets=["ab"]), "sets[0]"),
    ],
)
def test_bad_axes_name_the_field(axis, message):
    with pytest.raises(SweepError, match=message.replace("[", r"\[").replace("*", r"\*")):
        Sweep(diamond(), [axis()]).plan()


def test_range_needs_samples_and_names_are_unique():
    with pytest.raises(SweepError, match="set samples"):
        Sweep(diamond(), [LinkBandwidth("bw", scale_range=(1.0, 2.0))])
    with pytest.raises(SweepError, match="duplicate axis name 'x'"):
        Sweep(diamond(), [LinkBandwidth("x", scale=[1.0]), LinkLatency("x", scale=[1.0])])


def test_bandwidth_axis_scales_shared_budgets_as_topology_scaled():
    # a cable x<->y with a two-way budget (1.2 GB/s < 2 x 1 GB/s) and traffic both ways: the budget binds.
    # The sweep's bandwidth axis and Topology.scaled (netsim collective --scale) follow one rule: a budget
    # whose links all match is scaled with them, one named by its own id is scaled alone.
    from netsim.topology import Topology, cable

    budget = netsim.SharedResource("x<->y", 1.2e9, ("x->y", "y->x"))
    topo = Topology(
        "xy", cable("x", "y", 1e9) + cable("z", "x", 1e9), dict.fromkeys("xyz", "host"), shared=(budget,)
    )
    flows = [
        netsim.Flow("f1", "x", "y", 1e6),
        netsim.Flow("f2", "y", "x", 1e6),
        netsim.Flow("f3", "z", "x", 1e5),
    ]
    sweep = Sweep(
        topo.scenario(flows),
        [
            LinkBandwidth("cable", match="[xy]->[xy]", scale=[0.5, 1.0, 2.0]),
            LinkBandwidth("budget", match="x<->y", scale=[1.0, 0.25]),
            LinkBandwidth("one_way", match="x->y", scale=[1.0, 3.0]),
        ],
    )
    result = sweep.run(progress=False)
    makespan = result.grid("makespan")
    for (i, c), (j, b), (k, v) in itertools.product(*(enumerate(a.values) for a in sweep.axes)):
        # max-min: the two directions split the budget evenly (below either link); one direction made
        # faster leaves the budget as it is, so it changes nothing
        assert makespan[i, j, k] == pytest.approx(1e6 / (0.6e9 * c * b), rel=1e-12), (c, b, v)
        ref = topo.scaled("[xy]->[xy]", c).scaled("x<->y", b).scaled("x->y", v)
        assert makespan[i, j, k] == pytest.approx(netsim.simulate(ref.scenario(flows)).makespan, rel=1e-13)
    # a value on both directions moves their budget by the same factor: 2 GB/s doubles it
    both = Sweep(topo.scenario(flows), [LinkBandwidth("v", match=["x->y", "y->x"], value=[2e9])]).run(
        progress=False
    )
    assert both.makespan[0] == pytest.approx(1e6 / 1.2e9, rel=1e-12)
    # independent draws per link: the budget takes the larger factor of its two links
    drawn = Sweep(
        topo.scenario(flows),
        [LinkBandwidth("r", scale_range=[0.5, 2.0], independent=True)],
        samples=3,
    ).run(progress=False)
    axis = drawn.axis("r")
    assert axis.ids == ("x->y", "y->x", "z->x", "x->z")
    for row in range(3):
        ref = topo
        for link, f in zip(axis.ids, axis.value[row], strict=True):
            ref = ref.scaled(link, f)
        ref = ref.scaled("x<->y", max(axis.value[row][:2]))  # scaling one direction leaves the budget
        assert drawn.makespan[row] == pytest.approx(netsim.simulate(ref.scenario(flows)).makespan, rel=1e-13)


@pytest.mark.parametrize("axes", [[], (), None])
def test_no_axes_is_refused_as_in_a_json_spec(axes):
    # the same words as load_spec's for "axes": []
    with pytest.raises(SweepError, match=r"^axes: expected a non-empty list of axis objects, got "):
        Sweep(diamond(), axes)
