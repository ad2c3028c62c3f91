"""netsim.latency: BookSim's traffic patterns and shapes by hand, the zero-load and saturation closed forms,
the shipped `booksim` preset against stored BookSim2 curves, the batch, and the CLI."""

import dataclasses
import json

import numpy as np
import pytest
from netsim.calibrate import latency as fitting
from netsim.kernels.latency import Feeds

import netsim.latency as nl
from netsim import NetsimError, cli


@pytest.mark.parametrize(
    "pattern, source, dest",
    [
        ("transpose", 1, 4),  # 16 nodes: 00|01 -> 01|00
        ("transpose", 6, 9),  # 01|10 -> 10|01
        ("bitcomp", 1, 14),
        ("bitrev", 1, 8),  # 0001 -> 1000
        ("bitrev", 6, 6),
        ("shuffle", 9, 3),  # 1001 rotated left -> 0011
        ("shuffle", 4, 8),
        ("tornado", 0, 5),  # k=4: (k+1)/2 - 1 = 1 step along each dimension
        ("neighbor", 3, 4),  # (x=3, y=0) -> (0, 1)
    ],
)
def test_permutations_by_hand(pattern, source, dest):
    t = nl.traffic_matrix(pattern, 4, 2)
    assert t[source, dest] == 1.0 and t.sum() == 16 and np.all(t.sum(axis=0) == 1)  # a permutation


def test_uniform_hotspot_and_bad_patterns():
    np.testing.assert_allclose(nl.traffic_matrix("uniform", 4, 2), 1 / 16)  # self included, as BookSim
    hot = nl.traffic_matrix("hotspot", 4, 2, hotspots=(0, 5), weights=(3, 1))
    np.testing.assert_allclose(hot[:, [0, 5]], np.tile([0.75, 0.25], (16, 1)))
    # BookSim's own spelling, read as its TrafficPattern::New reads it: one list of two lists, hot nodes
    # then weights (fewer weights repeat the last, as its resize does)
    np.testing.assert_array_equal(nl.traffic_matrix("hotspot({{0,5},{3,1}})", 4, 2), hot)
    np.testing.assert_allclose(nl.traffic_matrix("hotspot({{0, 5, 6},{2}})", 4, 2)[3, [0, 5, 6]], 1 / 3)
    # ... so "{5,10}" is node 5 with weight 10, and "{0,27},{3,1}" the first list alone: one hot node each
    # (BookSim2 runs of both saturate as one hot node does: netsim/data/booksim/*hotspot*.json)
    assert nl.parse_pattern("hotspot({5,10})") == ("hotspot", {"hotspots": (5,), "weights": (10,)})
    assert nl.parse_pattern("hotspot({0,27},{3,1})")[1]["hotspots"] == (0,)
    assert (
        nl.parse_pattern("hotspot(7)") == nl.parse_pattern("hotspot({7})") == ("hotspot", {"hotspots": (7,)})
    )
    assert nl.parse_pattern(" randperm(3) ") == ("randperm", {"seed": 3})
    np.testing.assert_array_equal(
        nl.traffic_matrix("randperm(3)", 4, 2), nl.traffic_matrix("randperm", 4, 2, seed=3)
    )
    for bad in (
        "hotspot({-1})",
        "tornado(4,2,0)",
        "hotspot({a})",
        "randperm(1,2)",
        "hotspot({{0,5}",
        "hotspot()",
    ):
        with pytest.raises(NetsimError, match=r"cannot read .*hotspot\(\{\{NODE"):
            nl.traffic_matrix(bad, 4, 2)
    with pytest.raises(NetsimError, match="unknown pattern 'nope'"):
        nl.traffic_matrix("nope", 4, 2)
    with pytest.raises(NetsimError, match="even power of two"):
        nl.traffic_matrix("transpose", 8, 3)  # 512 nodes: not a square
    with pytest.raises(NetsimError, match="unequal sides"):
        nl.parse_shape("mesh:4x8")
    with pytest.raises(
        NetsimError, match=r"got 'mi300x' \(a netsim topology .* netsim.latency.topology_load"
    ):
        nl.parse_shape("mi300x")


