"""Topologies that carry shared resources, the software costs collectives pay on a calibrated machine
(`netsim.CostModel`), and `netsim.topology.load` / `load_costs` of presets, `nvidia-smi topo -m` files and
calibration files."""

import dataclasses
import json
import math

import jax
import numpy as np
import pytest

import netsim
from netsim import CostModel, ScenarioError, SharedResource
from netsim.data import trace_path
from netsim.topology import (
    CALIBRATED,
    Topology,
    base_topology,
    build_server,
    cable,
    link_class,
    load,
    load_costs,
    pcie_server,
    pcie_shared,
    preset,
    server_plan,
    topology_entry,
)
from netsim.traces import parse_nvidia_smi_topo as parse
from netsim.workloads import Workload, allreduce
from netsim.workloads._import import RankProgram

GB = 1e9


def two_switches(shared=()):
    links = [*cable("g0", "sA", 30 * GB), *cable("g1", "sB", 30 * GB), *cable("sA", "sB", 20 * GB)]
    kind = {"g0": "gpu", "g1": "gpu", "sA": "switch", "sB": "switch"}
    return Topology("two", links, kind, shared=shared)


def test_shared_resources_are_validated_kept_and_put_in_scenarios():
    duplex = SharedResource("duplex", 30 * GB, ("sA->sB", "sB->sA"))
    topo = two_switches([duplex])
    with pytest.raises(ScenarioError, match=r"shared\[0\] \('x'\): unknown link id\(s\) \['nope'\]"):
        two_switches([SharedResource("x", GB, ("nope",))])
    with pytest.raises(ScenarioError, match="duplicate resource id 'sA->sB'"):
        two_switches([SharedResource("sA->sB", GB, ("g0->sA",))])
    flows = [netsim.Flow("a", "g0", "g1", 1e9), netsim.Flow("b", "g1", "g0", 1e9)]
    scenario = topo.scenario(flows)
    assert scenario.shared == (duplex,)
    assert Workload(flows).scenario(topo).shared == (duplex,)
    # both directions at once share 30 GB/s: each gets 15, so 1 GB takes 1/15 s (links alone: 1/20 s)
    assert netsim.simulate(scenario).makespan == pytest.approx(1 / 15, rel=1e-12)
    # a failed direction leaves the budget on the other; failing both drops it
    one = topo.without_links(["sB->sA"])
    assert one.shared == (dataclasses.replace(duplex, links=("sA->sB",)),)
    assert topo.without_links(["sA->sB", "sB->sA"]).shared == ()
    staged = SharedResource("s", GB, ("g0->sA",), via=("sA->sB",))
    assert two_switches([staged]).without_links(["sA->sB"]).shared == ()


def test_pcie_shared_resources_from_the_builder():
    topo = preset("rtx4090-8x-epyc7542", shared=True)
    assert topo.shared == pcie_shared(preset("rtx4090-8x-epyc7542"))
    duplex, *staging = topo.shared
    assert duplex.id == "socket0<->socket1" and duplex.capacity == pytest.approx(0.94 * 2 * 21.9 * GB)
    assert [s.id for s in staging] == [f"gpu{i} staging" for i in range(8)]
    assert staging[0].capacity == pytest.approx(1.07 * 25.8 * GB) and set(staging[0].via) == {
        x.id for x in topo.links if link_class(topo, x.id) == "memory"
    }
    assert pcie_server(4, sockets=1).shared == ()  # opt-in: plain builders keep their figures


def costs(regimes, **values) -> CostModel:
    return CostModel.from_values({"regimes": regimes, **values})


LL_SIMPLE = {
    "LL": {"overhead": 2e-6, "efficiency": 0.5, "up_to": 1e4},
    "Simple": {"overhead": 8e-6, "efficiency": 0.9, "up_to": None},
}


