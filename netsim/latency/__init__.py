"""Cycle-approximate latency under load: open-loop load-latency curves of packet networks.

    curve = netsim.latency.latency_curve("mesh:8x8", "uniform", packet_size=4, rates=[0.01, 0.05, 0.1])
    curve.latency, curve.accepted, curve.saturation      # cycles; packets per node per cycle

Shapes are BookSim2's k-ary n-cubes (`mesh:KxK`, `torus:KxK`, dimension-order routing), patterns its
synthetic traffic (`PATTERNS`), routers its input-queued router (`booksim`, calibrated against BookSim2).
The numerics are netsim.kernels.latency; see docs/latency.md.
"""

from ._curve import LatencyCurve as LatencyCurve
from ._curve import latency_curve as latency_curve
from ._curve import latency_curves as latency_curves
from ._model import Load as Load
from ._model import cube_load as cube_load
from ._model import curves as curves
from ._model import shape_load as shape_load
from ._model import stack_feeds as stack_feeds
from ._model import stack_sources as stack_sources
from ._presets import LINKS as LINKS
from ._presets import ROUTERS as ROUTERS
from ._presets import RouterPreset as RouterPreset
from ._presets import booksim as booksim
from ._presets import link_preset as link_preset
from ._presets import router_preset as router_preset
from ._shapes import MAX_NODES as MAX_NODES
from ._shapes import Cube as Cube
from ._shapes import parse_shape as parse_shape
from ._topology import topology_load as topology_load
from ._traffic import PATTERNS as PATTERNS
from ._traffic import parse_pattern as parse_pattern
from ._traffic import traffic_matrix as traffic_matrix