def test_vc_classes_of_a_torus_and_a_mesh():
    # a torus's router-to-router channels split their VCs between two dateline classes, the wrapping
    # packets one, the rest the other; ejection channels and meshes: one class over all the VCs
    torus, mesh = nl.shape_load("torus:4x4", "uniform"), nl.shape_load("mesh:4x4", "uniform")
    cube = nl.parse_shape("torus:4x4")
    used = torus.load > 0
    np.testing.assert_allclose(torus.class_share.sum(axis=0), used)
    np.testing.assert_array_equal(torus.vc_split, np.r_[np.full(cube.channels, 2.0), np.ones(cube.nodes)])
    assert np.all(torus.class_share[0, cube.channels :] == 0)
    _, _, wrapping = cube.channel_load(nl.traffic_matrix("uniform", 4, 2))
    np.testing.assert_allclose(torus.class_share[0] * torus.load, wrapping)
    np.testing.assert_array_equal(mesh.class_share, (mesh.load > 0)[None, :])
    np.testing.assert_array_equal(mesh.vc_split, 1.0)
    with pytest.raises(NetsimError, match="vcs: at most 64 virtual channels, got 65"):
        nl.booksim(vcs=65)
    # the Erlang-C recursion's static length: the VCs rounded up to a power of two (few executables)
    assert [nl.booksim(vcs=v).router().vc_bound for v in (1, 2, 3, 8, 9, 64)] == [1, 2, 4, 8, 16, 64]


@pytest.mark.parametrize("k", [4, 6, 8, 16])
def test_dor_mesh_saturation_is_one_over_the_busiest_channel(k):
    # uniform on a k x k mesh: the middle channel of a row carries (k/2)(k/2)/k = k/4 packets per unit rate
    load = nl.shape_load(f"mesh:{k}x{k}", "uniform")
    assert load.load[: -k * k].max() == pytest.approx(k / 4)
    # mean hops: E|x - y| = (k^2 - 1) / (3k) per dimension, for x, y uniform on 0..k-1
    assert load.hops == pytest.approx(2 * (k * k - 1) / (3 * k))
    ideal = nl.RouterPreset("ideal", 3, 1, 6, 0, 0, 0, 0, 8, 8, 2)
    # without the VCs' wait downstream (no feeds) the closed form; with it, the VCs feeding the busiest
    # channels fill as its queue grows, a little before it saturates
    alone = dataclasses.replace(load, feeds=Feeds(np.zeros(0, int), np.zeros(0, int), np.zeros(0)))
    closed, coupled = nl.curves([alone, load], [4.0, 4.0], [ideal.router()] * 2, np.array([0.001])).saturation
    assert float(closed) == pytest.approx(min(1 / (4 * k / 4), 1 / 4), rel=1e-12)
    assert 0.95 * float(closed) < float(coupled) < float(closed)


def test_torus_splits_ties_and_transpose_bottleneck():
    t = nl.traffic_matrix("uniform", 4, 2)
    cube = nl.Cube(4, 2, torus=True)
    load, _, wrapping = cube.channel_load(t)
    np.testing.assert_allclose(load[:32], 0.5)  # k=4 torus: every ring channel carries k/8 = 0.5, ties halved
    # BookSim's dateline classes: every packet on 3 -> 0 (the wrap-around) wraps; 1 -> 2 carries only
    # packets from 0 and 1 bound for 2 and 3, none of which wrap
    assert cube.channel_name(12) == "r3.d0+" and wrapping[12] == load[12] == 0.5
    assert cube.channel_name(4) == "r1.d0+" and wrapping[4] == 0.0
    # transpose on an 8 x 8 mesh: the (7, 0) corner column gathers 7 flows onto one channel
    assert nl.shape_load("mesh:8x8", "transpose").load.max() == 7


@pytest.fixture(scope="module")
def predicted():
    """The shipped preset on every stored BookSim2 curve at every rate BookSim ran, in one batched call."""
    stored = fitting.stored_curves()
    specs = [
        dict(
            topology=c.topology,
            traffic=c.traffic,
            packet_size=c.flits,
            vcs=c.num_vcs,
            buffer=c.vc_buf_size,
            rates=c.offered,
        )
        for c in stored
    ]
    return {c.name: (c, got) for c, got in zip(stored, nl.latency_curves(specs), strict=True)}


def test_zero_load_by_hand_and_against_booksim(predicted):
    # mesh 8x8, 4-flit packets: base + hops x (3-cycle pipeline + 1-cycle link) + 3 flits behind the head
    curve = nl.latency_curve("mesh:8x8", "uniform", packet_size=4, rates=[1e-6])
    base = nl.booksim().base
    assert curve.zero_load == pytest.approx(base + 5.25 * 4 + 3)
    for c, got in predicted.values():  # BookSim's lowest-rate point is near zero load
        np.testing.assert_array_equal(got.rates, c.offered)
        assert got.latency[0] == pytest.approx(c.latency[0], rel=0.06), c.name


