"""Held-out predictions: fit on one mode of a machine, predict another without refitting.

    python benchmarks/heldout.py            # ~6-7 min on 2 busy CPU cores; progress on stderr, tables on stdout

Transports come from netsim.calibrate.transport (P2P, cudaMemcpy host staging, NCCL SHM); capacities
and software costs (`netsim.CostModel`'s formula) are fitted with optax through `netsim.vmap_run`. Each row gives the
in-sample error on the fitting data and the held-out error on data the fit never saw, beside a simple
baseline (an alpha-beta fit on the same fitting data, or the plain uncalibrated topology). Errors are
relative errors of bandwidth (busbw for collectives). See docs/heldout.md.
"""

from __future__ import annotations

import dataclasses
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
import optax
from netsim.calibrate import transport as T

import netsim
from netsim.data import trace_path
from netsim.traces import read_trace
from netsim.workloads import allreduce

GB = 1e9
COPY = 4e7  # p2pBandwidthLatencyTest: 10,000,000 ints per copy
#: one padded shape per kind, so that every machine's fits share two compiles
COPY_SHAPE = netsim.Shape(items=2, hops=16, after=1, resources=128)
COLL_SHAPE = netsim.Shape(items=128, hops=16, after=2, resources=128)
COPY_WIDTH, COLL_WIDTH = 128, 32  # points per batch, padded with zero-weight copies of the last
#: fitted quantities: link and budget classes first, then software (per-step overhead and payload
#: efficiency of NCCL's LL and Simple protocols, blended at a hand-over size in bytes per step)
NAMES = (
    "pcie",
    "socket",
    "nvlink",
    "socket duplex",
    "staging",
    "hairpin",
    "staged inflation",  # host-staged copies carry bytes x (1 + this): efficiency 1 / (1 + this)
    "overhead LL",
    "overhead Simple",
    "inefficiency LL",
    "inefficiency Simple",
    "hand-over",
)
WIDTH = 0.5  # hand-over width, in log(bytes)
T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f} s] {msg}", file=sys.stderr, flush=True)


def trace(name: str):
    return read_trace(trace_path(name))


# --- parameters -----------------------------------------------------------------------------------


def initial(**values) -> np.ndarray:
    """log-parameters: link figures default to the m01 preset's, software to NCCL-like values."""
    v = dict(
        pcie=25.8 * GB,
        socket=21.9 * GB,
        nvlink=275 / 12 * GB,
        **{"socket duplex": 40 * GB},
        staging=20 * GB,
        hairpin=10 * GB,
        **{
            "staged inflation": 0.2,
            "overhead LL": 2e-6,
            "overhead Simple": 5e-6,
            "inefficiency LL": np.log(2.0),
            "inefficiency Simple": 0.02,
            "hand-over": 65536.0,
        },
    )
    v.update({k.replace("_", " "): x for k, x in values.items()})
    return np.log(np.array([v[n] for n in NAMES], float))


def classify(topo, rid: str) -> str | None:
    """The fitted class of a resource id (a link or a shared budget), None for fixed ones (DRAM, NUMA)."""
    if rid.endswith(" staging"):
        return "staging"
    if rid.endswith(" hairpin"):
        return "hairpin"
    if rid.endswith(" dram"):
        return None
    if "<->" in rid:
        return "socket duplex"
    link = topo.link[rid]
    ends = {topo.kind[link.src], topo.kind[link.dst]}
    if ends == {"gpu"}:
        return "nvlink"
    if "mem" in ends or ends == {"cpu", "socket"}:
        return None
    if ends == {"socket"} or ends == {"cpu"}:
        return "socket" if topo.router.p2p else None  # socket-host: held at the builder's figure
    return "pcie"


def host_side(topo):
    """The preset's P2P-off twin, where host-memory traffic crosses sockets at the socket fabric's
    figure (link class socket-host), not at the figure fitted on P2P copies."""
    return netsim.topology.preset(topo.name, p2p=False)


