"""Accelerator chiplet networks (ACN): 2-D meshes and tori of dies with XY routing, and package presets.

Node names: compute dies "xcd{i}" (row-major, i = r * cols + c) or "gcd{i}", IO dies "iod{i}", HBM
stacks "hbm{i}", and "host", the package's host-interface port (kind "port"), which composition maps
onto the server's GPU node. Memory traffic (die -> HBM) and die-to-die traffic share the mesh links.

Figures marked "csv row" come from netsim/data/traces/chiplet_and_scaleup_links.csv (row = product,
endpoint_a, endpoint_b). Figures marked "assumed" have no measured or vendor row there; they are
round numbers of the right order that callers should override when they know better.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .._scenario import Link, ScenarioError
from ._common import bandwidth, choice, count, latency
from ._routers import DimensionOrder, Transit
from ._topology import Topology, cable

PORT = "host"  # the package's host interface; composition renames it to the server's GPU node


def _package(
    name: str,
    grid: Sequence[Sequence[str]],
    grid_kind: str,
    torus: bool,
    d2d: tuple[float, float],
    attached: Sequence[tuple[str, str, tuple[str, ...], float, float]],
    workers: Sequence[str],
) -> Topology:
    """A mesh package: `grid` router nodes joined by d2d (bandwidth, latency) cables, plus `attached`
    rows (node, kind, parents, bandwidth, latency), one cable from the node to each parent."""
    rows, cols = len(grid), len(grid[0])
    kind = {n: grid_kind for row in grid for n in row}
    links: list[Link] = []
    for r in range(rows):
        for c in range(cols):
            if c + 1 < cols:
                links += cable(grid[r][c], grid[r][c + 1], *d2d)
            if r + 1 < rows:
                links += cable(grid[r][c], grid[r + 1][c], *d2d)
    if torus:  # wrap links only where they differ from the mesh links (size >= 3)
        if cols >= 3:
            for r in range(rows):
                links += cable(grid[r][cols - 1], grid[r][0], *d2d)
        if rows >= 3:
            for c in range(cols):
                links += cable(grid[rows - 1][c], grid[0][c], *d2d)
    parents = {}
    for node, role, ups, bw, lat in attached:
        kind[node] = role
        parents[node] = ups
        for up in ups:
            links += cable(node, up, bw, lat)
    router = DimensionOrder(tuple(tuple(row) for row in grid), torus, parents)
    return Topology(name, tuple(links), kind, router, tuple(workers))


def chiplet_mesh(
    rows: int,
    cols: int,
    *,
    torus: bool = False,
    d2d_bandwidth="50 GB/s",
    d2d_latency=0.0,
    hbm: str = "per_chiplet",
    hbm_bandwidth="400 GB/s",
    hbm_latency=0.0,
    io_dies: int = 0,
    io_bandwidth="100 GB/s",
    io_latency=0.0,
    host_bandwidth=None,
    host_latency=0.0,
    packets: bool = False,
    name: str | None = None,
) -> Topology:
    """A rows x cols mesh (or torus) of compute chiplets "xcd{r*cols+c}" with XY routing.

    Args:
        rows, cols: grid size (>= 1 each, at least 2 chiplets).
        torus: add wrap-around links (in each dimension of size >= 3).
        d2d_bandwidth: die-to-die link bandwidth per direction (B/s or "50 GB/s"; default: one
            MI250 Infinity Fabric x16 link, csv row "AMD MI250 (CDNA2),GCD,GCD (one IF link)").
        d2d_latency: per link (s).
        hbm: "per_chiplet" (stack hbm{i} on chiplet i), "edges" (one stack per row on the west and east
            edges: hbm{2r} on (r, 0), hbm{2r+1} on (r, cols-1)) or "none".
        hbm_bandwidth: per stack per direction (default assumed: HBM2e-class 400 GB/s).
        io_dies: IO dies "iod{k}" on the north edge, evenly spaced (0 <= io_dies <= cols).
        io_bandwidth: chiplet <-> IO die (default assumed).
        host_bandwidth: when given, add the "host" port (kind "port") linked to every IO die, or to
            xcd0 when there are none (PCIe / host link per direction).
        packets: give the on-package links (all but the host port's) the presets' packet parameters
            (`ON_PACKAGE`: 64 B packets, 4 KiB buffers), so small transfers queue behind load. Off by
            default, as the latencies are 0 by default: a generic mesh for bandwidth studies, whose
            closed forms (bisection bounds, all-to-all times) hold exactly; `mi300x` and `mi250x` carry
            figures.

    Returns:
        A Topology whose gpus() are the chiplets in row-major order.
    """
    rows, cols = count(rows, "rows"), count(cols, "cols")
    if rows * cols < 2:
        raise ScenarioError(f"chiplet_mesh: needs at least 2 chiplets, got rows={rows}, cols={cols}")
    if not isinstance(torus, bool):
        raise ScenarioError(f"torus: expected True or False, got {torus!r}")
    d2d = (bandwidth(d2d_bandwidth, "d2d_bandwidth"), latency(d2d_latency, "d2d_latency"))
    choice(hbm, "hbm", ("per_chiplet", "edges", "none"))
    io_dies = count(io_dies, "io_dies", minimum=0)
    if io_dies > cols:
        raise ScenarioError(f"io_dies: at most cols={cols} IO dies fit on the north edge, got {io_dies}")
    grid = [[f"xcd{r * cols + c}" for c in range(cols)] for r in range(rows)]
    attached = []
    if hbm != "none":
        mem = (bandwidth(hbm_bandwidth, "hbm_bandwidth"), latency(hbm_latency, "hbm_latency"))
        sites = (
            [n for row in grid for n in row]
            if hbm == "per_chiplet"
            else [grid[r][c] for r in range(rows) for c in (0, cols - 1)]
        )
        attached += [(f"hbm{i}", "hbm", (site,), *mem) for i, site in enumerate(sites)]
    if io_dies:
        io = (bandwidth(io_bandwidth, "io_bandwidth"), latency(io_latency, "io_latency"))
        attached += [
            (f"iod{k}", "iod", (grid[0][(2 * k + 1) * cols // (2 * io_dies)],), *io) for k in range(io_dies)
        ]
    if host_bandwidth is not None:
        host = (bandwidth(host_bandwidth, "host_bandwidth"), latency(host_latency, "host_latency"))
        ups = tuple(f"iod{k}" for k in range(io_dies)) or ("xcd0",)
        attached.append((PORT, "port", ups, *host))
    shape = "torus" if torus else "mesh"
    workers = [n for row in grid for n in row]
    topo = _package(name or f"{shape}{rows}x{cols}", grid, "xcd", torus, d2d, attached, workers)
    return _with_packets(topo, packets, {PORT})


def chiplet_torus(rows: int, cols: int, **kwargs) -> Topology:
    """`chiplet_mesh(rows, cols, torus=True, **kwargs)`."""
    return chiplet_mesh(rows, cols, torus=True, **kwargs)


#: Packet parameters of the presets' on-package links (Infinity Fabric, die to die and to HBM): 64-byte
#: packets (a cache line, the unit a memory read returns), no header counted on top (the cited bandwidths
#: are taken as payload rates), 4 KiB of buffer per link (64 packets, assumed) and M/D/1 service. A
#: small read that meets background traffic waits for the packets queued ahead of it (docs/queueing.md):
#: at most 4 KiB / bandwidth per hop, 6 ns on an MI300X HBM stack.
ON_PACKAGE = {"packet_bytes": 64.0, "header_bytes": 0.0, "buffer_bytes": 4096.0}


def _with_packets(topo: Topology, packets: bool, off_package: set[str]) -> Topology:
    """`topo` with ON_PACKAGE packets on every link not touching the `off_package` nodes (when `packets`)."""
    if not packets:
        return topo
    links = tuple(
        x if {x.src, x.dst} & off_package else dataclasses.replace(x, **ON_PACKAGE) for x in topo.links
    )
    return dataclasses.replace(topo, links=links)


def _latencies(latency_d2d, **given) -> dict[str, float]:
    """A preset's latencies by link role (`given[role]` checked as `{role}_latency`), or all of them
    `latency_d2d` when it is given."""
    lats = {role: latency(v, f"{role}_latency") for role, v in given.items()}
    return lats if latency_d2d is None else dict.fromkeys(lats, latency(latency_d2d, "latency_d2d"))


def mi300x(
    *,
    xcd_bandwidth="2 TB/s",
    iod_bandwidth="1.2 TB/s",
    hbm_bandwidth="662.5 GB/s",
    host_bandwidth="64 GB/s",
    xcd_latency="5 ns",
    iod_latency="30 ns",
    hbm_latency="100 ns",
    host_latency=0.0,
    latency_d2d=None,
    packets: bool = True,
    name: str = "mi300x",
) -> Topology:
    """An MI300X-like package: 4 IO dies in a 2 x 2 mesh (XY routing), 2 XCDs and 2 HBM3 stacks per IO die.

    iod{k} sits at row k // 2, column k % 2; xcd{2k}, xcd{2k+1}, hbm{2k}, hbm{2k+1} hang off iod{k}.
    Compute traffic to a remote HBM stack crosses the IO-die mesh, where it shares links with XCD-to-XCD
    traffic. The host port links to every IO die: MI300X's eight x16 external links (seven Infinity Fabric
    links to peer GPUs, one PCIe link to the host) sit two per IO die, so traffic from outside the package
    enters at the die that owns the link it arrives on, not all at one die; with one port for all of them,
    a route enters at the die nearest its destination (host -> xcd5 through iod2). Each port link carries
    `host_bandwidth`, one x16 link.

    Args:
        xcd_bandwidth: XCD <-> its IO die per direction (assumed: the XCDs are stacked on the IO dies;
            no measured row in the csv).
        iod_bandwidth: IO die <-> IO die per direction (assumed; no row in the csv).
        hbm_bandwidth: per HBM3 stack per direction: the 5.3 TB/s vendor aggregate / 8 stacks (not in
            the csv; AMD MI300X datasheet figure).
        host_bandwidth: per IO die, per direction: one x16 link, csv row "AMD MI300X platform,GPU,GPU (one
            xGMI link)" (64 GB/s spec; the derated figure in row "AMD MI300X / MI300A" is 48).
        xcd_latency: XCD <-> IO die, one way (assumed: one fabric hop across a hybrid-bonded 3-D stack).
        hbm_latency: IO die <-> HBM stack, one way: the memory controller, PHY and DRAM access (assumed;
            a read pays it twice with the request, so 2 x (5 + 100) ns = 210 ns to a local stack).
        iod_latency: IO die <-> IO die, one way: 30 ns, sized so that a read interleaved over all eight
            stacks (NPS1: on average one IO-die hop each way) takes 1.3 x a local read, the NPS1 / NPS4 HBM
            latency ratio of up to 1.31 measured with pointer chasing on MI300X (Tee et al., "The MALL is
            Open: Exploring Shared Caches and Latency in AMD CDNA 3 GPUs", SC25 workshops).
        host_latency: the host port links (default 0: the server's own links carry the off-package latency
            when the package is composed into a server).
        latency_d2d: when given, the latency of every link (s), overriding the four above (as before
            these existed; 0 gives the bandwidth-only package).
        packets: give the on-package links packet parameters (`ON_PACKAGE`), so that small transfers queue
            behind background load; False: fluid links (the package before load-dependent latency).
    """
    lats = _latencies(latency_d2d, xcd=xcd_latency, iod=iod_latency, hbm=hbm_latency, host=host_latency)
    xcd = bandwidth(xcd_bandwidth, "xcd_bandwidth")
    grid = [["iod0", "iod1"], ["iod2", "iod3"]]
    attached = [(f"xcd{i}", "xcd", (f"iod{i // 2}",), xcd, lats["xcd"]) for i in range(8)]
    attached += [
        (f"hbm{i}", "hbm", (f"iod{i // 2}",), bandwidth(hbm_bandwidth, "hbm_bandwidth"), lats["hbm"])
        for i in range(8)
    ]
    ios = tuple(f"iod{k}" for k in range(4))
    attached.append((PORT, "port", ios, bandwidth(host_bandwidth, "host_bandwidth"), lats["host"]))
    d2d = (bandwidth(iod_bandwidth, "iod_bandwidth"), lats["iod"])
    topo = _package(name, grid, "iod", False, d2d, attached, [f"xcd{i}" for i in range(8)])
    return _with_packets(topo, packets, {PORT})


def mi250x(
    *,
    gcd_bandwidth="200 GB/s",
    hbm_bandwidth="409.6 GB/s",
    host_bandwidth="36 GB/s",
    gcd_latency="100 ns",
    hbm_latency="100 ns",
    host_latency=0.0,
    latency_d2d=None,
    packets: bool = True,
    name: str = "mi250x",
) -> Topology:
    """An MI250X-like package: two GCDs joined by 4 Infinity Fabric links, 4 HBM2e stacks per GCD.

    gcd0 holds hbm0-3, gcd1 hbm4-7; each GCD has its own host link to the "host" port (as on Frontier).

    Args:
        gcd_bandwidth: GCD <-> GCD per direction: csv row "AMD MI250X (Frontier node),GCD,GCD (same
            MI250X package)" = 200 GB/s (= 4 x 50 GB/s links, row "AMD MI250 (CDNA2),GCD,GCD (one IF link)").
        hbm_bandwidth: per HBM2e stack (assumed: 3.2 Gb/s x 1024 bits; not in the csv).
        host_bandwidth: per GCD per direction: csv row "AMD MI250X (Frontier node),CPU (EPYC),GCD" = 36+36.
        gcd_latency: GCD <-> GCD, one way (assumed: the GCDs are separate dies joined by SerDes Infinity
            Fabric links, as between packages, so a hop costs more than MI300X's interposer hops).
        hbm_latency: GCD <-> HBM stack, one way (assumed, as mi300x's).
        host_latency: the host links (default 0, as mi300x's).
        latency_d2d: when given, the latency of every link (s), overriding the three above.
        packets: give the GCD <-> GCD and HBM links packet parameters (`ON_PACKAGE`).
    """
    lats = _latencies(latency_d2d, gcd=gcd_latency, hbm=hbm_latency, host=host_latency)
    mem = bandwidth(hbm_bandwidth, "hbm_bandwidth")
    attached = [(f"hbm{i}", "hbm", (f"gcd{i // 4}",), mem, lats["hbm"]) for i in range(8)]
    attached.append(
        (PORT, "port", ("gcd0", "gcd1"), bandwidth(host_bandwidth, "host_bandwidth"), lats["host"])
    )
    d2d = (bandwidth(gcd_bandwidth, "gcd_bandwidth"), lats["gcd"])
    topo = _package(name, [["gcd0", "gcd1"]], "gcd", False, d2d, attached, ["gcd0", "gcd1"])
    return _with_packets(topo, packets, {PORT})


def mi250x_node(
    packages: int = 4,
    *,
    near_bandwidth="100 GB/s",
    far_bandwidth="50 GB/s",
    name: str | None = None,
    **package_kwargs,
) -> Topology:
    """Several MI250X-like packages joined die to die, shaped like a Frontier node (not its exact wiring).

    Package i's dies are "p{i}/gcd0", "p{i}/gcd1" (its HBM "p{i}/hbm{j}", port "p{i}/host"). Packages form a
    ring, p{i}/gcd1 <-> p{i+1}/gcd0 at `near_bandwidth` (2 IF links); with 4 or more packages, chords
    p{i}/gcd0 <-> p{i+n/2}/gcd1 at `far_bandwidth` (1 link). Both figures: csv row "AMD MI250X (Frontier
    node),GCD,GCD (different MI250X)" = 50-100 GB/s, with the package's GCD <-> GCD latency. Routes take the least-latency, then fewest-hop path through dies (ties:
    first listed link), so in-package traffic keeps the 200 GB/s link.
    """
    packages = count(packages, "packages", minimum=2)
    near, far = bandwidth(near_bandwidth, "near_bandwidth"), bandwidth(far_bandwidth, "far_bandwidth")
    one = mi250x(**package_kwargs)
    links: list[Link] = []
    kind: dict[str, str] = {}
    for i in range(packages):
        p = lambda n, i=i: f"p{i}/{n}"
        kind.update({p(n): k for n, k in one.kind.items()})
        links += [
            dataclasses.replace(x, id=f"{p(x.src)}->{p(x.dst)}", src=p(x.src), dst=p(x.dst))
            for x in one.links
        ]
    hop = one.link["gcd0->gcd1"].latency  # the same Infinity Fabric links as inside a package
    ring = range(packages if packages > 2 else 1)  # two packages: one ring cable, not two in parallel
    for i in ring:
        links += cable(f"p{i}/gcd1", f"p{(i + 1) % packages}/gcd0", near, hop)
    if packages >= 4:
        for i in range(packages // 2):
            links += cable(f"p{i}/gcd0", f"p{i + packages // 2}/gcd1", far, hop)
    workers = tuple(f"p{i}/gcd{g}" for i in range(packages) for g in (0, 1))
    return Topology(name or f"mi250x_x{packages}", tuple(links), kind, Transit(frozenset({"gcd"})), workers)
