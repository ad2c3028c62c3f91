"""A server from `rocm-smi --showtopo` / `--shownodesbw` output: XGMI cables where rocm-smi says one XGMI hop,
host paths elsewhere, routes whose XGMI hops are rocm-smi's Hops, copy times by the closed form, and errors
that name the file and line (the reader's own tests: tests/traces/test_traces_rocm.py)."""

import numpy as np
import pytest
from rocm_sample import ROCM_NODESBW

import netsim
from netsim import ScenarioError
from netsim.topology import rocm_server
from netsim.traces import TraceError, read_trace


def block(title, rows):
    """A rocm-smi matrix as rocm_smi.py prints it: a banner, then "GPU0 ..." columns of width 12."""
    n = len(rows)
    text = f"{f' {title} ':=^90}\n" + "       " + "".join(f"GPU{j:<10d}" for j in range(n)).rstrip() + "\n"
    for i, row in enumerate(rows):
        text += f"GPU{i:<4d}" + "".join(f"{cell:<13s}" for cell in row).rstrip() + "\n"
    return text + "\n"


def numa(nodes):
    lines = [
        f"GPU[{i}]\t\t: (Topology) Numa {what}: {k}"
        for i, k in enumerate(nodes)
        for what in ("Node", "Affinity")
    ]
    return f"{' Numa Nodes ':=^90}\n" + "\n".join(lines) + "\n"


SMI = f"{' ROCm System Management Interface ':=^90}\n"
END = f"{' End of ROCm SMI Log ':=^90}\n"

