"""Layout evidence (`check_layout`): a trace's GPU count, nvidia-smi topo block and its p2p matrix's own
fast and slow cells against a topology; every finding names the cells, the cause and the implied layout.
No simulation: the expected figure of a cell is its direct route's bottleneck."""

import numpy as np
import pytest
from netsim.calibrate import check_layout, implied_groups

from netsim.cli import main
from netsim.data import TRACES, trace_path
from netsim.topology import load, pcie_server
from netsim.traces import P2PMatrix, Trace, read_trace

M01 = "rtx4090-8x-epyc7542"


def matrix_trace(values, name="lab.txt"):
    m = P2PMatrix("unidirectional", True, "writes", "", np.asarray(values), "Unidirectional P2P=Enabled", 7)
    return Trace(name, (), "", (m,))


def uniform(n, fast, slow=None, groups=()):
    """n x n GB/s: `fast` everywhere, `slow` between the given groups."""
    v = np.full((n, n), fast * 1e9)
    for g in groups:
        for h in groups:
            if g is not h:
                v[np.ix_(g, h)] = slow * 1e9
    np.fill_diagonal(v, 900e9)
    return v


@pytest.mark.parametrize("name", [n for n in TRACES if n.startswith("m01") and n.endswith(".txt")])
def test_m01s_own_traces_agree_with_its_topology(name):
    assert check_layout(read_trace(trace_path(name)), load(M01)) == []


def test_a_single_socket_six_gpu_box_on_m01_names_the_socket_link():
    """The issue's case: a 6-GPU single-socket matrix mapped onto m01 puts GPUs 4-5 across its socket
    link; the finding names exactly those cells, the cause and the implied one-socket layout."""
    (finding,) = check_layout(matrix_trace(uniform(6, 25.6)), load(M01))
    cross = {(i, j) for i in range(6) for j in range(6) if (i < 4) != (j < 4)}
    assert set(finding.cells) == cross
    text = str(finding)
    assert "measured like pairs within a socket" in text and "routes them over the socket link" in text
    assert "no socket link" in text and "pcie_server(6, sockets=1)" in finding.implied
    assert (
        "--topology pcie:6" in finding.implied
        and check_layout(matrix_trace(uniform(6, 25.6)), load("pcie:6")) == []
    )


def test_two_groups_on_a_one_socket_topology_name_the_slow_cells_and_two_sockets():
    v = uniform(8, 25.6, 21.9, ([0, 1, 2, 3], [4, 5, 6, 7]))
    (finding,) = check_layout(matrix_trace(v), pcie_server(8, sockets=1))
    assert set(finding.cells) == {(i, j) for i in range(8) for j in range(8) if (i < 4) != (j < 4)}
    assert "measured slower (21.9 GB/s)" in finding.message
    assert "pcie_server(8, sockets=2)" in finding.implied
    assert implied_groups(v, 23e9) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_another_machines_nvidia_smi_topo_and_a_smaller_collective_are_named():
    findings = check_layout(
        read_trace(trace_path("m05_8xA40_nv4_node_sys_and_dgxA100_allreduce.txt")), load(M01)
    )
    text = "\n".join(map(str, findings))
    assert "path kinds differ" in text and "0->1 NV4 vs SYS" in text
    assert "ran on 4 GPUs" in text
    (smaller,) = check_layout(read_trace(trace_path("m08_4xA100PCIe_nvlinkpairs_p2p.txt")), load(M01))
    assert "lists 4 GPUs" in smaller.message


def test_netsim_predict_prints_the_layout_warning(tmp_path, capsys):
    rows = "\n".join(
        f"     {i} " + " ".join(f"{900 if i == j else 25.6:6.2f}" for j in range(6)) for i in range(6)
    )
    text = "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)\n   D\\D     0      1      2      3      4      5\n"
    path = tmp_path / "six.txt"
    path.write_text(text + rows + "\n")
    assert main(["predict", str(path), "--params", M01, "--no-compile-cache"]) == 0
    out = capsys.readouterr().out
    assert "warning: layout:" in out and "over the socket link" in out and "pcie_server(6, sockets=1)" in out
