"""`netsim collective` and `netsim presets`, and the result file layout `netsim run --out r.h5` writes."""

from __future__ import annotations

import json
import sys

import h5py
import numpy as np
import pytest

import netsim
from netsim import cli, studies, workloads
from netsim.cli.collective import parse_op, parse_size, scale_links
from netsim.topology import CALIBRATED, PRESETS, load, load_costs
from netsim.traces import read_trace

SERVER = "rtx4090-8x-epyc7542"  # calibrated: GPUs 0-3 on socket 0, 4-7 on socket 1 (NPS4)


def run_cli(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    """`netsim ARGS` in this process (JAX already started): exit code, stdout, stderr."""
    monkeypatch.delenv("PJRT_NPROC", raising=False)  # main() sizes XLA's pool through it; keep it as found
    code = cli.main([*args, "--no-compile-cache"])
    out, err = capsys.readouterr()
    return code, out, err


def test_sizes_parse_as_nccl_tests():
    assert parse_size("8") == 8 and parse_size("128M") == 128 * 2**20 and parse_size("1G") == 2**30
    assert parse_size("64k") == 65536 and parse_size("1.5K") == 1536 and parse_size("128MB") == 2**27
    assert parse_size("4MiB") == 4 * 2**20
    for bad in ("", "M", "-8", "1.3", "8X", "inf"):
        with pytest.raises(ValueError, match="expected bytes"):
            parse_size(bad)
    sizes = studies.nccl_sizes(8, 128 * 2**20, 2, 2**20)  # all_reduce_perf -b 8 -e 128M -f 2
    assert len(sizes) == 25 and sizes[0] == 8 and sizes[-1] == 2**27
    assert studies.nccl_sizes(2**20, 3 * 2**20 + 5, 1, 2**20) == [2**20, 2 * 2**20, 3 * 2**20]  # -i steps
    assert studies.nccl_sizes(8, 100, 4, 1) == [8, 32]
    for args, msg in (
        ((9, 8, 2, 1), "above"),
        ((0, 8, 2, 1), "never grows"),
        ((1, 2**40, 1, 1), "more than"),
    ):
        with pytest.raises(ValueError, match=msg):
            studies.nccl_sizes(*args)
    # counts in whole elements; all_gather splits the buffer over ranks (count printed per rank)
    assert studies.nccl_rows("allreduce", [8, 10, 16], 8, 4) == [
        (8, 2),
        (16, 4),
    ]  # 10 B rounds down to 8: a repeat
    assert studies.nccl_rows("allgather", [8, 12, 100], 3, 4) == [
        (12, 1),
        (96, 8),
    ]  # 8 B is 0 elements per rank
    assert [parse_op(x) for x in ("all_reduce", "allreduce", "AllReduce", "all_gather_perf", "all2all")] == [
        "all_reduce",
        "all_reduce",
        "all_reduce",
        "all_gather",
        "alltoall",
    ]
    with pytest.raises(ValueError, match="known: all_reduce"):
        parse_op("allreduse")


def test_collective_table_is_collective_sweep_in_nccl_tests_layout(capsys, monkeypatch, tmp_path):
    out = tmp_path / "ar.json"
    code, text, err = run_cli(
        capsys,
        monkeypatch,
        "collective",
        "all_reduce",
        "--topology",
        SERVER,
        "-b",
        "1M",
        "-e",
        "64M",
        "-f",
        "4",
        "-g",
        "4",
        "--json",
        str(out),
    )
    assert code == 0, err
    assert "simulating all_reduce" in err and "#" not in err  # progress on stderr, the table on stdout
    topo = load(SERVER)
    sizes = [2**20, 2**22, 2**24, 2**26]
    costs = load_costs(SERVER)  # the table pays the calibration's software costs
    ref = studies.collective_sweep(workloads.allreduce(topo.gpus()[:4], "1 MiB"), topo, sizes, costs)
    record = json.loads(out.read_text())
    assert [r["size"] for r in record["rows"]] == sizes and record["ranks"] == list(topo.gpus()[:4])
    for key in ("time", "algbw", "busbw"):
        np.testing.assert_allclose([r[key] for r in record["rows"]], getattr(ref, key), rtol=1e-12)
    # the printed table reads back as an nccl-tests log: same op, ranks, columns and (rounded) numbers
    log = tmp_path / "all_reduce_perf.txt"
    log.write_text(text)
    (table,) = read_trace(log).nccl()
    assert table.op == "all_reduce" and table.n_gpus == 4 and table.groups == ("out-of-place", "in-place")
    np.testing.assert_array_equal(table.size, sizes)
    np.testing.assert_array_equal(table.count, np.array(sizes) // 4)
    assert set(table.dtype) == {"float"} and set(table.redop) == {"sum"} and set(table.root) == {-1}
    for g in range(2):
        np.testing.assert_allclose(table.time[:, g], ref.time, rtol=5e-4)  # printed to 4-5 digits
        np.testing.assert_allclose(table.busbw[:, g], ref.busbw, atol=0.006e9)  # printed to 0.01 GB/s
    row = next(line for line in text.splitlines() if line.lstrip().startswith(str(2**26)))
    # nccl-tests' widths: %12li  %12li  %8s  %6s  %6i, then per group "  %7s  %6.2f  %6.2f  %5s"
    assert row.startswith(f"{2**26:12d}  {2**24:12d}     float     sum      -1  ")
    assert len(row) == 12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + 6 + 2 * (2 + 7 + 2 + 6 + 2 + 6 + 2 + 5)


def test_scale_slows_cross_socket_rings_only_and_refuses_unknown_patterns(capsys, monkeypatch, tmp_path):
    topo = load(SERVER)
    slow, notes = scale_links(topo, [("socket", 0.5)])
    assert "socket0->socket1, socket1->socket0; shared socket0<->socket1" in notes[0]
    assert slow.link["socket0->socket1"].bandwidth == topo.link["socket0->socket1"].bandwidth * 0.5
    before = {r.id: r.capacity for r in topo.shared}["socket0<->socket1"]
    assert {r.id: r.capacity for r in slow.shared}["socket0<->socket1"] == 0.5 * before
    assert slow.link["gpu0->rc0"].bandwidth == topo.link["gpu0->rc0"].bandwidth
    by_glob, _ = scale_links(topo, [("gpu*->rc*", 2.0)])
    assert by_glob.link["gpu3->rc3"].bandwidth == 2 * topo.link["gpu3->rc3"].bandwidth
    assert by_glob.link["rc3->gpu3"].bandwidth == topo.link["rc3->gpu3"].bandwidth

    def busbw(n: int, *scale: str) -> float:
        code, _, err = run_cli(
            capsys, monkeypatch, "collective", "allreduce", "-t", SERVER, "-b", "64M", "-e", "64M", "-g", str(n),
            "--json", str(tmp_path / "x.json"), *scale,
        )  # fmt: skip
        assert code == 0, err
        return json.loads((tmp_path / "x.json").read_text())["rows"][0]["busbw"]

    # 8 ranks: the ring crosses the socket link twice and the socket budget is its bottleneck (41.2 GB/s for
    # both directions < 2 x 25.5 GB/s of PCIe) so halving it lowers busbw; 4 ranks stay on socket 0
    assert busbw(8, "--scale", "socket=0.5") < 0.8 * busbw(8)
    assert busbw(4, "--scale", "socket=0.5") == pytest.approx(busbw(4), rel=1e-12)
    # one direction slowed is no slower than both (NCCL's two slots per connection); --slots reaches the builder
    assert busbw(8, "--scale", "socket0->socket1=0.5") >= busbw(8, "--scale", "socket=0.5") * (1 - 1e-9)
    assert busbw(8, "--slots", "1") < busbw(8, "--slots", "0") * (1 - 1e-3)
    code, _, err = run_cli(
        capsys, monkeypatch, "collective", "allreduce", "-t", SERVER, "--scale", "nvlink=0.7"
    )
    assert code == 2 and "--scale nvlink=0.7: matches no link id, link class or shared resource" in err
    assert "classes: memory, numa, pcie, socket" in err


def test_collective_options_errors_and_ring_search(capsys, monkeypatch, tmp_path):
    code, text, err = run_cli(
        capsys, monkeypatch, "collective", "all_gather", "-t", "pcie-4gpu", "-b", "8", "-e", "1K", "-f", "4",
        "-g", "3", "--search-rings", "--json", str(tmp_path / "ag.json"),
    )  # fmt: skip
    assert code == 0, err
    rows = [line.split() for line in text.splitlines() if line[:1] == " " and "float" in line]
    assert [(int(r[0]), int(r[1]), r[3], int(r[4])) for r in rows] == [
        (24, 2, "none", -1),
        (120, 10, "none", -1),
        (504, 42, "none", -1),
    ]
    # root is -1 for every op without one, whatever other options are set (it followed --slots once)
    code, reduced, err = run_cli(
        capsys,
        monkeypatch,
        "collective",
        "allreduce",
        "-t",
        "pcie-4gpu",
        "-b",
        "1K",
        "-e",
        "1K",
        "--slots",
        "4",
    )
    assert code == 0 and [line.split()[4] for line in reduced.splitlines() if "float" in line] == ["-1"], err
    # across servers rings are laid as NCCL lays them, each channel on rails of its own: 2 channels leave
    # by 2 NICs (2 x 50 GB/s busbw on dgx-h100:2; on one order both would share one NIC: 50)
    code, crossing, err = run_cli(
        capsys,
        monkeypatch,
        "collective",
        "allreduce",
        "-t",
        "dgx-h100:2",
        "-b",
        "1G",
        "-e",
        "1G",
        "--channels",
        "2",
    )
    assert code == 0 and "# rings: 2 channel(s) across servers" in crossing, err
    assert [line.split()[7] for line in crossing.splitlines() if "float" in line] == ["100.00"]
    rings = json.loads((tmp_path / "ag.json").read_text())["rings"]
    assert rings[-1]["default"] and all(r["busbw"] >= rings[-1]["busbw"] * (1 - 1e-9) for r in rings)
    assert "# best 1" in text and "# default" in text
    for args, msg in (
        (("alltoall", "-t", "pcie-4gpu", "--algo", "ring"), "alltoall has no algorithm 'ring'"),
        (("allreduce", "-t", "pcie-4gpu", "-g", "5"), "-g: ranks must be in [2, 4]"),
        (("allreduce", "-t", "pcie-4gpu", "--slots", "-1"), "--slots: must be >= 0"),
        (("allreduce", "-t", "pcie-4gpu", "--channels", "0"), "channels: must be an integer >= 1, got 0"),
        (("allreduce", "-t", "dgx-h100:2", "--channels", "0"), "channels: must be an integer >= 1, got 0"),
        (("allreduce", "-t", "no-such-machine"), "neither a preset"),
        (("allreduce", "-t", "pcie-4gpu", "-b", "2", "-e", "3"), "every size is below one float"),
        (("allreduce", "-t", "pcie-4gpu", "-b", "2M", "-e", "1M"), "above the -e maximum"),
    ):
        code, _, err = run_cli(capsys, monkeypatch, "collective", *args)
        assert code == 2 and msg in err, err
    with pytest.raises(SystemExit) as e:  # argparse refuses a bad size or op before JAX work
        cli.main(["collective", "allreduce", "-t", "pcie-4gpu", "-b", "8X"])
    assert e.value.code == 2 and "expected bytes with an optional K/M/G suffix" in capsys.readouterr().err


def test_presets_lists_every_preset_and_calibration(capsys, monkeypatch):
    code, text, _ = run_cli(capsys, monkeypatch, "presets")
    assert code == 0
    for name, description in PRESETS.items():
        assert f"  {name} " in text and description in text
    for name, values in CALIBRATED.items():
        assert f"  {name} " in text.split("calibrated presets")[1]
        assert all(source in text for source in values["sources"])


def _scenario() -> netsim.Scenario:
    # f1 crosses a->b (under a 5 B/s two-way budget) then b->c; f2 shares b->c; t waits for f1
    links = [netsim.Link("a->b", "a", "b", 10.0, 0.5), netsim.Link("b->c", "b", "c", 10.0, 0.25)]
    flows = [netsim.Flow("f1", "a", "c", 20.0), netsim.Flow("f2", "b", "c", 10.0)]
    tasks = [netsim.Task("t", "gpu0", 1.0, after=("f1",))]
    shared = [netsim.SharedResource("ab budget", 5.0, ("a->b",))]
    return netsim.Scenario(links, flows, tasks, name="layout", shared=shared)


def test_hdf5_layout_round_trip_with_units(tmp_path):
    result = netsim.simulate(_scenario())
    path = tmp_path / "r.h5"
    result.save(path)
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "netsim-result" and f.attrs["version"] == 2
        assert f.attrs["makespan"] == result.makespan and json.loads(f.attrs["units"])["makespan"] == "s"
        units: dict[str, str | None] = {}
        f.visititems(lambda name, obj: units.update({name: obj.attrs.get("units")}) if name else None)
        datasets = {k: v for k, v in units.items() if isinstance(f[k], h5py.Dataset)}
        assert len(datasets) == 29 and all(isinstance(u, str) for u in datasets.values()), datasets
        assert (
            units["flows/finish"] == "s" and units["flows/bytes"] == "B" and units["links/bandwidth"] == "B/s"
        )
        ids = [x.decode() for x in f["links/id"][:]]
        assert ids == ["a->b", "b->c"] and [x.decode() for x in f["flows/id"][:]] == ["f1", "f2"]
        routes = [[ids[j] for j in row if j >= 0] for row in f["flows/route"][:]]
        assert routes == [["a->b", "b->c"], ["b->c"]]
        np.testing.assert_array_equal(f["flows/shared"][:], [[0], [-1]])
        assert [x.decode() for x in f["shared/id"][:]] == ["ab budget"]
        np.testing.assert_array_equal(f["flows/finish"][:], result.flow_finish)
        np.testing.assert_array_equal(f["links/bytes"][:], result.link_bytes)
        np.testing.assert_array_equal(f["tasks/finish"][:], result.task_finish)
        assert [x.decode() for x in f["tasks/device"][:]] == ["gpu0"]
        np.testing.assert_array_equal(f["devices/busy"][:], result.device_busy)
        held = f["flows/held"][:]
        # held columns follow route, then shared; they add up to each flow's transfer time
        np.testing.assert_allclose(held.sum(1), result.flow_finish - result.flow_first_byte, rtol=1e-12)
        assert held[0, 2] == pytest.approx(result.bottlenecks("f1").get("ab budget", 0.0))
    # f1 (first byte at 0.75 s) is held to 5 B/s by the budget all along, so 20 B take 4 s; f2 fits beside it
    assert result.flow("f1").finish == pytest.approx(0.75 + 20 / 5)


def test_to_pandas_or_the_extra_it_needs(monkeypatch):
    result = netsim.simulate(_scenario())
    try:
        import pandas  # noqa: F401
    except ImportError:
        installed = False
    else:
        installed = True
    if installed:
        frames = result.to_pandas()
        assert set(frames) == {"flows", "tasks", "links"}
        assert list(frames["flows"].index) == ["f1", "f2"]
        assert frames["flows"].loc["f1", "route"] == ("a->b", "b->c")
        np.testing.assert_array_equal(frames["flows"]["finish"], result.flow_finish)
        assert frames["links"].attrs["units"]["bandwidth"] == "B/s"
    else:
        with pytest.raises(ImportError, match=r'pip install "netsim\[pandas\]"'):
            result.to_pandas()
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if not installed
    with pytest.raises(ImportError, match=r"Result.to_pandas needs pandas, which is not installed"):
        result.to_pandas()