# `rocm-smi --showtopo` in the layout rocm_smi.py prints (ROCm/rocm_smi_lib, python_smi_tools/rocm_smi.py:
# showWeightTopology, showHopsTopology, showTypeTopology, showNumaTopology): two 4-GPU hives joined by
# Infinity Fabric Link bridges (MI100), XGMI one hop within a hive, PCIE (3 hops, through the host) across,
# one hive per NUMA node.
HIVE = [i // 4 for i in range(8)]
TWO_HIVES = (
    SMI
    + block(
        "Weight between two GPUs",
        [["0" if i == j else "15" if HIVE[i] == HIVE[j] else "72" for j in range(8)] for i in range(8)],
    )
    + block(
        "Hops between two GPUs",
        [["0" if i == j else "1" if HIVE[i] == HIVE[j] else "3" for j in range(8)] for i in range(8)],
    )
    + block(
        "Link Type between two GPUs",
        [["0" if i == j else "XGMI" if HIVE[i] == HIVE[j] else "PCIE" for j in range(8)] for i in range(8)],
    )
    + numa(HIVE)
    + END
)

# `rocm-smi --shownodesbw`: the sample of the ROCm release notes (an MI250X node's 8 GCDs, "min-max" MB/s,
# "0-0" not directly connected), with the --showtopo hops and link types of that wiring (every pair XGMI;
# pairs without a direct link are two hops apart through a common neighbour).
NODESBW = "".join(ROCM_NODESBW.splitlines(keepends=True)[1:-1])  # less its banner and footer
MAX_BW = np.array(
    [
        [int(c.split("-")[1]) if "-" in c else 0 for c in line.split()[1:]]
        for line in NODESBW.splitlines()[2:10]
    ]
)
MI250 = (
    SMI
    + block(
        "Hops between two GPUs",
        [["0" if i == j else "1" if MAX_BW[i, j] else "2" for j in range(8)] for i in range(8)],
    )
    + block("Link Type between two GPUs", [["0" if i == j else "XGMI" for j in range(8)] for i in range(8)])
    + numa([0, 0, 1, 1, 2, 2, 3, 3])
    + NODESBW
    + END
)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def line_of(text, start, nth=1):
    """1-based number of the nth line of `text` starting with `start`."""
    hits = [k + 1 for k, line in enumerate(text.splitlines()) if line.startswith(start)]
    return hits[nth - 1]


def xgmi_links(topo):
    return {x.id: x.bandwidth for x in topo.links if topo.kind[x.src] == topo.kind[x.dst] == "gpu"}


def test_two_hives_xgmi_inside_host_across(tmp_path):
    topo = rocm_server(write(tmp_path, "hives.txt", TWO_HIVES))
    assert topo.name == "hives" and topo.gpus() == tuple(f"gpu{i}" for i in range(8))
    links = xgmi_links(topo)
    assert len(links) == 2 * 2 * 6 and set(links.values()) == {50e9}  # both directions of 6 pairs per hive
    assert topo.route("gpu0", "gpu3") == ("gpu0->gpu3",)
    assert topo.route("gpu1", "gpu6") == ("gpu1->rc1", "rc1->cpu0", "cpu0->cpu1", "cpu1->rc6", "rc6->gpu6")
    # a 1 GB copy: the path's latencies, then the bytes at its narrowest link (closed form)
    for src, dst, narrowest, hops in (("gpu0", "gpu3", 50e9, [100e-9]), ("gpu1", "gpu6", 36e9, [500e-9] * 5)):
        flow = netsim.Flow("copy", src, dst, 1e9)
        makespan = netsim.simulate(topo.scenario([flow])).makespan
        assert makespan == pytest.approx(sum(hops) + 1e9 / narrowest, rel=1e-9)


def test_shownodesbw_sets_each_xgmi_cable_and_two_hop_pairs_route_over_xgmi(tmp_path):
    trace = read_trace(write(tmp_path, "mi250.txt", MI250))
    topo = rocm_server(trace, name="mi250x-smi")
    links = xgmi_links(topo)
    expected = {f"gpu{i}->gpu{j}": MAX_BW[i, j] * 1e6 for i in range(8) for j in range(8) if MAX_BW[i, j]}
    assert links == expected and len(links) == 2 * 12  # MI250X's 12 GCD links at 50/100/200 GB/s
    route = topo.route("gpu0", "gpu3")
    assert len(route) == 2 and all(x in links for x in route)  # two XGMI hops, as rocm-smi's Hops say
    assert {topo.route(f"gpu{i}", "rc0")[-2] for i in (1, 2)} != set()  # every GPU still reaches the host
    assert topo.route("gpu2", "cpu0") == ("gpu2->rc2", "rc2->cpu1", "cpu1->cpu0")  # NUMA node 1 for GPU2
    # without --showtopo, the bandwidth matrix alone gives the same cables
    only_bw = rocm_server(write(tmp_path, "bw.txt", SMI + NODESBW + END))
    assert xgmi_links(only_bw) == expected


def test_xgmi_bandwidth_without_shownodesbw_and_figures_checked(tmp_path):
    path = write(tmp_path, "hives.txt", TWO_HIVES)
    assert set(xgmi_links(rocm_server(path, xgmi_bandwidth="100 GB/s")).values()) == {100e9}
    with pytest.raises(ScenarioError, match="xgmi_bandwidth"):
        rocm_server(path, xgmi_bandwidth=-1)


def replace_cell(text, title_nth, row, old, new):
    """`text` with the first `old` after the row label of matrix `title_nth` (1-based) replaced."""
    lines = text.splitlines(keepends=True)
    k = line_of(text, f"GPU{row} ", title_nth) - 1
    label, rest = lines[k][:7], lines[k][7:]
    lines[k] = label + rest.replace(old, new, 1)
    return "".join(lines)


@pytest.mark.parametrize(
    ("text", "nth", "row", "message"),
    [
        # GPU0 -> GPU4 says XGMI, GPU4 -> GPU0 PCIE (the third matrix: Link Type)
        (
            replace_cell(TWO_HIVES, 3, 0, "PCIE", "XGMI"),
            3,
            0,
            r"'Link Type between two GPUs' is not symmetric: "
            r"GPU0 -> GPU4 is 'XGMI', GPU4 -> GPU0 \(line \d+\) is 'PCIE'",
        ),
        # both ways XGMI one hop in the Link Type matrix, but Hops say 3: the XGMI cables cannot reach it in 3
        (
            replace_cell(replace_cell(TWO_HIVES, 3, 0, "PCIE", "XGMI"), 3, 4, "PCIE", "XGMI"),
            2,
            0,
            r"rocm-smi says GPU0 -> GPU4 is XGMI, 3 hop\(s\), but the XGMI links of the one-hop pairs reach it by "
            r"gpu0->rc0",
        ),
        (
            TWO_HIVES.replace("XGMI", "NVLINK"),
            3,
            0,
            r"rocm-smi link type GPU0 -> GPU1 is 'NVLINK'; netsim knows XGMI and PCIE",
        ),
        # --shownodesbw says 0-0 where --showtopo says one XGMI hop
        (
            MI250.replace("GPU0 N/A 50000-200000", "GPU0 N/A 0-0").replace(
                "GPU1 50000-200000 N/A", "GPU1 0-0 N/A"
            ),
            4,  # the Bandwidth matrix's header also starts "GPU0 "
            0,
            r"GPU0 -> GPU1 is XGMI one hop apart \(line \d+\), but rocm-smi --shownodesbw gives it no bandwidth "
            r"\('0-0'\)",
        ),
    ],
)
def test_inconsistent_output_names_the_line(tmp_path, text, nth, row, message):
    with pytest.raises(ScenarioError, match=rf"^topo\.txt:{line_of(text, f'GPU{row} ', nth)}: .*{message}"):
        rocm_server(write(tmp_path, "topo.txt", text))


def test_malformed_or_missing_matrices(tmp_path):
    truncated = "\n".join(TWO_HIVES.splitlines()[:6])  # the Weight matrix stops after 3 of 8 rows
    with pytest.raises(
        TraceError, match=r"^cut\.txt:6: rocm-smi 'Weight between two GPUs' matrix ends after 3 of 8"
    ):
        rocm_server(write(tmp_path, "cut.txt", truncated))
    weights = SMI + TWO_HIVES.split(SMI)[1].split("=" * 33 + " Hops")[0] + END  # --showtopoweight alone
    with pytest.raises(ScenarioError, match=r"^weights\.txt: no rocm-smi 'Link Type between two GPUs'"):
        rocm_server(write(tmp_path, "weights.txt", weights))
    hops = [["0" if i == j else "1" if HIVE[i] == HIVE[j] else "3" for j in range(8)] for i in range(8)]
    four = [["0" if i == j else "XGMI" for j in range(4)] for i in range(4)]
    mixed = SMI + block("Hops between two GPUs", hops) + block("Link Type between two GPUs", four) + END
    at = line_of(mixed, "       GPU0", 2)
    with pytest.raises(
        ScenarioError,
        match=rf"^mixed\.txt:3: rocm-smi 'Hops between two GPUs' has 8 GPUs, 'Link Type between two GPUs' at line {at} has 4",
    ):
        rocm_server(write(tmp_path, "mixed.txt", mixed))
