"""Imported workloads: SimAI text files and Chakra execution traces, against closed forms and causality."""

from __future__ import annotations

import json
import os

import chakra_writer as cw
import pytest

from netsim import Link, ScenarioError, topology, workloads
from netsim.cli import main

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "simai")
CUSTOM_RING = os.path.join(os.path.dirname(__file__), "..", "data", "chakra_custom_ring")
HEADER = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: {tp} ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: {n} checkpoints: 0 checkpoint_initiates: 0"
B, L = 10e9, 1e-6  # ring link bandwidth (bytes/s) and latency (s)


def ring(n: int) -> tuple[workloads.LinkFabric, list[str]]:
    """Directed ring g0 -> g1 -> ... -> g0: the ring collectives' every step is one hop."""
    nodes = [f"g{i}" for i in range(n)]
    links = [Link(f"l{i}", nodes[i], nodes[(i + 1) % n], B, L) for i in range(n)]
    return workloads.LinkFabric(links), nodes


def ring_allreduce(n: int, size: float) -> float:
    """2(n - 1) steps, each moving S/n bytes over one link: the textbook ring time."""
    return 2 * (n - 1) * (L + size / n / B)


def write_simai(tmp_path, tp: int, n: int, rows: list[str], name: str = "w.txt") -> str:
    path = tmp_path / name
    path.write_text("\n".join([HEADER.format(tp=tp, n=n), str(len(rows)), *rows]) + "\n")
    return str(path)


def check_causality(run) -> None:
    """Every flow and task starts no earlier than each item it waits on finishes."""
    r = run.result
    finish = dict(zip(r.flow_ids, r.flow_finish, strict=True)) | dict(
        zip(r.task_ids, r.task_finish, strict=True)
    )
    scenario = r.compiled.scenario
    for item in (*scenario.flows, *scenario.tasks):
        start = r.timing(item.id).start
        for a in item.after:
            assert start >= finish[a] - 1e-15, (item.id, a)


# --- SimAI ---------------------------------------------------------------------------------------------


def test_simai_one_allreduce_is_compute_plus_ring(tmp_path):
    # forward compute C, then a blocking ALLREDUCE of S bytes in the TP group (all 4 ranks), then the
    # update time U: C + 2(n-1)(L + S/(nB)) + U; the gradient phases have no compute and no collective.
    n, size, c_ns, u_ns = 4, 8e6, 5000, 100
    path = write_simai(tmp_path, n, n, [f"layer -1 {c_ns} ALLREDUCE {int(size)} 0 NONE 0 0 NONE 0 {u_ns}"])
    fabric, nodes = ring(n)
    run = workloads.simulate_workload(path, fabric, ranks=nodes)
    expected = c_ns * 1e-9 + ring_allreduce(n, size) + u_ns * 1e-9
    assert run.iteration_time == pytest.approx(expected, rel=1e-9)
    assert run.compute == pytest.approx([c_ns * 1e-9] * n)
    assert run.exposed == pytest.approx([expected - c_ns * 1e-9] * n)
    path_ids = [s.id for s in run.critical_path]
    assert path_ids[0].startswith("0:layer/fwd@")  # the compute, then the collective's flows
    assert run.critical_path[0].start == 0.0
    total = run.critical_path[0].start + sum(s.duration for s in run.critical_path)
    assert total == pytest.approx(run.iteration_time, rel=1e-12)