@dataclasses.dataclass
class Data:
    """A batch of measured points on one topology, laid out for the engine."""

    name: str
    network: netsim.kernels.Network  # shared by every point: capacities before fitting
    program: netsim.kernels.Program  # [B, ...]
    cls: np.ndarray  # [R] index into NAMES, -1 fixed
    moved: np.ndarray  # [B] bytes per point (busbw factor x size for collectives)
    measured: np.ndarray  # [B] s
    step: np.ndarray  # [B] bytes per collective step; 0 for copies (no software model)
    staged: np.ndarray  # [B] 1 for cudaMemcpy host-staged copies (they carry bytes x staged inflation)
    weight: np.ndarray  # [B] 1 for real points, 0 for padding
    labels: tuple

    @property
    def n(self) -> int:
        return len(self.labels)

    def bandwidth(self, times) -> np.ndarray:
        return self.moved[: self.n] / np.asarray(times)[: self.n]


def lay_out(
    name,
    topo,
    scenarios,
    measured,
    moved,
    *,
    step=None,
    labels=None,
    fixed=False,
    staged=False,
    own_budgets=False,
) -> Data:
    """Scenarios of one resource layout as one padded batch. fixed: every capacity stays the
    topology's own (the plain, uncalibrated baseline); else resources of a fitted class (`classify`:
    resource id -> class in NAMES, None for fixed) take theta. own_budgets: the host budgets keep the
    scenarios' capacities (`shm_scenario` sets them from a fitted H, x SM_HOST_GAIN)."""
    shape, width = (COLL_SHAPE, COLL_WIDTH) if step is not None else (COPY_SHAPE, COPY_WIDTH)
    batch = netsim.compile_batch(scenarios, shape=shape)
    first = batch.compiled[0].scenario
    ids = [x.id for x in first.links] + [r.id for r in first.shared]
    for c in batch.compiled:  # one resource layout for the whole batch: capacities are shared
        assert [x.id for x in c.scenario.links] + [r.id for r in c.scenario.shared] == ids, name
    cls = np.full(batch.shape.resources, -1, np.int32)
    for j, rid in enumerate(ids):
        k = None if fixed or (own_budgets and rid.endswith(" staging")) else classify(topo, rid)
        cls[j] = -1 if k is None else NAMES.index(k)
    n, b = len(scenarios), max(width, len(scenarios))
    pad = lambda x: np.concatenate([x, np.repeat(x[-1:], b - n, axis=0)]) if b > n else x
    program = jax.tree.map(pad, batch.program)
    network = jax.tree.map(lambda x: x[0], batch.network)
    step = np.zeros(n) if step is None else np.asarray(step, float)
    return Data(
        name,
        network,
        program,
        cls,
        pad(np.asarray(moved, float)),
        pad(np.asarray(measured, float)),
        pad(step),
        np.full(b, float(staged)),
        np.r_[np.ones(n), np.zeros(b - n)],
        tuple(labels or range(n)),
    )


def costs(theta) -> netsim.CostModel:
    """The software costs of log-parameters theta in netsim.CostModel, the one formula netsim's
    calibration fits: NCCL's LL and Simple regimes, blended at the hand-over; copies pay no overhead,
    and host-staged ones carry bytes x (1 + staged inflation)."""
    i = {n: k for k, n in enumerate(NAMES)}
    pick = lambda *names: theta[jnp.asarray([i[n] for n in names])]
    return netsim.CostModel(
        log_overhead=pick("overhead LL", "overhead Simple"),
        log_inefficiency=pick("inefficiency LL", "inefficiency Simple"),
        log_threshold=pick("hand-over"),
        log_width=jnp.log(WIDTH),
        log_launch=jnp.asarray(-jnp.inf),  # exp(-inf): no launch cost, no copy overheads
        log_copy_overhead=jnp.asarray(-jnp.inf),
        log_staged_overhead=jnp.asarray(-jnp.inf),
        # the staged factor is exp(exp(this)) = 1 + inflation
        log_staged_inefficiency=jnp.log(jnp.log1p(jnp.exp(theta[i["staged inflation"]]))),
    )


def _times(theta, network, program, cls, step, staged):
    """Simulated time of every point under log-parameters theta (jit-compiled once per shape)."""
    cap = jnp.where(cls >= 0, jnp.exp(theta[jnp.maximum(cls, 0)]), network.capacity)
    # collectives pay their step's overhead and carry bytes / efficiency; copies carry the staged factor
    overhead, inflate = costs(theta).flow_costs(step, (step > 0).astype(step.dtype), staged > 0)
    real = program.route[:, :, 0] < cls.shape[0]  # [B, F]: padded items have no hops
    prog = netsim.kernels.Program(
        program.route,
        program.size * inflate[:, None],
        program.release,
        jnp.where(real, program.overhead + overhead[:, None], 0.0),
        program.after,
    )
    s = netsim.vmap_run(
        netsim.kernels.Network(cap, network.latency), prog, max_events=program.size.shape[1] * 2 + 16
    )
    return jnp.max(jnp.where(real, s.finish, 0.0), axis=1)


