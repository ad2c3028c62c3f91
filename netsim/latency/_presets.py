"""Router and link presets for the latency model, each with its source.

`booksim`: BookSim2's input-queued virtual-channel router as configured in its src/examples/mesh88_lat
(routing_delay 0, vc_alloc_delay 1, sw_alloc_delay 1, then one cycle of switch traversal: a 3-cycle pipeline;
1-cycle channels; credit_delay 2; 8 VCs of 8 flits; iSLIP allocators, input speedup 2). Its queueing
coefficients are fitted to BookSim2 runs (netsim/data/latency_booksim.json, refit with
`python -m calibrate.latency`; see docs/latency.md).

Link presets describe a packetized link with the per-link field names of netsim's links (`packet_bytes`,
`header_bytes`, `buffer_bytes`, `variability`, `latency` in s, `bandwidth` in bytes/s per direction), from
public figures; fields marked "assumed" are round numbers of the right order, to override when known.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from .._errors import ScenarioError
from ..data import DATA_DIR
from ..kernels.latency import MAX_VCS, Router, erlang_bound

FITTED = "latency_booksim.json"


@dataclasses.dataclass(frozen=True)
class RouterPreset:
    """A router with its channels, in cycles; `clock_hz` turns cycles into seconds (None: cycles only)."""

    name: str
    pipeline: float  # cycles per router a head flit spends (routing + VC allocation + switch allocation + traversal)
    link: float  # cycles per router-to-router channel
    base: float  # cycles outside the hops: injection and ejection channels, the source router, the source queue's cycle
    blocking: float  # fitted: share of a channel lost to head-of-line blocking per unit divergence, x VCs
    overhead: float  # fitted: channel cycles lost per packet (allocation)
    wormhole: float  # fitted: channel cycles held per flit of a packet beyond the next VC buffer
    variability: float  # fitted: squared coefficient of variation of a channel's holding time
    num_vcs: int
    vc_buf_size: int  # flits per VC buffer
    credit_delay: float
    limit: float = math.inf  # most cycles a packet waits at one channel
    clock_hz: float | None = None
    source: str = ""

    def router(self) -> Router:
        """The kernel's parameters."""
        f = lambda x: np.asarray(float(x), dtype=np.float64)  # host arrays: the caller's jit takes them in
        return Router(
            pipeline=f(self.pipeline),
            link=f(self.link),
            base=f(self.base),
            blocking=f(self.blocking),
            vcs=f(self.num_vcs),
            overhead=f(self.overhead),
            buffer=f(self.vc_buf_size),
            credit=f(self.credit_delay),
            wormhole=f(self.wormhole),
            variability=f(self.variability),
            limit=f(self.limit),
            vc_bound=erlang_bound(self.num_vcs),
        )


def _fitted() -> dict:
    return json.loads((DATA_DIR / FITTED).read_text(encoding="utf-8"))


def _check_clock(clock_hz) -> float | None:
    if clock_hz is None:
        return None
    if isinstance(clock_hz, bool) or not isinstance(clock_hz, (int, float)) or not 0 < clock_hz < math.inf:
        raise ScenarioError(f"clock: must be a finite frequency > 0 Hz, got {clock_hz!r}")
    return float(clock_hz)