def test_simai_weight_gradient_collectives_overlap_compute_in_fifo_order(tmp_path):
    # TP 1, DP 4. Forward F per layer; backward: layer 1's weight-gradient compute W, then its ALLREDUCE
    # (R + U) runs while layer 0 computes W; layer 0's ALLREDUCE waits for layer 1's (one stream, FIFO).
    # R > W, so the iteration is 2F + W + 2(R + U) and each rank is exposed for it less 2F + 2W.
    n, size, f_ns, w_ns, u_ns = 4, 4e6, 2000, 3000, 100
    rows = [f"l{i} -1 {f_ns} NONE 0 0 NONE 0 {w_ns} ALLREDUCE {int(size)} {u_ns}" for i in range(2)]
    fabric, nodes = ring(n)
    run = workloads.simulate_workload(write_simai(tmp_path, 1, n, rows), fabric, ranks=nodes)
    r, f, w, u = ring_allreduce(n, size), f_ns * 1e-9, w_ns * 1e-9, u_ns * 1e-9
    assert r > w
    assert run.iteration_time == pytest.approx(2 * f + w + 2 * (r + u), rel=1e-9)
    assert run.exposed == pytest.approx([2 * f + w + 2 * (r + u) - 2 * f - 2 * w] * n, rel=1e-9)
    check_causality(run)


def test_simai_groups_follow_mocknccl():
    w = workloads.read_simai(os.path.join(DATA, "workload_ep_test.txt"))
    assert (w.n_ranks, w.tp, w.ep, w.dp, len(w.layers)) == (32, 4, 4, 8, 43)
    # MockNcclGroup.cc: TP blocks of 4; DP stride 4; EP: rank k of 4 consecutive TP groups; DP_EP: rank k
    # of TP groups i, i + 4
    assert w.groups("TP")[1] == [4, 5, 6, 7]
    assert w.groups("DP")[1] == [1, 5, 9, 13, 17, 21, 25, 29]
    assert w.groups("EP")[0] == [0, 4, 8, 12] and w.groups("EP")[5] == [17, 21, 25, 29]
    assert w.groups("DP_EP")[0] == [0, 16] and w.groups("DP_EP")[5] == [5, 21]
    for kind in ("TP", "DP", "EP", "DP_EP"):  # each kind partitions the ranks
        assert sorted(r for g in w.groups(kind) for r in g) == list(range(32))
    layer = w.layers[11]  # mlp_moelayer ALLTOALL_EP 25165824 in forward and input gradient
    assert (layer.name, layer.fwd.kind, layer.fwd.group, layer.fwd.size) == (
        "mlp_moelayer",
        "alltoall",
        "EP",
        25165824,
    )
    assert layer.update == pytest.approx(100e-9) and layer.line == 14


def test_simai_example_with_data_parallel_groups_is_causal():
    run = workloads.simulate_workload(os.path.join(DATA, "microAllReduce_dp.txt"), topology.fat_tree(4))
    assert run.ranks == tuple(f"h{i}" for i in range(16))
    check_causality(run)
    # the iteration ends with the last weight-gradient ALLREDUCE (layer 0's, over DP groups of 2)
    assert run.critical_path[-1].id.startswith("0:embedding_layer/wg.update@")
    assert run.exposed_max == pytest.approx(run.iteration_time - 2 * 556e-6 - 4e-9, rel=1e-6)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("DATA model_parallel_NPU_group: 1 all_gpus: 2\n0\n", r"w\.txt:1: parallelism policy 'DATA'"),
        (HEADER.format(tp=2, n=4).replace("pp: 1", "pp: 2") + "\n0\n", r"w\.txt:1: pp: pipeline parallelism"),
        (HEADER.format(tp=3, n=4) + "\n0\n", r"w\.txt:1: model_parallel_NPU_group: 3 does not divide"),
        (
            HEADER.format(tp=2, n=4) + "\n2\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n",
            r"w\.txt:2: announces 2 layer",
        ),
        (
            HEADER.format(tp=2, n=4) + "\n1\nl -1 1 NONE 0 1 NONE 0 1 NONE 0\n",
            r"w\.txt:3: expected 12 columns",
        ),
        (
            HEADER.format(tp=2, n=4) + "\n1\nl -1 1 BCAST 8 1 NONE 0 1 NONE 0 1\n",
            r"w\.txt:3: forward collective \(column 4\): unknown 'BCAST'",
        ),
        (
            HEADER.format(tp=2, n=4) + "\n1\nl -1 1.5 NONE 0 1 NONE 0 1 NONE 0 1\n",
            r"w\.txt:3: forward compute time \(column 3\)",
        ),
        (HEADER.format(tp=2, n=4) + "\nmany\n", r"w\.txt:2: expected the number of layer lines"),
    ],
)
def test_simai_malformed_files_name_file_line_and_field(tmp_path, text, message):
    path = tmp_path / "w.txt"
    path.write_text(text)
    with pytest.raises(ScenarioError, match=message):
        workloads.read_simai(path)