KNOWN_MISSES = {  # curve -> why the shipped preset misses the targets there (docs/latency.md)
    "mesh4_bitcomp_ps16_vc_buf_size4": "saturates 13 % early (0.0247 against 0.0293; latency inf at 0.0256, where "
    "BookSim is at 120 cycles, and 73 % high at 0.0237), recorded after the credit stalls were chosen on it: 16-flit packets over 4-flit buffers",
    "mesh4_transpose_ps8": "latency 18 % low on average, 43 % at 0.0387 (38 cycles against BookSim's 67), "
    "recorded blind with the default router: an 8-flit permutation near saturation, where BookSim queues inside "
    "the network under backpressure, as on the 8x8 mesh transpose with 8-flit packets; saturation within 4 %",
    "mesh8_transpose_ps8_vc_buf_size4": "latency inf at 0.0171 (BookSim 89 cycles), the model saturating at 0.0165 "
    "(its most accepted within 0.2 %), recorded after the credit stalls were chosen on it: the 8-flit transpose's corner channels, as with 8-flit buffers",
    "torus4_uniform_ps8_vc_buf_size2": "saturates 19 % late (0.0385 against 0.0323), recorded after the credit stalls were chosen on it: 8-flit packets over "
    "2-flit buffers on the torus's 2-cycle channels; the model's injection channel takes 26 cycles a packet",
    "mesh8_bitrev_ps8_vc_buf_size2": "latency inf at 0.0167 (BookSim 94 cycles), the model saturating at 0.0161 "
    "(most accepted -4.4 %), recorded blind (credit stalls in): the 8-flit bitrev's corner channels, as with 8-flit buffers",
    "mesh8_shuffle_ps6_vc_buf_size3": "latency inf at 0.0345 (BookSim 45 cycles): the model saturates at 0.0333 "
    "(most accepted -4.3 %), recorded blind (credit stalls in): 6-flit packets over 3-flit buffers",
    "torus4_bitcomp_ps4_vc_buf_size3": "saturates 14 % early (0.1429 against 0.1654), recorded blind (credit stalls in): the model's injection "
    "channel takes 4 + (6 - 3) = 7 cycles a packet; BookSim's sources take about 6 with 3-flit buffers (0.161 on "
    "one-hop neighbor traffic), about 8.5 with 2 (0.114-0.118): its first refill waits less than the model's",
    "torus4_shuffle_ps8": "latency inf at 0.0764 (BookSim 47 cycles), the model saturating at 0.0738 (most "
    "accepted -1.3 %), recorded blind with the default router: the tori's permutations, as with 4-flit packets",
    "torus8_tornado_ps4_vc_buf_size2": "saturates 18 % late (0.0497 against 0.0420; latency within 10 % below), "
    "recorded blind: 4-flit packets over 2-flit buffers. A VC held through its packet's credit stalls (2 flits "
    "per 9-cycle body loop) gives 0.0417, but sends the same round's 8x8 torus bitcomp (8-flit packets, 3-flit "
    "buffers) and shuffle (8 over 2) early (-11.4 %; latency inf), so it is not in the model",
    "torus8_uniform_ps20": "latency 28 % high on average, 64 % at 0.0244 (213 cycles against BookSim's 130), "
    "saturating 9.4 % early (0.0254 against 0.0281), recorded blind with the default router: 20-flit packets on "
    "the 8x8 torus (on the 4x4 torus they pass: 3.4 / 6.8 / +4.4 %)",
    "torus8_uniform_ps4_vc_buf_size2": "saturates 17 % late (0.1250 against 0.1073; latency within 9 % below), "
    "recorded blind (credit stalls in): 4-flit packets over 2-flit buffers; the model's injection channel (8 cycles a packet) sets 0.125",
    "torus4_bitrev_ps4": "saturates 17 % early (0.1015; BookSim at 28 and 33 cycles at 0.105 and 0.113, its most "
    "accepted 0.1289, the model's 0.1136), recorded blind: as on the 8x8 torus, the packets bound for the busiest "
    "channels wait in one dateline class's VCs at their inputs (divergence 0.89), head-of-line blocking leaves 0.1114 of the channel limit "
    "0.1657 and the VC pools fill at 0.1015",
    "mesh8_transpose_ps8": "latency 14 % low on average, 42 % at 0.0167 (44 cycles against 76), recorded blind: "
    "BookSim's latency turns up from 0.014 on, where the corner channels, fed by one port, queue more than the "
    "model has them (as mesh8_bitrev_ps8); the most accepted is within 4.1 %",
    "torus4_shuffle_ps4": "latency inf at 0.148 and 0.153 (BookSim 33 and 49 cycles): the model saturates at "
    "0.1434, where the busiest channels' limit is 0.1655, head-of-line blocking leaves 0.1561 and the VCs feeding "
    "them fill; its most accepted over BookSim's rates is within 3.4 % (flows off those channels still grow)",
    "torus4_transpose_ps4": "latency inf at 0.12 (BookSim 34 cycles): the model saturates at 0.1168; at the "
    "busiest channels the ports' other outputs are as busy (divergence 0.56), so head-of-line blocking leaves 0.1273, "
    "and the VCs feeding them fill below that (most accepted over BookSim's rates -3.8 %)",
    "torus4x4x4_shuffle_ps4": "latency inf at 0.1229 (BookSim 34 cycles, 63 at 0.1321): the model saturates at 0.1186, "
    "12 % below BookSim's last point under 40 cycles, recorded blind: as on the 2-D tori under permutations, the busiest "
    "channels' packets wait in one dateline class's VCs (divergence 0.41), head-of-line blocking leaves 0.1354 of the "
    "channel limit 0.1651 and the VC pools fill at 0.1186 (most accepted over BookSim's rates -4.5 %)",
    "mesh4_hotspot5_10_ps8": "latency 14 % low on average, 20 % at 0.8-0.95 of saturation (saturation -3.4 %), "
    "recorded blind: the hot ejection channels are fed by every port, and packets behind one from their own port "
    "are taken to be spaced by the channel before, which the streams merged upstream are not",
    "torus8_hotspot9_54_ps2": "saturation 11 % low (0.0104 against 0.0117, 99.9 % of the hot ejection channel's "
    "limit), recorded blind: the channels into node 54 have 4 VCs per dateline class, held while their packets "
    "queue at its ejection channel, and in the model that pool fills at 0.0104",
    "torus4x4x4_uniform_ps4_num_vcs4": "saturates 14 % late (0.1722 against 0.1510), recorded blind: every "
    "channel carries 1 packet per unit rate with the port mix of the 4x4 torus, so the per-channel model gives "
    "both shapes nearly the same figure (0.1722 and 0.1735); BookSim saturates lower in three "
    "dimensions than in two (0.151 against 0.162 with 4 VCs, 0.2135 against 0.2205 with 8), where routers "
    "have 7 ports instead of 5 and packets cross 3 of them instead of 2, which no per-channel term sees",
    "mesh4_bitcomp_ps8": "latency 13 % low on average, 29 % at 0.0536 (67 cycles against BookSim's 94): "
    "recorded blind (the model fixed before BookSim ran); the saturation is within 6 %, the queueing of "
    "8-flit packets on the 4x4 mesh's bitcomp channels before it too small",
    "mesh4_bitrev_ps4": "latency inf at 0.0812, where BookSim is at 68 cycles, past its own knee (28 at 0.078) "
    "but under 0.9 x its most accepted, 0.0910, which the model's most accepted is within 3.3 % of; the model "
    "saturates at 0.0804 (the busiest channels' limit 0.0828 less their VC pools); recorded blind",
    "torus8_bitrev_ps4": "saturates 20 % early (0.0417; BookSim at 36-41 cycles up to 0.0454, its most accepted "
    "0.052, the model's 0.0456), recorded blind: the packets bound for the busiest channels wait in one dateline "
    "class's VCs at their inputs, so head-of-line blocking is charged for half the VCs (divergence 0.98) and leaves 0.0462 of the channel limit 0.0710, "
    "and their VC pools fill at 0.0417",
    "mesh4_transpose_ps2": "latency inf at 0.159 (BookSim 21 cycles; 23 in a run 10x as long, 52 at 0.165): the "
    "model saturates at 0.1586, 4.9 % under the busiest channels' limit 1 / (3 flows x 2 flits) that BookSim nearly "
    "reaches (its stored saturation, 0.185, averages in the nodes off those channels), recorded blind: the "
    "allocation overhead and the VC pools where three 2-flit flows merge",
    "mesh4_tornado_ps4_num_vcs2": "latency 19 % high on average, 52 % at 0.133 (47 cycles against 31), recorded blind "
    "before the own-port wait (the shipped model then saturated at 0.083, half BookSim's 0.163): the saturation is now "
    "the VCs' idle limit 2 / 12 (+2.5 %), but on this chain of channels fed one by one each channel still charges the "
    "whole Erlang-C VC wait, where BookSim's packets wait about once (the 4x4 mesh's neighbor traffic is the same pattern)",
    "mesh4_bitcomp_ps2_num_vcs2": "saturates 19 % early (0.0790 against 0.0969; latency inf at 0.0827, where BookSim is at "
    "47 cycles), recorded blind before the own-port wait (then 0.0720, -26 %): 2-flit packets and 2 VCs, whose "
    "10-cycle idle occupancy is five times a packet's flits",
    "mesh8_bitrev_ps2_num_vcs2": "saturates 22 % early (0.0239 against 0.0308; latency inf at 0.0252, BookSim 40 cycles), "
    "recorded blind with the own-port wait not yet chosen (the model then 0.0158, -49 %): 2-flit packets over 2 VCs",
    "torus4_bitrev_ps4_num_vcs6": "saturates 18 % early (0.0881 against 0.1077; latency inf at 0.0932, BookSim 34 cycles), "
    "recorded blind with the own-port wait not yet chosen (then 0.0871): 3 VCs per dateline class, as the tori's "
    "permutations with 8 VCs",
    "mesh6_tornado_ps4_num_vcs2": "the most accepted over BookSim's rates 10.3 % above BookSim's 0.0540: the model "
    "saturates at 0.0522 (-3.3 %), and past it the flows off its busiest channels grow more than BookSim's; recorded "
    "blind with the own-port wait not yet chosen (then 0.0442, latency inf at scored points); latency within 3 % on "
    "average",
    "torus4_tornado_ps4_num_vcs4": "latency 17 % high on average, 32 % at 0.116 (41 cycles against 31), saturation within "
    "3 %, recorded blind with the own-port wait not yet chosen (then saturating 28 % early): 2 VCs per dateline class "
    "on a chain fed one by one, as the 4x4 mesh tornado with 2 VCs",
    "torus4_uniform_ps4_num_vcs2": "saturates 22 % late (0.0933 against 0.0768) with latency 17 % low on average (27 "
    "cycles against 48 at 0.0672), recorded blind (the shipped model then +9.5 % and 17 % low): one VC per dateline "
    "class, whose pools BookSim fills sooner than the model's channels",
    "torus8_uniform_ps4_num_vcs2": "saturates 22 % late (0.0412 against 0.0336; latency 8 % low on average), recorded "
    "blind with the own-port wait not yet chosen (then +8.7 %, passing): one VC per dateline class, as on the 4x4 torus",
    "mesh4_uniform_ps4_num_vcs1": "latency 18 % low on average, 41 % at 0.0398 (31 cycles against 53), saturation 12.7 % "
    "late, recorded blind before the own-port wait (then within 0.4 %, latency as low): one VC, where BookSim's latency "
    "turns up from a third of saturation on",
    "mesh8_bitcomp_ps4_num_vcs1": "latency 21 % high on average, 78 % at 0.0134 (127 cycles against 71), just under the "
    "model's saturation (0.0134, 12.4 % below BookSim's 0.0153), recorded blind before the own-port wait (then 24 % "
    "early): one VC",
    "mesh8_neighbor_ps4_num_vcs1": "saturates 73 % late (0.0833, the VCs' idle limit 1 / 12, against 0.0482) with latency "
    "27 % high, recorded blind before the own-port wait (then 49 % early, 0.0244): with one VC BookSim's chain of "
    "channels fed one by one holds each VC about 21 cycles a packet, neither its idle 12 nor the compounded 41",
    "torus8_transpose_ps4": "latency 25.2 % low at 0.0557 (39 cycles against 52, mean 5.9 %; saturation -2.2 %), since "
    "the own-port wait: the 8x8 torus transpose's pools fill later, and BookSim's knee at 0.052-0.056 comes before "
    "the model's (before the term: max 23.1 %, passing)",
    "torus8_uniform_ps1": "saturates 12.5 % late (0.2938 against 0.2612), since the own-port wait (before: +6.6 %): "
    "1-flit packets hold a VC for 11 cycles and a channel for 1, so the VC pools decide; BookSim's latency turns up "
    "at 0.22-0.25 where the model's stays near 28 cycles",
    "mesh4_shuffle_ps6_vc_buf_size2": "latency 12 % low on average (60 cycles against 74 at 0.0533), saturating 9.4 % "
    "late by its rate (0.0667, the injection channel's 6 flits and 9 stall cycles, against 0.0609), recorded blind "
    "(fourteenth round): a source whose packet is longer than a buffer waits on the first router as well",
    "mesh4_tornado_ps8_vc_buf_size4": "saturates 11 % late (0.1000, the injection channel's 8 flits and 2 stall "
    "cycles, against 0.0900) with latency 15 % low (46 cycles against 68 at 0.08), recorded blind (fourteenth round): "
    "a source's packet longer than a buffer waits on the first router as well",
    "torus4_bitcomp_ps8_vc_buf_size4": "saturates 21 % late (0.1000 against 0.0828; latency 18 % low, 39 cycles "
    "against 57 at 0.07), recorded blind (fourteenth round): the injection channel, as on the 4x4 mesh tornado",
    "torus8_bitcomp_ps4_vc_buf_size2": "saturates 19 % late (0.0893 against 0.0750), recorded blind (fourteenth round): "
    "4-flit packets over 2-flit buffers on the torus, as the 8x8 torus uniform and tornado",
    "mesh4_uniform_ps2_vc_buf_size1": "saturates 11 % early (0.1429, the injection channel's 2 flits and 5 stall "
    "cycles, against 0.1608; latency inf at 0.143, BookSim 37 cycles), recorded blind (fourteenth round): BookSim's "
    "sources take about 6.2 cycles a packet with 1-flit buffers here",
    "torus4_uniform_ps4_vc_buf_size2": "latency 20 % high on average, 62 % at 0.116 (76 cycles against 47), saturating "
    "6.6 % early (0.125 against 0.1339), recorded blind (fourteenth round): BookSim's sources take about 7.5 cycles a "
    "4-flit packet over 2-flit buffers here, 8.5 on the 8x8 torus and mesh neighbor traffic, the model 8",
    "mesh8_bitrev_ps4_vc_buf_size3": "saturates 16 % early (0.0338 against 0.0405; latency inf at 0.0361, "
    "BookSim 77 cycles), recorded blind (fourteenth round): the corner channels of the 8x8 mesh's permutations "
    "with packets longer than their buffers, as with 8-flit packets",
    "mesh8_transpose_ps4_vc_buf_size2": "saturates 19 % early (0.0329 against 0.0405; latency inf at 0.0352, "
    "BookSim 69 cycles), recorded blind (fourteenth round): as the 8x8 mesh bitrev over 3-flit buffers",
    "mesh4_bitrev_ps8_vc_buf_size16": "latency 14 % low on average, 34 % at 0.0375 (35 cycles against 53), saturation "
    "within 5 %, recorded blind (fifteenth round): an 8-flit permutation on the 4x4 mesh near saturation, as with "
    "8-flit buffers (mesh4_transpose_ps8)",
    "mesh8_neighbor_ps2_num_vcs2": "latency 48 % high on average, 118 % at 0.174 (71 cycles against 32), the saturation "
    "BookSim's (0.2), recorded blind (fifteenth round): channels fed one by one, each charging the whole VC wait, "
    "as on the 4x4 mesh tornado with 2 VCs",
    "torus4_neighbor_ps2": "latency 11 % high on average, 28 % at 0.29 (29 cycles against 22), the saturation BookSim's "
    "(0.3333), recorded blind (fifteenth round): channels fed one by one, as on the 8x8 mesh",
    "mesh8_bitrev_ps8": "latency 12 % low on average, 33 % at 0.01655: BookSim's latency turns up from 0.0116 on "
    "(the 7-flow corner channels, fed by one port), and its recorded saturation (0.0191, accepted past a "
    "latency of 250 cycles) puts 0.01655, where it has reached 69 cycles, among the scored points",
}