times_jit = jax.jit(_times)


def _loss(theta, data_arrays):
    total = 0.0
    for network, program, cls, step, staged, measured, weight in data_arrays:
        t = _times(theta, network, program, cls, step, staged)
        total = total + jnp.sum(weight * (jnp.log(t) - jnp.log(measured)) ** 2) / jnp.sum(weight)
    return total / len(data_arrays)


def arrays(d: Data):
    return (
        d.network,
        d.program,
        jnp.asarray(d.cls),
        jnp.asarray(d.step),
        jnp.asarray(d.staged),
        jnp.asarray(d.measured),
        jnp.asarray(d.weight),
    )


OPT = optax.adam(0.05)
FITTED: list[tuple[str, dict[str, float]]] = []  # (first dataset, {name: value}) per fit, in order


@jax.jit
def _fit_step(free, state, base, index, data):
    loss_of = lambda f: _loss(base.at[index].set(f), data)
    loss, grad = loss_of(free), jax.jacfwd(loss_of)(free)  # forward mode: one pass per free parameter
    updates, state = OPT.update(grad, state, free)
    return optax.apply_updates(free, updates), state, loss


def fit(theta0: np.ndarray, free: tuple[str, ...], datasets: list[Data], *, steps: int = 150) -> np.ndarray:
    """Adam on the `free` log-parameters, the others held at theta0. `_fit_step` is jitted once at
    module level: one compile per (number of free parameters, dataset shapes)."""
    index = jnp.asarray([NAMES.index(n) for n in free])
    data = [arrays(d) for d in datasets]
    base = jnp.asarray(theta0)
    x = base[index]
    state = OPT.init(x)
    with jax.numpy_dtype_promotion("standard"):
        for k in range(steps):
            x, state, loss = _fit_step(x, state, base, index, data)
            if k % 50 == 0 or k == steps - 1:
                log(f"  step {k:3d}  loss {float(loss):.2e}")
    theta = np.asarray(base.at[index].set(x))
    FITTED.append((datasets[0].name, {n: float(np.exp(theta[NAMES.index(n)])) for n in free}))
    return theta


def predict(theta, d: Data) -> np.ndarray:
    return np.asarray(
        times_jit(
            jnp.asarray(theta),
            d.network,
            d.program,
            jnp.asarray(d.cls),
            jnp.asarray(d.step),
            jnp.asarray(d.staged),
        )
    )


def errors(theta, d: Data) -> np.ndarray:
    """Relative bandwidth errors per point (predicted / measured - 1)."""
    return d.bandwidth(predict(theta, d)) / d.bandwidth(d.measured) - 1


def errors_of(theta, datasets) -> np.ndarray:
    """`errors` of several datasets, one after the other."""
    return np.concatenate([errors(theta, d) for d in datasets])


# --- measured data as scenarios -----------------------------------------------------------------------


def matrix_data(name, topo, values, kind, transport, *, rows=None, extra=()) -> Data:
    """Cells of a p2pBandwidthLatencyTest bandwidth matrix (bytes/s) as copy scenarios under `transport`
    ("p2p", "staged" on the P2P-off twin, or "plain": the topology's own routes, no budgets)."""
    topo = host_side(topo) if transport == "staged" else topo
    gpus = topo.gpus()
    scenarios, measured, moved, labels = [], [], [], []
    for i in range(values.shape[0]) if rows is None else rows:
        for j in range(values.shape[0]):
            if i == j:
                continue
            pairs = [(gpus[i], gpus[j])] + ([(gpus[j], gpus[i])] if kind == "bidirectional" else [])
            work = T.copies(pairs, COPY)
            if transport == "p2p":
                s = T.p2p_scenario(topo, work, shared=T.duplex_budgets(topo, 40 * GB))
            elif transport == "staged":
                s = T.staged_scenario(topo, work, staging=20 * GB, shared=extra)
            else:
                s = work.scenario(topo)
            scenarios.append(s)
            moved.append(COPY * len(pairs))
            measured.append(COPY * len(pairs) / values[i, j])
            labels.append(f"{kind[:3]} {i}->{j}")
    return lay_out(
        name,
        topo,
        scenarios,
        measured,
        moved,
        labels=labels,
        fixed=transport == "plain",
        staged=transport == "staged",
    )


