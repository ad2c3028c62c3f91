"""Bad arguments to the topology builders and `load` specs: each is refused with a public ScenarioError that
names the field (and the spec) and shows the value the caller gave."""

import re

import pytest

from netsim import ScenarioError
from netsim.topology import dgx_a100, dgx_h100, load, pcie_server_from_topo, sized_cluster, socket_duplex


@pytest.mark.parametrize("gpus", [-8, 0, 2.5, "16"])
def test_sized_cluster_shows_the_gpu_count_given(gpus):
    with pytest.raises(ScenarioError, match=rf"^gpus: expected an integer >= 1, got {gpus!r}$"):
        sized_cluster("dgx-a100", gpus)


@pytest.mark.parametrize("build", [dgx_a100, dgx_h100])
@pytest.mark.parametrize("nodes", [1, 2])
def test_dgx_nic_bandwidth_is_checked_whatever_the_node_count(build, nodes):
    with pytest.raises(ScenarioError, match=r"^nic_bandwidth: must be a finite number, got nan$"):
        build(nodes, nic_bandwidth=float("nan"))
    with pytest.raises(ScenarioError, match=r"^nic_bandwidth: must be > 0, got '-1 GB/s'$"):
        build(nodes, nic_bandwidth="-1 GB/s")


def test_dgx_name_applies_to_one_node_too():
    assert dgx_a100(1, name="rack").name == "rack"
    assert dgx_a100(1).name == "dgx-a100"
    assert dgx_h100(2, name="pod").name == "pod"


@pytest.mark.parametrize("share", [5, 0, -0.5, float("nan"), True, "0.9"])
def test_socket_duplex_share_lies_in_0_1(share):
    topo = load("pcie:8,sockets=2")
    with pytest.raises(ScenarioError, match=r"^share: must be in \(0, 1\], got "):
        socket_duplex(topo, share=share)
    assert socket_duplex(topo, share=1) and socket_duplex(topo, share=0.5)


def test_pcie_server_from_topo_raises_the_public_error_with_the_line():
    text = "GPU0 GPU1\nGPU0 X PIX\nGPU1 PIX Y\n"
    with pytest.raises(ScenarioError, match=r"^nvidia-smi topo line 3: GPU1 to itself is 'Y'") as e:
        pcie_server_from_topo(text)
    assert type(e.value) is ScenarioError  # not the parser's private subclass


@pytest.mark.parametrize(
    "spec, message",
    [
        ("pcie:0", r"^topology: 'pcie:0': gpus: expected an integer >= 1, got 0$"),
        ("pcie:4,sockets=0", r"^topology: 'pcie:4,sockets=0': sockets: expected an integer >= 1, got 0$"),
        ("fat-tree:3", r"^topology: 'fat-tree:3': k: a k-ary fat-tree needs an even k, got 3$"),
        ("leaf-spine:2,1,2/pcie:0", r"^topology: 'leaf-spine:2,1,2/pcie:0': 'pcie:0': gpus: .* got 0$"),
    ],
)
def test_load_spec_errors_name_the_spec(spec, message):
    with pytest.raises(ScenarioError, match=message):
        load(spec)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(share=float("nan")), "staging_engines: share: must be a finite number, got nan"),
        (dict(share=-1.0), "staging_engines: share: must be > 0, got -1.0"),
        (dict(capacity=0.0), "staging_engines: capacity: must be > 0, got 0.0"),
    ],
)
def test_staging_engines_name_their_own_arguments(kw, message):
    # before, a NaN share surfaced as a SharedResource's capacity; shares above 1 stay valid (default 1.07)
    from netsim.topology import preset, staging_engines

    with pytest.raises(ScenarioError, match=re.escape(message)):
        staging_engines(preset("pcie-8gpu"), **kw)
    assert staging_engines(preset("pcie-8gpu"), capacity="12 GB/s")[0].capacity == 12e9