@pytest.mark.parametrize(
    "curve",
    [
        pytest.param(c.name, marks=pytest.mark.xfail(reason=KNOWN_MISSES[c.name], strict=True))
        if c.name in KNOWN_MISSES
        else c.name
        for c in fitting.stored_curves()
    ],
)
def test_booksim_preset_against_stored_booksim(curve, predicted):
    c, got = predicted[curve]
    latency = got.latency[np.isin(c.offered, c.rates)]  # BookSim's stable points
    err = 100 * np.abs(latency[c.scored] / c.latency[c.scored] - 1)
    assert err.mean() <= fitting.TARGETS["mean"] and err.max() <= fitting.TARGETS["max"], (
        err.mean(),
        err.max(),
    )
    saturation = 100 * fitting.saturation_error(got.saturation, got.accepted, c.saturation)
    assert abs(saturation) <= fitting.TARGETS["saturation"], saturation


def test_saturation_error_reads_a_late_saturation_from_the_rate():
    # early: the most accepted over BookSim's rates; late: the saturation rate, which the most accepted,
    # capped by the rates BookSim ran, would hide
    assert fitting.saturation_error(0.08, np.array([0.05, 0.08, 0.095]), 0.1) == pytest.approx(-0.05)
    assert fitting.saturation_error(0.15, np.array([0.05, 0.11]), 0.1) == pytest.approx(0.5)