#: the two p2pBandwidthLatencyTest bandwidth matrices of a trace
KINDS = ("unidirectional", "bidirectional")


def matrices(name, topo, tr, p2p, transport) -> list[Data]:
    """`matrix_data` of both KINDS of `tr`'s P2P-on or P2P-off matrices, named f"{name} {kind}"."""
    return [matrix_data(f"{name} {k}", topo, tr.matrix(k, p2p=p2p).values, k, transport) for k in KINDS]


def allreduce_data(name, topo, ranks, sizes, times, transport, *, host=None) -> Data:
    """nccl-tests all_reduce points (sizes in bytes, times in s) as ring scenarios ("p2p", "shm" on the
    P2P-off twin, or "plain")."""
    topo = host_side(topo) if transport == "shm" else topo
    n = len(ranks)
    factor = 2 * (n - 1) / n
    scenarios = []
    for s in sizes:
        work = allreduce(list(ranks), float(s)).workload
        if transport == "p2p":
            scenarios.append(T.p2p_scenario(topo, work, shared=T.duplex_budgets(topo, 40 * GB)))
        elif transport == "shm":
            scenarios.append(T.shm_scenario(topo, work, host=host))
        else:
            scenarios.append(work.scenario(topo))
    sizes = np.asarray(sizes, float)
    return lay_out(
        name,
        topo,
        scenarios,
        np.asarray(times, float),
        factor * sizes,
        step=sizes / n,
        labels=tuple(int(s) for s in sizes),
        fixed=transport == "plain",
        own_budgets=transport == "shm",
    )


def table(nccl):
    """Sizes (bytes) and out-of-place times (s) of the usable rows (busbw is printed too coarsely)."""
    ok = nccl.usable[:, 0]
    return nccl.size[ok].astype(float), nccl.column("time")[ok]


def alpha_beta(sizes, times, factor):
    """t = a + S / b by least squares on relative error; returns S -> predicted busbw."""
    (a, x), *_ = np.linalg.lstsq(np.c_[1 / times, sizes / times], np.ones_like(times), rcond=None)
    return lambda s: factor * s / (a + s * x)


def stats(err) -> str:
    err = np.abs(np.asarray(err))
    return f"{100 * err.mean():5.1f} / {100 * err.max():5.1f}" if err.size else "   -  /   -  "


ROWS: list[tuple[str, str, str, str, str]] = []


def row(case, fit_on, predicted, ins, held, base, note="", labels=()):
    """One table row; `labels` name the held-out points, to report the worst one."""
    held = np.asarray(held)
    if len(labels) and held.size:
        k = int(np.argmax(np.abs(held)))
        note = f"{note}; worst held-out: {labels[k]} ({100 * held[k]:+.0f} %)".lstrip("; ")
    ROWS.append(
        (case, fit_on, predicted, stats(ins), stats(held), stats(base) if base is not None else "-", note)
    )


# --- the machines ---------------------------------------------------------------------------------------