def booksim(vcs: int | None = None, buffer: int | None = None, clock_hz: float | None = None) -> RouterPreset:
    """BookSim2's mesh88_lat router with the fitted queueing coefficients; `vcs`/`buffer` (flits per VC) as
    BookSim's num_vcs / vc_buf_size (fitted at 8 x 8 and 4 x 8; checked against BookSim2 at 2, 4 and 16
    VCs and 4-flit buffers, docs/latency.md). BookSim2 counts cycles and has no clock, so neither has the
    preset: `clock_hz`, the clock of the router being modelled, turns its cycles into seconds."""
    fit = _fitted()["parameters"]
    for field, value in (("vcs", vcs), ("buffer", buffer)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ScenarioError(f"{field}: must be a whole number >= 1, got {value!r}")
    if vcs is not None and vcs > MAX_VCS:  # the VC wait's Erlang-C recursion is a loop of that length
        raise ScenarioError(f"vcs: at most {MAX_VCS} virtual channels, got {vcs!r}")
    clock_hz = _check_clock(clock_hz)
    return RouterPreset(
        name="booksim",
        pipeline=3.0,
        link=1.0,
        base=fit["base"],
        blocking=fit["blocking"],
        overhead=fit["overhead"],
        wormhole=fit["wormhole"],
        variability=fit["variability"],
        num_vcs=vcs or 8,
        vc_buf_size=buffer or 8,
        credit_delay=2.0,
        clock_hz=clock_hz,
        source="BookSim2 src/examples/mesh88_lat; coefficients fitted to BookSim2 (netsim/data/latency_booksim.json)",
    )


ROUTERS = {"booksim": booksim}


def router_preset(
    name: str, vcs: int | None = None, buffer: int | None = None, clock_hz: float | None = None
) -> RouterPreset:
    if name not in ROUTERS:
        raise ScenarioError(f"router: unknown preset {name!r}; choose one of {', '.join(ROUTERS)}")
    return ROUTERS[name](vcs, buffer, clock_hz)


#: packetized links from public figures, in the per-link fields of netsim's links (SI units)
LINKS: dict[str, dict] = {
    "pcie4-x16": dict(
        bandwidth=16e9 * 16 * 128 / 130 / 8,  # 16 GT/s x 16 lanes, 128b/130b: 31.5 GB/s per direction
        packet_bytes=256,  # max payload size (most servers' setting)
        header_bytes=24
        + 4,  # STP framing 4 + 4DW TLP header 16 + LCRC 4; + ~4 B/TLP of ACK/FC DLLPs (assumed)
        latency=150e-9,  # assumed: one switch or root-port traversal
        buffer_bytes=16 * 1024,  # assumed: posted-write credits of a typical port
        variability=0.0,  # fixed-size TLPs at max payload
        source="PCI Express Base 4.0: 16 GT/s, 128b/130b, TLP = framing + header + payload + LCRC",
    ),
    "pcie5-x16": dict(
        bandwidth=32e9 * 16 * 128 / 130 / 8,  # 63 GB/s per direction
        packet_bytes=256,
        header_bytes=24 + 4,
        latency=150e-9,  # assumed
        buffer_bytes=32 * 1024,  # assumed
        variability=0.0,
        source="PCI Express Base 5.0: 32 GT/s, 128b/130b, same TLP format as 4.0",
    ),
    "ucie-advanced-x64": dict(
        bandwidth=32e9 * 64 / 8,  # 32 GT/s x 64 lanes: 256 GB/s per direction per module
        packet_bytes=64,  # one cache line per transfer (assumed)
        header_bytes=8,  # assumed: flit header + CRC share of a 64 B line
        latency=2e-9,  # UCIe 1.0 target: <= 2 ns Tx + Rx
        buffer_bytes=4096,  # assumed
        variability=0.0,
        source="UCIe 1.0 specification: advanced package, 64 lanes per module, up to 32 GT/s, <= 2 ns latency",
    ),
    "nvlink4": dict(
        bandwidth=25e9,  # per link per direction (H100: 18 links, 900 GB/s both ways)
        packet_bytes=256,  # assumed: max payload per packet
        header_bytes=16,  # assumed: one 16 B header flit
        latency=100e-9,  # assumed: one NVLink hop without a switch
        buffer_bytes=16 * 1024,  # assumed
        variability=0.0,
        source="NVIDIA H100 whitepaper: 18 fourth-generation NVLinks, 900 GB/s total",
    ),
    "infinity-fabric-d2d": dict(
        bandwidth=64e9,  # assumed per die-to-die link and direction (MI300X: 64 GB/s per Infinity Fabric link)
        packet_bytes=64,  # one cache line
        header_bytes=16,  # assumed: request/response header share
        latency=10e-9,  # assumed: on-package die-to-die crossing
        buffer_bytes=2048,  # assumed
        variability=0.0,
        source="AMD Instinct MI300X data sheet: Infinity Fabric links 64 GB/s peak each",
    ),
}


def link_preset(name: str) -> dict:
    if name not in LINKS:
        raise ScenarioError(f"link: unknown preset {name!r}; choose one of {', '.join(LINKS)}")
    return dict(LINKS[name])