def test_cost_model_closed_form_and_apply():
    model = costs(LL_SIMPLE, width=0.5, launch=3e-6, copy_overhead=1e-6, staged_overhead=9e-6)
    b = np.array([10.0, 1e4, 1e8])
    w = 1 / (1 + np.exp(-(np.log(b) - np.log(1e4)) / 0.5))  # weight of Simple
    over, eff = map(np.asarray, model.step_costs(b))
    np.testing.assert_allclose(over, np.exp((1 - w) * np.log(2e-6) + w * np.log(8e-6)), rtol=1e-12)
    np.testing.assert_allclose(eff, np.exp((1 - w) * np.log(0.5) + w * np.log(0.9)), rtol=1e-12)
    assert over[1] == pytest.approx(4e-6, rel=1e-12)  # geometric means at the hand-over
    assert eff[1] == pytest.approx(math.sqrt(0.45), rel=1e-12)
    scenario = two_switches().scenario([netsim.Flow("a", "g0", "g1", 1e8, overhead=1e-6)])
    (f,) = model.apply(scenario).flows
    assert f.bytes == pytest.approx(1e8 / eff[2], rel=1e-12)
    assert f.overhead == pytest.approx(1e-6 + over[2], rel=1e-12) and f.start == pytest.approx(
        3e-6, rel=1e-12
    )
    # copies: a fixed overhead, direct or host-staged; host-staged bytes / staged efficiency
    extra, factor = map(np.asarray, model.flow_costs(np.array([4e7, 4e7]), 0.0, np.array([False, True])))
    np.testing.assert_allclose(extra, [1e-6, 9e-6], rtol=1e-12)
    np.testing.assert_allclose(factor, [1.0, 1 / 0.77], rtol=1e-12)  # DEFAULT_COSTS' staged efficiency
    back = CostModel.from_values(json.loads(json.dumps(model.to_values())))
    for x, y in zip(jax.tree.leaves(back), jax.tree.leaves(model), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12)
    assert back.regimes == ("LL", "Simple") and costs({"Simple": LL_SIMPLE["Simple"]}).launch == 0.0
    bad = {"LL": LL_SIMPLE["LL"], "Simple": {"overhead": 8e-6, "efficiency": 1.5}}
    with pytest.raises(ScenarioError, match=r"regimes.Simple.efficiency: must be in \(0, 1\]"):
        costs(bad)
    with pytest.raises(ScenarioError, match=r"regimes.LL.up_to: must be a finite number, got None"):
        costs({"LL": {"overhead": 2e-6, "efficiency": 0.5}, "Simple": LL_SIMPLE["Simple"]})
    with pytest.raises(ScenarioError, match=r"software.launch: must be >= 0"):
        costs(LL_SIMPLE, launch=-1.0)


def test_collectives_pay_given_costs_unless_given_an_overhead():
    topo = two_switches()
    model = costs({"Simple": {"overhead": 5e-6, "efficiency": 0.8}}, launch=2e-6)
    plain = allreduce(["g0", "g1"], 8e6).scenario(topo)
    costed = allreduce(["g0", "g1"], 8e6).scenario(topo, model)
    # 2 ranks: 2 steps of S/2 = 4 MB, 20 GB/s uplink; each step 5 us + 4e6 / 0.8 / 20e9, after 2 us launch
    assert netsim.simulate(plain).makespan == pytest.approx(2 * 4e6 / 20e9, rel=1e-12)
    assert netsim.simulate(costed).makespan == pytest.approx(2e-6 + 2 * (5e-6 + 4e6 / 0.8 / 20e9), rel=1e-12)
    given = allreduce(["g0", "g1"], 8e6, step_overhead="1 us").scenario(topo, model)
    assert all(f.overhead == 1e-6 and f.bytes == 4e6 for f in given.flows)
    from netsim.studies import collective_sweep

    table = collective_sweep(allreduce(["g0", "g1"], 1.0), topo, [8e6, 8e3], model)
    assert table.time[0] == pytest.approx(netsim.simulate(costed).makespan, rel=1e-12)
    small = netsim.simulate(allreduce(["g0", "g1"], 8e3).scenario(topo, model)).makespan
    assert table.time[1] == pytest.approx(small, rel=1e-12)
    # an imported workload's collectives pay them too, the launch in their first flows' overhead
    program = RankProgram(["g0", "g1"], model)
    program.collective("allreduce", [0, 1], 8e6, "ar", {})
    imported = netsim.simulate(program.workload().scenario(topo)).makespan
    assert imported == pytest.approx(netsim.simulate(costed).makespan, rel=1e-12)