def m01():
    log("m01: 8 x RTX 4090, 2 x EPYC 7542")
    topo = netsim.topology.preset("rtx4090-8x-epyc7542")
    on, off = (
        trace("m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_on.txt"),
        trace("m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_off.txt"),
    )
    copies_on = matrices("m01 on", topo, on, True, "p2p")
    log("m01: fit links on the P2P-on matrices")
    theta = fit(initial(), ("pcie", "socket", "socket duplex"), copies_on)
    off_uni = matrix_data(
        "m01 off uni", topo, off.matrix("unidirectional", p2p=False).values, "unidirectional", "staged"
    )
    off_bi = matrix_data(
        "m01 off bi", topo, off.matrix("bidirectional", p2p=False).values, "bidirectional", "staged"
    )
    log("m01: fit the per-GPU host budget and the staging pipeline's efficiency on the P2P-off matrices")
    # along e x H the loss is nearly flat: two starts (as netsim.calibrate does), keep the better
    second = theta.copy()
    second[NAMES.index("staging")], second[NAMES.index("staged inflation")] = (
        np.log(28 * GB),
        np.log(1 / 0.75 - 1),
    )
    fits = [
        fit(start, ("staging", "staged inflation"), [off_uni, off_bi], steps=300) for start in (theta, second)
    ]
    k = int(np.argmin([np.mean(errors_of(th, [off_uni, off_bi]) ** 2) for th in fits]))
    log(f"m01: the start at {'e = 0.75' if k else 'the P2P-on fit'} fits better; kept")
    theta = fits[k]
    del FITTED[len(FITTED) - 1 - k]  # the other start's record
    plain_off = netsim.topology.preset("rtx4090-8x-epyc7542", p2p=False)
    base = matrices("m01 plain", plain_off, off, False, "plain")
    row(
        "m01 copies",
        "P2P-on uni+bi",
        "-",
        errors_of(theta, copies_on),
        [],
        None,
    )
    # the P2P-on file's P2P=Disabled matrices: the same copies measured again under the P2P driver
    again = matrices("m01 off again", topo, on, False, "staged")
    row(
        "m01 staged copies",
        "P2P-off uni+bi",
        "P2P-off uni+bi, 2nd run (P2P driver)",
        errors_of(theta, [off_uni, off_bi]),
        errors_of(theta, again),
        errors_of(theta, base),
        "baseline: plain topology on the fitting run",
        again[0].labels + again[1].labels,
    )

    ar = trace("m01_8x4090_2xEPYC7542_allreduce_p2p_on.txt").nccl("all_reduce")[0]
    sizes, times = table(ar)
    ranks = topo.gpus()
    coll = allreduce_data("m01 all_reduce on", topo, ranks, sizes, times, "p2p")
    log("m01: fit software (per-step overhead, efficiency per regime) on the P2P-on all_reduce")
    soft = ("overhead LL", "overhead Simple", "inefficiency LL", "inefficiency Simple", "hand-over")
    theta = fit(theta, soft, [coll], steps=200)
    ab = alpha_beta(sizes, times, 2 * 7 / 8)
    busbw = 2 * 7 / 8 * sizes / times
    row(
        "m01 all_reduce P2P on",
        "P2P-on all_reduce",
        "-",
        errors(theta, coll),
        [],
        ab(sizes) / busbw - 1,
        "baseline: alpha-beta, in-sample",
    )

    big = sizes[sizes >= 2**20]
    host = float(np.exp(theta[NAMES.index("staging")]))
    shm = allreduce_data("m01 all_reduce off (shm)", topo, ranks, big, np.ones_like(big), "shm", host=host)
    links = allreduce_data("m01 all_reduce off (links)", topo, ranks, big, np.ones_like(big), "shm")
    pred_shm = shm.bandwidth(predict(theta, shm))
    pred_links = links.bandwidth(predict(theta, links))
    m01_off = [(int(s), pred_shm[k] / GB, pred_links[k] / GB, ab(s) / GB) for k, s in enumerate(big)]
    return theta, m01_off


def m02(theta_m01):
    log("m02: 8 x RTX 4090 box with the P2P driver; all_reduce on GPUs 0-3")
    topo = netsim.topology.preset("rtx4090-8x-epyc7542")
    tr = trace("m02_4x4090_pptest_p2p_allreduce.txt")
    bi = matrix_data("m02 bi", topo, tr.matrix("bidirectional", p2p=True).values, "bidirectional", "p2p")
    log("m02: fit PCIe and the socket duplex budget on its bidirectional matrix")
    theta = fit(theta_m01, ("pcie", "socket duplex"), [bi])
    sizes, times = table(tr.nccl("all_reduce")[0])
    coll = allreduce_data("m02 all_reduce", topo, topo.gpus()[:4], sizes, times, "p2p")
    busbw = 2 * 3 / 4 * sizes / times
    err = errors(theta, coll)  # software from m01: nothing of this table was fitted
    small = sizes <= 2**20
    ab = alpha_beta(sizes[small], times[small], 2 * 3 / 4)
    row(
        "m02 all_reduce x4",
        "bi matrix + m01 software",
        "all sizes",
        errors(theta, bi),
        err,
        None,
        labels=coll.labels,
    )
    row(
        "m02 all_reduce x4, >= 2 MiB",
        "same",
        ">= 2 MiB",
        [],
        err[~small],
        ab(sizes[~small]) / busbw[~small] - 1,
        "baseline: alpha-beta on <= 1 MiB",
    )