def test_the_fits_draw_is_seeded_and_keeps_to_small_2d_shapes():
    curves = fitting.stored_curves()
    first = fitting.drawn(curves, 30, seed=0)
    assert first == fitting.drawn(curves, 30, seed=0) != fitting.drawn(curves, 30, seed=1)
    assert len(set(first)) == 30 and list(first) == sorted(first) and not set(first) & set(fitting.TRAIN)
    topology = {c.name: c.topology for c in curves}
    sides = [topology[n].split(":")[1].split("x") for n in first]
    assert all(len(s) == 2 and int(s[0]) <= fitting.DRAW_SIDE for s in sides)
    with pytest.raises(ValueError, match=r"--draw: between 0 and \d+ curves"):
        fitting.drawn(curves, len(curves), seed=0)
    with pytest.raises(SystemExit) as stop:  # argparse's error
        fitting.main(["--draw", "-1"])
    assert stop.value.code == 2


def test_a_fit_of_no_steps_returns_where_it_started():
    shipped = nl.router_preset("booksim").router()
    got = fitting.fit(fitting.stored_curves()[:1], steps=0, start=shipped, progress=None)
    for field in ("base", "blocking", "overhead", "wormhole", "variability"):
        assert float(getattr(got, field)) == pytest.approx(float(getattr(shipped, field)), rel=1e-12)


