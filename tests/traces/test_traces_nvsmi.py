"""`nvidia-smi topo -m`: blocks inside traces and the one parser netsim.topology builds servers from;
malformed input names its line."""

import pytest
from trace_helpers import OLD_NCCL_TESTS, trace, write

from netsim import ScenarioError
from netsim.traces import TraceError, parse_nvidia_smi_topo, read_trace


def test_topo_blocks_parsed_by_netsim_topology():
    (topo,) = trace("m01_8x4090_2xEPYC7542_topo.txt").topo()
    assert topo.devices == (*(f"GPU{i}" for i in range(8)), *(f"NIC{i}" for i in range(4)))
    assert topo.line == 6 and "NIC3: mlx5_3" in topo.text  # the legend travels with the block
    m = topo.matrix
    assert (m.kind("GPU0", "GPU7"), m.kind("GPU6", "NIC0"), m.kind("NIC0", "NIC1")) == ("SYS", "PHB", "PIX")
    assert m.numa_affinity["GPU4"] == 7 and m.nic_names["NIC2"] == "mlx5_2"
    (quoted,) = trace("m05_8xA40_nv4_node_sys_and_dgxA100_allreduce.txt").topo()  # "#"-quoted, "..." elided
    assert quoted.line == 5 and quoted.matrix.gpus == tuple(f"GPU{i}" for i in range(8))
    assert (quoted.matrix.kind("GPU2", "GPU3"), quoted.matrix.kind("GPU1", "GPU2")) == ("NV4", "NODE")
    (tabs,) = trace("m08_4xA100PCIe_nvlinkpairs_p2p.txt").topo()
    assert tabs.matrix.kind("GPU0", "GPU1") == "NV12" and tabs.matrix.cpu_affinity["GPU3"] == "72-95"


GOOD = ["\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity", "GPU0\t X \tNV2\t0-7\t0", "GPU1\tNV2\t X \t0-7\t0"]


@pytest.mark.parametrize(
    ("line", "replacement", "message"),
    [
        (1, "GPU0\t X \tFOO\t0-7\t0", r"line 2: unknown link kind 'FOO'"),
        (1, "GPU0\t X \t0-7\t0", r"line 2: unknown link kind '0-7'"),
        (1, "GPU0\t X", r"line 2: 1 cells for 2 devices"),
        (2, "GPU1\tNV2\tPIX\t0-7\t0", r"line 3: GPU1 to itself is 'PIX', expected X"),
        (2, "GPU1\tSYS\t X \t0-7\t0", r"line 2: GPU0->GPU1 is NV2 but GPU1->GPU0 is SYS"),
        (2, "GPU7\tNV2\t X \t0-7\t0", r"line 3: row for 'GPU7', which is not a column"),
        (2, "GPU1\tNV2\t X \t0-7\tzero", r"line 3: NUMA Affinity 'zero' is not a number"),
        (2, "GPU1\tNV2\t X \tall\t0", r"line 3: CPU Affinity 'all' is not a CPU list"),
        (2, "GPU1\tNV2\t X \t0-7\t0\t1\t2", r"line 3: 4 values after the matrix but 2 affinity columns"),
        (2, "GPU0\tNV2\t X \t0-7\t0", r"line 3: second row for 'GPU0'"),
        (2, "", r"line 1: no row for column\(s\) \['GPU1'\]"),
    ],
)
def test_malformed_input_names_the_line(line, replacement, message):
    lines = list(GOOD)
    lines[line] = replacement
    with pytest.raises(ScenarioError, match=message):
        parse_nvidia_smi_topo("\n".join(lines))


def test_no_matrix_at_all():
    with pytest.raises(ScenarioError, match="no matrix header"):
        parse_nvidia_smi_topo("P2P Connectivity Matrix\n  D\\D  0  1\n")
    with pytest.raises(ScenarioError, match="expected the text"):
        parse_nvidia_smi_topo(None)
    assert parse_nvidia_smi_topo("\n".join(GOOD)).kind("GPU0", "GPU1") == "NV2"


# `nvidia-smi topo -m` as printed: the rows, the "Legend:" block, then the "NIC Legend:" block
FULL = """\
$ nvidia-smi topo -m
\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity
GPU0\t X \tPIX\tPIX\t0-7\t0
GPU1\tPIX\t X \tPIX\t0-7\t0
NIC0\tPIX\tPIX\t X \t\t

Legend:

  X    = Self
  PIX  = Connection traversing at most a single PCIe bridge

NIC Legend:

  NIC0: mlx5_0

$ ./build/all_reduce_perf -g 2
"""


def test_legends_belong_to_the_block(tmp_path):
    matrix = parse_nvidia_smi_topo(FULL)
    assert matrix.devices == ("GPU0", "GPU1", "NIC0") and matrix.nic_names == {"NIC0": "mlx5_0"}
    (table,) = read_trace(write(tmp_path, "t.txt", FULL)).topo()
    assert table.line == 2 and table.text.endswith("NIC0: mlx5_0\n") and "all_reduce_perf" not in table.text
    assert table.matrix == parse_nvidia_smi_topo(table.text) == matrix  # one parser for both


def test_garbage_in_a_trace_block_names_the_file_and_line(tmp_path):
    path = write(tmp_path, "t.txt", FULL.replace("GPU1\tPIX\t X \tPIX", "GPU1\tPIX\t X \t#@!"))
    with pytest.raises(TraceError, match=r"^t\.txt:4: unknown link kind '#@!'"):
        read_trace(path)


def test_a_command_line_after_the_legend_is_not_part_of_it(tmp_path):
    text = FULL.split("NIC Legend:")[0].rstrip() + "\nNCCL_P2P_DISABLE=1 ./build/all_reduce_perf -g 2\n"

    (topo, table) = read_trace(write(tmp_path, "t.txt", text + OLD_NCCL_TESTS)).tables
    assert topo.text.rstrip().endswith("single PCIe bridge") and table.p2p is False