def m08(theta_m01):
    log("m08: 4 x A100 PCIe, NV12 pairs")
    topo = netsim.topology.preset("a100-pcie-4x-nvlink-pairs")
    plain_off = netsim.topology.preset("a100-pcie-4x-nvlink-pairs", p2p=False)
    tr = trace("m08_4xA100PCIe_nvlinkpairs_p2p.txt")
    on = matrices("m08 on", topo, tr, True, "p2p")
    off = matrices("m08 off", topo, tr, False, "staged")
    plain = matrices("m08 plain", plain_off, tr, False, "plain")
    # every P2P-off copy is staged, so the staging efficiency and the link figures enter only as a
    # product: the efficiency is held at 1 (no staging loss) on the P2P-off fit
    start = initial(pcie=21.6 * GB, socket=21.6 * GB, nvlink=275 * GB, staged_inflation=1e-9)
    log("m08: fit P2P-on matrices (PCIe, socket, NVLink, socket duplex), predict P2P-off")
    theta = fit(start, ("pcie", "socket", "nvlink", "socket duplex"), on)
    # the P2P-on data say nothing of the host side: take m01's, the host budget as a multiple of PCIe
    # and cudaMemcpy's staging efficiency (a driver property), rather than none (links only)
    i, h, e = NAMES.index("pcie"), NAMES.index("staging"), NAMES.index("staged inflation")
    host_m01 = theta.copy()
    host_m01[h] = theta[i] + theta_m01[h] - theta_m01[i]
    host_m01[e] = theta_m01[e]
    links_only = theta.copy()
    links_only[h], links_only[e] = np.log(1e13), np.log(1e-9)
    for k, kind in enumerate(KINDS):
        log(
            f"m08: P2P-off {kind} predicted on links only (no host side): {stats(errors(links_only, off[k]))}"
        )
    plain_on = matrices("m08 plain on", topo, tr, True, "plain")
    for k, kind in enumerate(KINDS):
        row(
            f"m08 on -> off, {kind[:3]}",
            "P2P-on uni+bi",
            f"P2P-off {kind[:3]}",
            errors_of(theta, on) if k == 0 else [],
            errors(host_m01, off[k]),
            errors(host_m01, plain[k]),
            "host side from m01 (H / PCIe, e); baseline: plain P2P-off preset",
            off[k].labels,
        )
    log("m08: fit P2P-off matrices (PCIe, host budget), predict P2P-on (socket and its duplex budget: start)")
    theta2 = fit(start, ("pcie", "staging"), off)
    ins = errors_of(theta2, off)
    log(
        f"m08: worst in-sample P2P-off cell {(off[0].labels + off[1].labels)[int(np.argmax(np.abs(ins)))]} "
        f"({100 * ins[int(np.argmax(np.abs(ins)))]:+.0f} %)"
    )
    nv = lambda d: np.array([lab.split()[1] in ("0->1", "1->0", "2->3", "3->2") for lab in d.labels])
    for k, kind in enumerate(KINDS):
        row(
            f"m08 off -> on, {kind[:3]}",
            "P2P-off uni+bi",
            f"P2P-on {kind[:3]}, PCIe pairs",
            errors_of(theta2, off) if k == 0 else [],
            errors(theta2, on[k])[~nv(on[k])],
            errors(theta2, plain_on[k])[~nv(on[k])],
            "NVLink cells: no NVLink in P2P-off data; baseline: plain",
            tuple(np.array(on[k].labels)[~nv(on[k])]),
        )