def test_accepted_past_saturation():
    # uniform traffic: every source sends across the busiest channels, so past saturation the network
    # accepts the saturation rate; transpose: only the sources crossing the corner channels are held
    # there, the rest keep growing with what they offer
    uniform = nl.latency_curve("mesh:8x8", "uniform", packet_size=4, rates=[0.01])
    s = uniform.saturation
    past = nl.latency_curve("mesh:8x8", "uniform", packet_size=4, rates=[0.5 * s, 1.2 * s, 3 * s]).accepted
    np.testing.assert_allclose(past, [0.5 * s, s, s], rtol=1e-9)
    transpose = nl.latency_curve("mesh:8x8", "transpose", packet_size=4, rates=[0.01])
    s = transpose.saturation
    rates = np.array([0.5, 1.0, 1.1, 1.3, 2.0]) * s
    got = nl.latency_curve("mesh:8x8", "transpose", packet_size=4, rates=rates).accepted
    assert got[0] == pytest.approx(0.5 * s, rel=1e-12) and np.all(np.diff(got) > 0) and np.all(got <= rates)
    assert got[-1] > 1.1 * s


def test_many_curves_in_one_call_equal_one_at_a_time():
    specs = [
        dict(topology="mesh:4x4", traffic="uniform", packet_size=1),
        dict(topology="torus:4x4", traffic="transpose", packet_size=8, vcs=4),
    ]
    rates = [0.01, 0.03]
    both = nl.latency_curves(specs, rates)
    for spec, got in zip(specs, both, strict=True):
        one = nl.latency_curve(**spec, rates=rates)
        np.testing.assert_allclose(got.latency, one.latency, rtol=1e-12)
        assert got.saturation == one.saturation
    # curves with rates of their own: each padded to the longest in the call, the padding dropped
    own = nl.latency_curves([dict(specs[0], rates=[0.01, 0.02, 0.03]), dict(specs[1], rates=[0.03])])
    np.testing.assert_array_equal(own[1].rates, [0.03])
    assert own[0].latency.shape == (3,) and own[1].wait.shape == (1, both[1].wait.shape[1])
    np.testing.assert_allclose(own[0].latency[[0, 2]], both[0].latency, rtol=1e-12)
    np.testing.assert_allclose(own[1].latency, both[1].latency[1:], rtol=1e-12)
    with pytest.raises(NetsimError, match=r"specs\[1\]: no rates"):
        nl.latency_curves([dict(specs[0], rates=[0.01]), specs[1]])
    with pytest.raises(NetsimError, match=r"specs\[0\].rates: must be finite numbers > 0"):
        nl.latency_curves([dict(specs[0], rates=[0.01, -1])])