def test_load_a_calibrated_preset_and_its_p2p_off_twin():
    values = CALIBRATED["rtx4090-8x-epyc7542"]
    topo = load("rtx4090-8x-epyc7542")
    for link in topo.links:
        c = values["link_classes"][link_class(topo, link.id)]
        assert (link.bandwidth, link.latency) == (c["bandwidth"], c["latency"])
    assert {r.id: r.capacity for r in topo.shared} == values["shared"]
    fitted = load_costs("rtx4090-8x-epyc7542").to_values()
    for name, regime in values["regimes"].items():
        for key, x in regime.items():
            assert fitted["regimes"][name][key] == (None if x is None else pytest.approx(x, rel=1e-12))
    assert fitted["width"] == pytest.approx(values["width"], rel=1e-12)
    assert topo.device == "RTX 4090"
    off = load("rtx4090-8x-epyc7542", p2p=False)
    assert any(link_class(off, x) == "memory" for x in off.route("gpu0", "gpu1"))
    assert not any(link_class(topo, x) == "memory" for x in topo.route("gpu0", "gpu1"))
    assert [x.id for x in off.links] == [x.id for x in topo.links]
    # with P2P off only host traffic crosses the socket link: its own class and figure, no duplex budget
    assert off.shared == topo.shared[1:] and topo.shared[0].id == "socket0<->socket1"
    cross = [x for x in off.route("gpu0", "gpu7") if link_class(off, x) == "socket-host"]
    assert cross and all(
        off.link[x].bandwidth == values["link_classes"]["socket-host"]["bandwidth"] for x in cross
    )
    assert load_costs("rtx4090-8x-epyc7542") is not None
    assert load_costs("pcie-8gpu") is None and load_costs("fat-tree:4") is None  # no calibration
    assert load("titanrtx-8x-lambda").router.p2p is False  # a machine without P2P stays so
    assert load("mi300x").shared == ()  # not a PCIe server


def test_a_calibration_file_without_socket_host_keeps_the_builder_figure(tmp_path):
    """Files written before the socket-host class existed still load with P2P off."""
    values = json.loads(json.dumps(CALIBRATED["rtx4090-8x-epyc7542"]))
    del values["link_classes"]["socket-host"]
    f = tmp_path / "old.json"
    f.write_text(json.dumps(values))
    off = load(f, p2p=False)
    cross = [x for x in off.links if link_class(off, x.id) == "socket-host"]
    assert cross and all(
        x.bandwidth == preset("rtx4090-8x-epyc7542", p2p=False).link[x.id].bandwidth for x in cross
    )
    assert off.link["gpu0->rc0"].bandwidth == values["link_classes"]["pcie"]["bandwidth"]


def test_load_files_and_errors(tmp_path):
    f = tmp_path / "m01.json"
    f.write_text(json.dumps(CALIBRATED["rtx4090-8x-epyc7542"]))
    a, b = load(f), load("rtx4090-8x-epyc7542")
    assert [x.bandwidth for x in a.links] == [x.bandwidth for x in b.links]
    assert load_costs(f).to_values() == load_costs("rtx4090-8x-epyc7542").to_values()
    smi = load(trace_path("m01_8x4090_2xEPYC7542_topo.txt"))
    assert smi.gpus()[:2] == ("gpu0", "gpu1") and len(smi.shared) == 9
    assert load_costs(trace_path("m01_8x4090_2xEPYC7542_topo.txt")) is None
    values = {"topology": {"nvidia_smi_topo": trace_path("m01_8x4090_2xEPYC7542_topo.txt").read_text()}}
    (tmp_path / "no-classes.json").write_text(json.dumps(values | {"link_classes": {}}))
    with pytest.raises(ScenarioError, match="link_classes: no entry for class"):
        load(tmp_path / "no-classes.json")
    (tmp_path / "bad.json").write_text("{ not json")
    with pytest.raises(ScenarioError, match=r"bad\.json: not valid JSON"):
        load(tmp_path / "bad.json")
    (tmp_path / "notes.txt").write_text("nothing here\n")
    with pytest.raises(ScenarioError, match="neither a calibration JSON nor an `nvidia-smi topo -m` file"):
        load(tmp_path / "notes.txt")
    with pytest.raises(ScenarioError, match="'nope' is neither a preset"):
        load("nope")


