"""`nvidia-smi topo -m`: every real matrix in the shipped traces parses, rebuilds into a server whose path classes
reproduce the matrix cell for cell, with the expected socket/NUMA grouping; a malformed calibration entry names
its file and key (the parser's own tests: tests/traces/test_traces_nvsmi.py)."""

import json
import re

import pytest
from topo_helpers import node_path

from netsim import ScenarioError
from netsim.data import TRACES, trace_path
from netsim.topology import load, path_kind, pcie_server_from_topo, preset, server_plan
from netsim.traces import parse_nvidia_smi_topo

HEADER = re.compile(r"^\W*GPU0\s+GPU1\b", re.MULTILINE)


def name(device):
    return device.lower() if re.fullmatch(r"(GPU|NIC)\d+", device) else device


def real_matrices():
    texts = {n: trace_path(n).read_text() for n in TRACES if n.startswith("m0") and n.endswith(".txt")}
    return {n: t for n, t in texts.items() if HEADER.search(t)}


def socket_of(topo, device):
    """The socket a device's host bridge belongs to (the hub its NUMA node hangs from)."""
    path = node_path(topo, topo.route(device, "mem0"))
    cpu = next(n for n in path if topo.kind[n] == "cpu")
    up = [x.dst for x in topo.links if x.src == cpu and topo.kind[x.dst] == "socket"]
    return up[0] if up else cpu


def test_every_real_matrix_parses_and_round_trips():
    found = real_matrices()
    assert {
        "m01_8x4090_2xEPYC7542_topo.txt",
        "m05_8xA40_nv4_node_sys_and_dgxA100_allreduce.txt",
        "m08_4xA100PCIe_nvlinkpairs_p2p.txt",
    } <= set(found)
    for file, text in found.items():
        matrix = parse_nvidia_smi_topo(text)
        topo = pcie_server_from_topo(matrix)
        for a in matrix.devices:
            for b in matrix.devices:
                if a != b and matrix.kind(a, b) is not None:
                    assert path_kind(topo, name(a), name(b)) == matrix.kind(a, b), (file, a, b)


def test_m01_grouping_sockets_numa_and_nics():
    text = trace_path("m01_8x4090_2xEPYC7542_topo.txt").read_text()
    matrix = parse_nvidia_smi_topo(text)
    assert matrix.gpus == tuple(f"GPU{i}" for i in range(8))
    assert [matrix.numa_affinity[f"GPU{i}"] for i in range(8)] == [3, 2, 1, 0, 7, 6, 5, 4]
    assert matrix.cpu_affinity["GPU0"] == "24-31,88-95" and matrix.cpu_affinity["NIC0"] is None
    assert matrix.gpu_numa_id["GPU0"] is None and matrix.nic_names["NIC3"] == "mlx5_3"
    plan = server_plan(matrix)
    assert (plan.sockets, plan.numa) == (2, 8)
    topo = pcie_server_from_topo(matrix)
    # NUMA 0-3 form socket 0, 4-7 socket 1: GPUs 0-3 vs 4-7, the split m01/m02 measure (~50 vs ~40 GB/s bidir)
    assert [socket_of(topo, f"gpu{i}") for i in range(8)] == ["socket0"] * 4 + ["socket1"] * 4
    assert all(socket_of(topo, f"nic{i}") == "socket1" for i in range(4))  # beside GPU6 (NUMA 5)
    assert path_kind(topo, "nic0", "nic1") == "PIX" and path_kind(topo, "gpu6", "nic2") == "PHB"
    assert (
        preset("rtx4090-8x-epyc7542").links == pcie_server_from_topo(text, name="rtx4090-8x-epyc7542").links
    )


def test_m05_groups_inferred_without_affinity_columns():
    text = trace_path("m05_8xA40_nv4_node_sys_and_dgxA100_allreduce.txt").read_text()
    matrix = parse_nvidia_smi_topo(text)  # quoted with "#", columns elided with "..."
    assert all(v is None for v in matrix.numa_affinity.values())
    topo = pcie_server_from_topo(matrix)
    assert [socket_of(topo, f"gpu{i}") for i in range(8)] == ["cpu0"] * 4 + ["cpu1"] * 4
    assert [path_kind(topo, f"gpu{i}", f"gpu{i + 1}") for i in (0, 2, 4, 6)] == ["NV4"] * 4
    assert (
        preset("a40-8x-nv4").links
        == pcie_server_from_topo(matrix, name="a40-8x-nv4", nvlink_bandwidth=47.4e9 / 4).links
    )


def test_m08_one_numa_node_per_gpu_and_nv12_pairs():
    matrix = parse_nvidia_smi_topo(trace_path("m08_4xA100PCIe_nvlinkpairs_p2p.txt").read_text())
    assert [matrix.numa_affinity[g] for g in matrix.gpus] == [0, 1, 2, 3]
    assert matrix.kind("GPU0", "GPU1") == "NV12" and matrix.kind("GPU1", "GPU2") == "SYS"
    topo = pcie_server_from_topo(matrix)
    assert len(topo.nodes_of("mem")) == 4 and topo.nodes_of("socket") == ("socket0", "socket1")


SYNTHETIC = """\
some log line
\tGPU0\tGPU1\tGPU2\tGPU3\tmlx5_0\tCPU Affinity\tNUMA Affinity
GPU0\t X \tPIX\tPXB\tSOC\tPXB\t0-11\t0
GPU1\tPIX\t X \tPXB\tSOC\tPXB\t0-11\t0
GPU2\tPXB\tPXB\t X \tSOC\tPIX\t0-11\t0
GPU3\tSOC\tSOC\tSOC\t X \tSOC\t12-23\t1
mlx5_0\tPXB\tPXB\tPIX\tSOC\t X \r

Legend:
  X    = Self
"""


def test_older_format_with_soc_tabs_crlf_and_named_nic_columns():
    matrix = parse_nvidia_smi_topo(SYNTHETIC)
    assert matrix.devices == ("GPU0", "GPU1", "GPU2", "GPU3", "mlx5_0")
    assert matrix.kind("GPU0", "GPU3") == "SYS"  # SOC is the old name of SYS
    topo = pcie_server_from_topo(matrix, sockets=2)
    assert topo.nodes_of("nic") == ("nic0",)
    assert path_kind(topo, "gpu0", "gpu1") == "PIX" and path_kind(topo, "gpu0", "gpu2") == "PXB"
    assert path_kind(topo, "gpu2", "nic0") == "PIX" and path_kind(topo, "gpu0", "gpu3") == "SYS"


@pytest.mark.parametrize("garbage", ["no matrix here", "\tGPU0\tGPU1\nGPU0\t X \tNV2\nGPU1\tFOO\t X \n"])
def test_garbage_nvidia_smi_topo_entry_names_file_and_key(tmp_path, garbage):
    """Issue: a garbage `nvidia_smi_topo` entry of a calibration file named neither the file nor the key."""
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"topology": {"nvidia_smi_topo": garbage}}))
    with pytest.raises(ScenarioError, match=r"cal\.json: topology\.nvidia_smi_topo: nvidia-smi topo"):
        load(str(path))