def test_vmap_latency_shares_what_has_no_batch_axis():
    """netsim.vmap_latency against the kernel called once per curve: a shared router and rates, batched
    loads; a leaf of neither rank is named before tracing."""
    import equinox as eqx
    import jax
    from netsim.kernels.latency import load_latency

    from netsim import ScenarioError, vmap_latency

    loads = [nl.shape_load("mesh:4x4", "uniform"), nl.shape_load("mesh:4x4", "transpose")]
    router, rates = nl.router_preset("booksim").router(), np.array([0.02, 0.1])
    stack = lambda f: np.stack([getattr(x, f) for x in loads])
    args = (
        stack("load"),
        stack("load") * 0 + 2.0,
        stack("contention"),
        stack("divergence"),
        stack("exits"),
        stack("class_share"),
        stack("vc_split"),
    )
    shared = (np.float64(16), np.array([x.hops for x in loads]), np.float64(2))
    with jax.enable_x64(True):
        both = jax.jit(vmap_latency)(rates, *args, *shared, router)
        for i in range(2):
            one = jax.jit(load_latency)(
                rates, *(a[i] for a in args), shared[0], shared[1][i], shared[2], router
            )
            np.testing.assert_array_equal(both.latency[i], one.latency)
            assert both.saturation[i] == one.saturation
    with pytest.raises(ScenarioError, match=r"router\.link: expected 0 dimensions \(shared\) or 1"):
        vmap_latency(rates, *args, *shared, eqx.tree_at(lambda r: r.link, router, np.ones((2, 2))))


def test_cli_table_and_json(tmp_path, capsys):
    out = tmp_path / "curve.json"
    args = [
        "latency",
        "--topology",
        "mesh:4x4",
        "--packet-size",
        "4",
        "--rates",
        "0.01,0.1,0.3",
        "--json",
        str(out),
    ]
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    assert "packet latency" in text and "saturated" in text
    doc = json.loads(out.read_text())
    assert [p["rate"] for p in doc["points"]] == [0.01, 0.1, 0.3]
    assert doc["points"][2]["latency"] is None and 0 < doc["saturation"] < 0.3
    assert doc["points"][0]["latency"] > 0 and doc["points"][0]["accepted"] == 0.01
    assert cli.main(["latency", "--traffic", "transpose", "--topology", "mesh:2x2x2", "--rates", "0.1"]) == 2
    assert "even power of two" in capsys.readouterr().err