def test_topology_entry_is_what_base_topology_builds_back(tmp_path):
    # a calibration file records its machine as this entry; base_topology rebuilds the same links from it
    smi = trace_path("m01_8x4090_2xEPYC7542_topo.txt")
    entry = topology_entry(smi)
    assert entry == {"nvidia_smi_topo": smi.read_text(), "name": "m01_8x4090_2xEPYC7542_topo"}
    assert [x.id for x in base_topology(entry).links] == [x.id for x in load(smi).links]
    assert topology_entry("rtx4090-8x-epyc7542") == "rtx4090-8x-epyc7542"
    f = tmp_path / "cal.json"
    f.write_text(json.dumps({"topology": "a40-8x-nvlink4"}))
    assert topology_entry(str(f)) == "a40-8x-nvlink4"
    (tmp_path / "bad.json").write_text("{ not json")
    for unknown in ("nope", "fat-tree:4", str(tmp_path / "bad.json")):  # no preset, no file, bad JSON
        assert topology_entry(unknown) is None


def test_p2p_off_transport_is_pluggable():
    @dataclasses.dataclass(frozen=True)
    class ViaHome:  # e.g. a transport that stages through the destination's memory instead
        def route(self, topo, router, src, dst):
            return topo.route(src, router.home[dst]) + topo.route(router.home[dst], dst)

    plan = server_plan(parse(trace_path("m01_8x4090_2xEPYC7542_topo.txt").read_text()), sockets=2)
    default = build_server(plan, p2p=False)
    custom = build_server(plan, p2p=False, transport=ViaHome())
    home = lambda t, g: t.router.home[g]
    assert default.route("gpu0", "gpu4") == default.route("gpu0", home(default, "gpu0")) + default.route(
        home(default, "gpu0"), "gpu4"
    )
    assert custom.route("gpu0", "gpu4") == custom.route("gpu0", home(custom, "gpu4")) + custom.route(
        home(custom, "gpu4"), "gpu4"
    )
    assert load("rtx4090-8x-epyc7542", p2p=False, transport=ViaHome()).router.transport == ViaHome()


def test_cluster_shapes_load_by_spec():
    """ "fat-tree:K" and "leaf-spine:L,S,H" give the builders' fabrics; malformed specs name the form."""
    from netsim.topology import fat_tree, leaf_spine

    ft, ls = load("fat-tree:4"), load("leaf-spine:4,2,8")
    assert [x.id for x in ft.links] == [x.id for x in fat_tree(4).links] and len(ft.gpus()) == 16
    assert [x.id for x in ls.links] == [x.id for x in leaf_spine(4, 2, 8).links] and len(ls.gpus()) == 32
    for bad in ("fat-tree:x", "fat-tree:4,2", "leaf-spine:4,2", "leaf-spine:0,2,8"):
        with pytest.raises(ScenarioError, match="expected"):
            load(bad)


def test_pcie_server_specs_load_with_shared_resources_and_p2p():
    from netsim.topology import pcie_server, pcie_spec, topology_entry

    six = load("pcie:6")
    assert six.gpus() == tuple(f"gpu{i}" for i in range(6)) and not six.nodes_of("socket")
    assert not any(link_class(six, x) == "socket" for x in six.route("gpu0", "gpu5"))
    assert {r.id for r in six.shared} == {f"gpu{i} staging" for i in range(6)}
    two = load("pcie:8,sockets=2,switches=2", p2p=False)
    want = pcie_server(8, sockets=2, gpus_per_switch=2, p2p=False)
    assert [x.id for x in two.links] == [x.id for x in want.links] and two.router.p2p is False
    assert topology_entry("pcie:6") == "pcie:6" and pcie_spec("pcie-8gpu") is None
    for bad in ("pcie:", "pcie:x", "pcie:4,sockets", "pcie:4,cores=2"):
        with pytest.raises(ScenarioError, match="pcie:N"):
            load(bad)
