"""Topology builders: chiplet meshes, PCIe servers, cluster fabrics, and their composition.

Every builder returns a `Topology`: directed links, node roles, and the routing the fabric really uses
(XY on meshes, tree paths on PCIe, ECMP on clusters). See docs/topologies.md.
"""

from ._analysis import bisection_bandwidth as bisection_bandwidth
from ._analysis import min_cut as min_cut
from ._cluster import fat_tree as fat_tree
from ._cluster import leaf_spine as leaf_spine
from ._cluster import oversubscription_ratio as oversubscription_ratio
from ._cluster import rail_optimized as rail_optimized
from ._compose import cluster as cluster
from ._compose import with_packages as with_packages
from ._mesh import chiplet_mesh as chiplet_mesh
from ._mesh import chiplet_torus as chiplet_torus
from ._mesh import mi250x as mi250x
from ._mesh import mi250x_node as mi250x_node
from ._mesh import mi300x as mi300x
from ._nvsmi import pcie_server_from_topo as pcie_server_from_topo
from ._nvsmi import server_plan as server_plan
from ._nvswitch import dgx_a100 as dgx_a100
from ._nvswitch import dgx_h100 as dgx_h100
from ._nvswitch import nvswitch_server as nvswitch_server
from ._pcie import SM_HOST_GAIN as SM_HOST_GAIN
from ._pcie import HostStaged as HostStaged
from ._pcie import NcclShm as NcclShm
from ._pcie import PcieRouter as PcieRouter
from ._pcie import ServerPlan as ServerPlan
from ._pcie import Transport as Transport
from ._pcie import build_server as build_server
from ._pcie import dram_latency as dram_latency
from ._pcie import host_gain as host_gain
from ._pcie import latency_gains as latency_gains
from ._pcie import path_kind as path_kind
from ._pcie import pcie_server as pcie_server
from ._pcie import pcie_shared as pcie_shared
from ._pcie import shared_gains as shared_gains
from ._pcie import socket_duplex as socket_duplex
from ._pcie import staging_engines as staging_engines
from ._pcie import with_transport as with_transport
from ._presets import CALIBRATED as CALIBRATED
from ._presets import CLUSTERS as CLUSTERS
from ._presets import PRESETS as PRESETS
from ._presets import base_topology as base_topology
from ._presets import from_calibration as from_calibration
from ._presets import load as load
from ._presets import load_costs as load_costs
from ._presets import pcie_spec as pcie_spec
from ._presets import preset as preset
from ._presets import read_calibration as read_calibration
from ._presets import sized_cluster as sized_cluster
from ._presets import topology_entry as topology_entry
from ._rocm import rocm_server as rocm_server
from ._routers import DimensionOrder as DimensionOrder
from ._routers import Ecmp as Ecmp
from ._routers import Transit as Transit
from ._topology import Router as Router
from ._topology import ShortestPath as ShortestPath
from ._topology import Topology as Topology
from ._topology import cable as cable
from ._topology import link_class as link_class
from ._topology import natural_key as natural_key