def m09():
    log("m09: 8 x TITAN RTX, switch pairs, every copy host-staged")
    topo = netsim.topology.preset("titanrtx-8x-lambda", p2p=True)
    plain = netsim.topology.preset("titanrtx-8x-lambda")
    tr = trace("m09_8xTITANRTX_lambda_p2p.txt")
    hair = T.hairpin_budgets(topo, 10 * GB)
    mats = {k: tr.matrix(k, p2p=False).values for k in KINDS}
    fit_d = [
        matrix_data(f"m09 {k} rows 0-3", topo, mats[k], k, "staged", rows=range(4), extra=hair) for k in KINDS
    ]
    held_d = [
        matrix_data(f"m09 {k} rows 4-7", topo, mats[k], k, "staged", rows=range(4, 8), extra=hair)
        for k in KINDS
    ]
    base_d = [
        matrix_data(f"m09 plain {k} rows 4-7", plain, mats[k], k, "plain", rows=range(4, 8)) for k in KINDS
    ]
    start = initial(pcie=11.4 * GB, staging=11 * GB, hairpin=9 * GB, staged_inflation=1e-9)  # as m08
    log("m09: fit PCIe, host and switch hairpin budgets on rows 0-3, predict rows 4-7")
    theta = fit(start, ("pcie", "staging", "hairpin"), fit_d)
    row(
        "m09 staged copies",
        "rows 0-3 uni+bi",
        "rows 4-7 uni+bi",
        errors_of(theta, fit_d),
        errors_of(theta, held_d),
        errors_of(theta, base_d),
        "baseline: plain preset",
        held_d[0].labels + held_d[1].labels,
    )


def m05(theta_m01):
    log("m05: 8 x A40, NV4 pairs (container runs)")
    topo = netsim.topology.preset("a40-8x-nv4")
    plain_off = netsim.topology.preset("a40-8x-nv4", p2p=False)
    tr = trace("m05_8xA40_nv4_node_sys_and_dgxA100_allreduce.txt")
    tables = [t for t in tr.nccl("all_reduce") if "A40" in t.section or "A40" in t.title]
    pair = next(t for t in tables if t.p2p is not False)
    gpus = topo.gpus()
    ranks = lambda t: [gpus[d] for d in (t.visible_devices or range(t.n_gpus))]
    sizes, times = table(pair)
    nvd = allreduce_data("m05 NV pair", topo, ranks(pair), sizes, times, "p2p")
    log("m05: fit NVLink on the NV4-pair table (software from m01)")
    theta = fit(theta_m01, ("nvlink",), [nvd], steps=100)
    for t in tables:
        if t.p2p is not False:
            continue
        s, b = table(t)
        shm = allreduce_data("m05 shm", topo, ranks(t), s, b, "shm")
        base = allreduce_data("m05 plain", plain_off, ranks(t), s, b, "plain")
        where = "SYS" if len(ranks(t)) > 2 else "NODE"
        row(
            f"m05 {where} P2P off x{len(ranks(t))}",
            "NV4 pair table",
            f"{where} table (SHM)",
            errors(theta, nvd),
            errors(theta, shm),
            errors(theta, base),
            "degraded container runs (file's CAUTION)",
        )


def main():
    log(f"jax {jax.__version__} on {jax.devices()[0].device_kind}")
    theta, m01_off = m01()
    m02(theta)
    m08(theta)
    m09()
    m05(theta)
    print("\nHeld-out predictions (relative error of bandwidth: mean / max, %)\n")
    print("| case | fitted on | predicted | in-sample | held-out | baseline | note |")
    print("|---|---|---|---|---|---|---|")
    for r in ROWS:
        print("| " + " | ".join(r) + " |")
    print("\nFitted values (GB/s for bandwidths and budgets, us for overheads, efficiency in (0, 1))\n")
    for name, values in FITTED:
        show = lambda n, v: (
            f"{n} {v * 1e6:.2f} us"
            if n.startswith("overhead")
            else f"{n} eff {np.exp(-v):.3f}"
            if n.startswith("ineff")
            else f"{n} {v / 1024:.0f} KiB/step"
            if n == "hand-over"
            else f"staged efficiency {1 / (1 + v):.3f}"
            if n == "staged inflation"
            else f"{n} {v / GB:.1f}"
        )
        print(f"- {name}: " + ", ".join(show(n, v) for n, v in values.items()))
    print("\nm04: no trace in netsim/data/traces (nothing to predict).")
    print(
        "\nm01 all_reduce with P2P off (one measured point: 14.47 GB/s busbw at 128 MiB with the stock "
        "driver, the blog summary in the P2P-on trace's header)\n"
    )
    print("| size (B) | SHM, host budgets from copies x SM_HOST_GAIN | SHM, links only | P2P-on alpha-beta |")
    print("|---|---|---|---|")
    for s, a, b, c in m01_off:
        print(f"| {s} | {a:.2f} | {b:.2f} | {c:.2f} |")
    log("done")


if __name__ == "__main__":
    main()