def test_simai_too_few_gpus_is_an_error():
    with pytest.raises(ScenarioError, match="has 16 ranks but 'pcie-8gpu' has only 8 GPUs"):
        workloads.simulate_workload(os.path.join(DATA, "microAllReduce_dp.txt"), topology.load("pcie-8gpu"))


def test_cli_runs_the_simai_example(tmp_path, capsys):
    trace, report = tmp_path / "t.json", tmp_path / "r.json"
    args = ["workload", os.path.join(DATA, "microAllReduce.txt"), "-t", "pcie-8gpu", "--trace", str(trace)]
    assert main([*args, "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "workload microAllReduce: 8 ranks, 112 flows" in out and "critical path" in out
    assert "  0-7  8 GPUs " in out and "\n    0  gpu0" not in out  # eight identical ranks: one row
    record = json.loads(report.read_text())
    assert len(record["ranks"]) == 8 and record["iteration_time"] > 556e-6
    assert record["exposed_max"] == pytest.approx(record["iteration_time"] - 556e-6 - 2e-9, rel=1e-9)
    events = json.loads(trace.read_text())["traceEvents"]
    # the one collective's busbw, from the trace's own flow spans: 512 MiB x 2(n-1)/n / (last end - first start)
    (coll,) = record["collectives"]
    spans = [
        (e["ts"], e["ts"] + e["dur"]) for e in events if e["ph"] == "X" and coll["name"] + "/" in e["name"]
    ]
    assert len(spans) == 112 and coll["size"] == 512 * 2**20 and coll["ranks"] == 8
    seconds = (max(end for _, end in spans) - min(start for start, _ in spans)) * 1e-6  # trace times are us
    assert coll["busbw"] == pytest.approx(512 * 2**20 / seconds * 2 * 7 / 8, rel=1e-6)
    assert f"{coll['busbw'] / 1e9:6.2f} GB/s" in out
    assert sum(e["ph"] == "X" for e in events) == 112 + 32
    assert main(["workload", os.path.join(DATA, "microAllReduce_dp.txt"), "-t", "pcie-8gpu"]) == 2
    assert "has 16 ranks but 'pcie-8gpu' has only 8 GPUs" in capsys.readouterr().err


@pytest.mark.slow
def test_simai_moe_example_end_to_end():
    run = workloads.simulate_workload(
        os.path.join(DATA, "workload_ep_test.txt"), topology.leaf_spine(4, 2, 8), tolerance=0.01
    )
    assert run.iteration_time > run.compute.max() > 0
    check_causality(run)


# --- Chakra --------------------------------------------------------------------------------------------


def test_chakra_round_trip_through_the_writer(tmp_path):
    nodes = [
        cw.node(1, "gemm", cw.COMP, duration_micros=12, is_cpu_op=False),
        cw.node(2, "ar", cw.COLL, data_deps=[1], ctrl_deps=[1], comm_type=cw.ALL_REDUCE, comm_size=1 << 40),
        cw.node(
            3,
            "x",
            cw.METADATA,
            data_deps=[2, 1],
            packed=False,
            neg=-5,
            ratio=0.25,
            pg_name="dp",
            involved_dim=[True, False, True],
            dims=[3, 1 << 33],
        ),
    ]
    cw.write(tmp_path / "t.0.et", nodes)
    cw.write(tmp_path / "t.1.et.gz", nodes[:1], compress=True)
    trace = workloads.read_chakra(str(tmp_path / "t"))
    assert trace.name == "t" and trace.n_ranks == 2 and trace.versions == ("0.0.4", "0.0.4")
    a, b, c = trace.nodes[0]
    assert (a.id, a.name, a.type, a.duration_micros, a.attrs) == (1, "gemm", 4, 12, {"is_cpu_op": False})
    assert (b.data_deps, b.ctrl_deps, b.attrs) == ((1,), (1,), {"comm_type": 0, "comm_size": 1 << 40})
    assert c.data_deps == (2, 1) and c.deps == (2, 1)
    assert c.attrs == {
        "neg": -5,
        "ratio": 0.25,
        "pg_name": "dp",
        "involved_dim": (True, False, True),
        "dims": (3, 1 << 33),
    }
    assert trace.nodes[1] == (a,)


def test_chakra_collective_and_send_recv_closed_form(tmp_path):
    # every rank: 10 us compute -> ALLREDUCE of S -> 5 us compute; then rank 0 sends P bytes to rank 1.
    # Iteration: 15 us + ring AllReduce + (L + P/B) on the one link g0 -> g1.
    n, size, p2p = 4, 2e6, 1e6
    for r in range(n):
        nodes = [
            cw.node(1, "fwd", cw.COMP, duration_micros=10),
            cw.node(2, "grad", cw.COLL, data_deps=[1], comm_type=cw.ALL_REDUCE, comm_size=int(size)),
            cw.node(3, "opt", cw.COMP, data_deps=[2], duration_micros=5),
        ]
        if r == 0:
            nodes.append(
                cw.node(4, "send", cw.SEND, data_deps=[3], comm_src=0, comm_dst=1, comm_size=int(p2p))
            )
        if r == 1:
            nodes.append(
                cw.node(4, "recv", cw.RECV, ctrl_deps=[3], comm_src=0, comm_dst=1, comm_size=int(p2p))
            )
        cw.write(tmp_path / f"job.{r}.et", nodes)
    fabric, ranks = ring(n)
    run = workloads.simulate_workload(str(tmp_path / "job.0.et"), fabric, ranks=ranks)
    expected = 15e-6 + ring_allreduce(n, size) + L + p2p / B
    assert run.iteration_time == pytest.approx(expected, rel=1e-9)
    assert run.critical_path[-1].id == "p2p r0->r1 tag0#0"
    assert run.compute == pytest.approx([15e-6] * n)
    check_causality(run)


def test_chakra_astra_sim_custom_ring_allreduce_by_hand():
    # ASTRA-sim's custom ring all-reduce (tests/data/chakra_custom_ring/SOURCE.md): 8 ranks, 14 steps of
    # send(r -> r+1) then recv(r-1 -> r), each recv waiting on its own rank's send; 7 us of reduction after
    # each of the first 7 receives. Every step's 8 chunks of 1 MiB / 8 cross 8 different links at once, so
    # each step takes L + (S/8)/B, and the rank's next send waits for the step's recv (and reduction):
    # 2(N-1) (L + S/(N B)) + 7 * 7 us.
    trace = workloads.read_chakra(os.path.join(CUSTOM_RING, "custom_allreduce.0.et.gz"))
    n, size = 8, 1 << 20
    assert trace.n_ranks == n
    fabric, ranks = ring(n)
    work = trace.workload(ranks)
    assert len(work.flows) == 2 * (n - 1) * n and {f.bytes for f in work.flows} == {size / n}
    run = workloads.simulate_workload(trace.files, fabric, ranks=ranks)
    assert run.iteration_time == pytest.approx(ring_allreduce(n, size) + 7 * 7e-6, rel=1e-9)
    assert run.compute == pytest.approx([49e-6] * n)
    check_causality(run)


@pytest.mark.parametrize("posted_us", [1, 30])
def test_chakra_send_starts_without_its_recv_and_recv_waits_for_both(tmp_path, posted_us):
    # rank 0 sends P at t = 0; rank 1 computes `posted_us` before it posts the recv, then 2 us more. The
    # flow runs in [0, L + P/B] whenever the recv is posted (ASTRA-sim sends eagerly); the recv finishes
    # at max(L + P/B, posted): 11 us against 1 us or 30 us.
    p2p = 1e5
    cw.write(tmp_path / "p.0.et", [cw.node(1, "s", cw.SEND, comm_dst=1, comm_size=int(p2p))])
    cw.write(
        tmp_path / "p.1.et",
        [
            cw.node(1, "c", cw.COMP, duration_micros=posted_us),
            cw.node(2, "r", cw.RECV, data_deps=[1], comm_src=0, comm_size=int(p2p)),
            cw.node(3, "after", cw.COMP, data_deps=[2], duration_micros=2),
        ],
    )
    fabric, ranks = ring(2)
    run = workloads.simulate_workload(str(tmp_path / "p"), fabric, ranks=ranks)
    flow, arrive = run.result.timing("p2p r0->r1 tag0#0"), L + p2p / B
    assert flow.start == 0.0 and flow.finish == pytest.approx(arrive, rel=1e-12)
    after = run.result.timing("r1.3 after")
    assert after.start == pytest.approx(max(arrive, posted_us * 1e-6), rel=1e-12)


def test_chakra_through_the_cli(tmp_path, capsys):
    for r in range(2):
        cw.write(
            tmp_path / f"a.{r}.et",
            [
                cw.node(7, "k", cw.COMP, duration_micros=3),
                cw.node(9, "ag", cw.COLL, data_deps=[7], comm_type=cw.ALL_GATHER, comm_size=1 << 20),
            ],
        )
    assert (
        main(["workload", str(tmp_path / "a"), "-t", "pcie-4gpu", "--trace", str(tmp_path / "t.json")]) == 0
    )
    out = capsys.readouterr().out
    assert "workload a: 2 ranks, 2 flows, 2 tasks" in out
    assert json.loads((tmp_path / "t.json").read_text())["otherData"]["scenario"] == "a"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"0": cw.trace([cw.node(1)])[:-2]},
            r"b\.0\.et: not a Chakra trace: message 1 of \d+ bytes runs past",
        ),
        (
            {"0": cw.trace([cw.node(1, data_deps=[5])])},
            r"b\.0\.et: node 1 \(''\) depends on unknown node id 5",
        ),
        ({"0": cw.trace([cw.node(1), cw.node(1)])}, r"b\.0\.et: node id 1 appears twice"),
        (
            {"0": cw.trace([cw.node(1, "s", cw.SEND, comm_dst=1, comm_size=8)]), "1": cw.trace([cw.node(1)])},
            r"b\.0\.et: node 1 \('s'\): send from rank 0 to rank 1 \(tag 0, #0\) has no matching recv",
        ),
        (
            {r: cw.trace([cw.node(1, "g", cw.COLL, comm_type=cw.GATHER, comm_size=8)]) for r in "01"},
            r"b\.0\.et: node 1 \('g'\): comm_type: 3 GATHER is not supported",
        ),
        (
            {
                "0": cw.trace([cw.node(1, "c", cw.COLL, comm_type=0, comm_size=8)]),
                "1": cw.trace([cw.node(1)]),
            },
            None,  # a collective only rank 0 reaches: a group of one, moves nothing
        ),
        (
            {"0": cw.trace([cw.node(1, data_deps=[2]), cw.node(2, data_deps=[1])])},
            r"b\.0\.et: node 1 \(''\) can never start",
        ),
    ],
)
def test_chakra_malformed_traces_name_file_and_node(tmp_path, files, message):
    for rank, data in files.items():
        (tmp_path / f"b.{rank}.et").write_bytes(data)
    _, ranks = ring(len(files))
    if message is None:
        assert workloads.read_chakra(str(tmp_path / "b")).workload(ranks).flows == ()
        return
    with pytest.raises(ScenarioError, match=message):
        workloads.read_chakra(str(tmp_path / "b")).workload(ranks)