def test_clock_turns_cycles_into_seconds(tmp_path, capsys):
    out = tmp_path / "curve.json"
    args = ["latency", "--topology", "mesh:4x4", "--rates", "0.01,0.9", "--clock", "2", "--json", str(out)]
    assert cli.main(args) == 0
    assert "latency (ns)" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["clock_hz"] == 2e9
    first, last = doc["points"]
    assert first["latency_s"] == pytest.approx(first["latency"] / 2e9, rel=1e-12)
    assert last["latency"] is None and last["latency_s"] is None
    with pytest.raises(NetsimError, match="clock: must be a finite frequency > 0 Hz, got -1"):
        nl.booksim(clock_hz=-1.0)
    with pytest.raises(NetsimError, match="has no clock"):
        nl.latency_curve("mesh:4x4", rates=[0.01]).seconds(1.0)
    with pytest.raises(SystemExit):  # argparse refuses it
        cli.main(["latency", "--rates", "0.01", "--clock", "0"])
    assert "must be a clock in GHz > 0, got '0'" in capsys.readouterr().err


def test_head_of_line_exposure_by_hand():
    # one router, two outputs: a carries 2 packets per unit rate, all from port 0; b carries 1, half from
    # port 0 and half from port 1. Port 0 sends 2.5 in all, 0.5 of it to b, which is half as busy as a
    from netsim.latency._model import port_mix

    load, inputs, router = np.array([2.0, 1.0]), np.array([[2.0, 0.0], [0.5, 0.5]]), np.array([0, 0])
    contention, divergence = port_mix(load, inputs, router)
    np.testing.assert_allclose(contention, [0.0, 0.5])
    # a: its port's other packets (0.5 / 2.5 of them) wait for b, busy 1/2; b: half its packets share port
    # 0 with those bound for a (2 / 2.5), as busy as the busiest; port 1 sends nothing elsewhere
    np.testing.assert_allclose(divergence, [0.2 * 0.5, 0.5 * 0.8 * 1.0], rtol=1e-12)


def test_head_of_line_exposure_counts_only_packets_that_share_a_vc_class():
    # one input port, two equally busy outputs, 1 packet per unit rate to each. Classes (ARRIVED): any VC,
    # then a torus's two dateline classes, each on half the VCs (crowding 2)
    from netsim.latency._model import port_mix

    load, router, crowding = np.array([1.0, 1.0]), np.array([0, 0]), [1, 2, 2]
    apart = np.zeros((2, 1, 3))
    apart[0, 0, 1] = apart[1, 0, 2] = 1.0  # a's packets came in one class, b's in the other
    together = np.zeros((2, 1, 3))
    together[:, 0, 1] = 1.0  # both in one class, on half the VCs
    injected = np.zeros((2, 1, 3))
    injected[:, 0, 0] = 1.0  # from the injection port: any VC
    # half of the port's packets go elsewhere, to an output as busy as the busiest
    assert port_mix(load, apart, router, crowding=crowding)[1] == pytest.approx([0.0, 0.0])
    assert port_mix(load, together, router, crowding=crowding)[1] == pytest.approx([1.0, 1.0])
    assert port_mix(load, injected, router, crowding=crowding)[1] == pytest.approx([0.5, 0.5])
    # one class without the class axis: as from the injection port
    assert port_mix(load, injected.sum(axis=2), router)[1] == pytest.approx([0.5, 0.5])


def test_topology_load_on_a_netsim_topology():
    from netsim.topology import mi300x

    topo = mi300x()
    path = topo.route("xcd0", "hbm7")  # xcd0 -> iod0 -> iod1 -> iod3 -> hbm7
    one = nl.topology_load(topo, {("xcd0", "hbm7"): 1.0})
    by_link = dict(zip(one.channel_names, one.load, strict=True))
    assert [by_link[lid] for lid in path] == [1.0] * 4 and one.load.sum() == 4 and one.hops == 4
    # xcd0's injected packets arrive at random (contention 1); further on they follow one port (0)
    contend = dict(zip(one.channel_names, one.contention, strict=True))
    assert contend[path[0]] == 1.0 and contend[path[1]] == 0.0
    assert not one.class_share.any()  # no VC classes: BookSim's VC turnaround has no meaning on these links
    # at iod1 -> iod3 packets from xcd0 (port iod0->iod1) and xcd2 (port xcd2->iod1) meet, half each
    two = nl.topology_load(topo, {("xcd0", "hbm7"): 1.0, ("xcd2", "hbm7"): 1.0})
    contend = dict(zip(two.channel_names, two.contention, strict=True))
    assert contend["iod1->iod3"] == pytest.approx(1 - 2 * 0.5**2)
