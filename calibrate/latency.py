"""Fits the `booksim` router preset's queueing coefficients to BookSim2 load-latency curves, and reports.

    python -m calibrate.latency            # fit on TRAIN, report in-sample / held-out / baseline
    python -m calibrate.latency --write    # ... and write netsim/data/latency_booksim.json
    python -m calibrate.latency --draw 30 --seed 0 --from-shipped --steps 60 --lr 0.02
                                           # also fit on 30 held-out curves drawn at random: does a
                                           # wider training set predict the rest better?

The curves are netsim/data/booksim/*.json (BookSim2 runs: config, BookSim's commit, one point per rate).
Only points up to 0.9 x BookSim's saturation rate enter the latency loss (past it BookSim's averages
depend on its run length); each curve's saturation rate enters on its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from netsim.kernels.latency import Router, erlang_bound

import netsim
from netsim.checks import write_atomic
from netsim.data import DATA_DIR
from netsim.latency import Load, parse_shape, router_preset, shape_load, stack_feeds, stack_sources

#: curves the coefficients are fitted on: two sizes, three packet sizes, two VC counts, uniform traffic
TRAIN = (
    "mesh4_uniform_ps1",
    "mesh4_uniform_ps20",
    "mesh8_uniform_ps1",
    "mesh8_uniform_ps4",
    "mesh8_uniform_ps4_num_vcs4",
    "mesh8_uniform_ps20",
)
REACH = 0.9  # latency points up to this fraction of BookSim's saturation rate count
#: what a curve must meet, in %: mean and max |latency error| over its scored points, |saturation error|
TARGETS = {"mean": 10.0, "max": 25.0, "saturation": 10.0}
#: `--draw` picks from the curves on 2-D shapes of at most this many routers a side: the fit evaluates its
#: curves in one batch padded to the largest, and a 16 x 16 mesh or a 4x4x4 cube makes every Adam step
#: several times as long
DRAW_SIDE = 8
PROGRESS_EVERY = 10.0  # s between the fit's progress lines


@dataclasses.dataclass(frozen=True)
class Curve:
    """One stored BookSim2 curve."""

    name: str
    topology: str  # mesh:KxK / torus:KxK
    traffic: str
    flits: int
    num_vcs: int
    vc_buf_size: int
    rates: np.ndarray  # the stable points' offered rates
    latency: np.ndarray  # BookSim's "Packet latency average", cycles
    saturation: float  # packets per node per cycle: the most BookSim accepted
    offered: np.ndarray  # every rate BookSim ran, the unstable last one included (the saturation's range)

    @property
    def scored(self) -> np.ndarray:
        """The points whose latency is compared: stable, up to REACH x saturation."""
        return self.rates <= REACH * self.saturation


def saturation_error(saturation: float, accepted: np.ndarray, booksim: float) -> float:
    """Relative error of a modelled curve's saturation against BookSim's (the most it accepted over its
    rates): the most the model accepts over the same rates, whose flows off the busiest channels grow past
    its saturation rate as BookSim's do; but where that rate itself is above BookSim's figure, the rate's
    error (the most accepted is capped by the rates BookSim ran, so it would hide a late saturation)."""
    late = saturation > booksim
    return float((saturation if late else np.max(accepted)) / booksim - 1)


def booksim_saturation(points: list[dict]) -> float:
    """BookSim's saturation throughput: the highest accepted packet rate over the curve's points (past
    saturation BookSim accepts about that much whatever is offered)."""
    return max(min(p["accepted_packet_rate"], p["rate"]) for p in points)


def read_curve(name: str, data: dict) -> Curve:
    cfg = data["config"]
    pts = [p for p in data["points"] if p["stable"] and p["packet_latency"] is not None]
    side = int(cfg["k"])
    return Curve(
        name=name,
        topology=f"{cfg['topology']}:" + "x".join([str(side)] * int(cfg["n"])),
        traffic=cfg["traffic"],
        flits=int(cfg["packet_size"]),
        num_vcs=int(cfg["num_vcs"]),
        vc_buf_size=int(cfg["vc_buf_size"]),
        rates=np.array([p["rate"] for p in pts]),
        latency=np.array([p["packet_latency"] for p in pts]),
        saturation=booksim_saturation(data["points"]),
        offered=np.array([p["rate"] for p in data["points"]]),
    )


def stored_curves() -> list[Curve]:
    """Every BookSim2 curve shipped with netsim, by name."""
    return [
        read_curve(path.stem, json.loads(path.read_text(encoding="utf-8")))
        for path in sorted((DATA_DIR / "booksim").glob("*.json"))
    ]


def _pack(curves: list[Curve]):
    """Loads and every rate BookSim ran, stacked for one `netsim.vmap_latency` call; rates padded to the
    longest curve. The mask picks the scored points (`Curve.scored`)."""
    loads: list[Load] = [shape_load(c.topology, c.traffic) for c in curves]
    width = max(x.load.size for x in loads)
    classes = max(x.class_share.shape[0] for x in loads)
    n_rates = max(c.offered.size for c in curves)

    def pad(a, n, fill=0.0):
        return np.concatenate([a, np.full(n - a.size, fill)])

    def pad_share(x: Load):  # no packets in padding classes or channels
        out = np.zeros((classes, width))
        out[: x.class_share.shape[0], : x.load.size] = x.class_share
        return out

    batch = dict(  # netsim.vmap_latency's arguments but service, then the router fields each curve sets
        rate=np.stack([pad(c.offered, n_rates, c.offered[0]) for c in curves]),
        load=np.stack([pad(x.load, width) for x in loads]),
        contention=np.stack([pad(x.contention, width) for x in loads]),
        divergence=np.stack([pad(x.divergence, width) for x in loads]),
        exits=np.stack([pad(x.exits, width) for x in loads]),
        class_share=np.stack([pad_share(x) for x in loads]),
        vc_split=np.stack([pad(x.vc_split, width, 1.0) for x in loads]),
        nodes=np.array([float(x.nodes) for x in loads]),
        hops=np.array([x.hops for x in loads]),
        flits=np.array([float(c.flits) for c in curves]),
        link=np.array([x.link for x in loads]),
        vcs=np.array([float(c.num_vcs) for c in curves]),
        buffer=np.array([float(c.vc_buf_size) for c in curves]),
    )
    batch["sources"] = stack_sources(loads, width)
    # BookSim's latency at its stable points (the rates it ran first), 1 at the others (masked out)
    target = np.stack([pad(pad(c.latency, c.offered.size, 1.0), n_rates, 1.0) for c in curves])
    mask = np.stack([pad(np.isin(c.offered, c.rates[c.scored]).astype(float), n_rates) for c in curves])
    batch = {k: jnp.asarray(v) for k, v in batch.items()}
    batch["feeds"] = jax.tree.map(jnp.asarray, stack_feeds(loads))
    batch["vc_bound"] = erlang_bound(max(c.num_vcs for c in curves))  # static: a Python int
    return batch, jnp.asarray(target), jnp.asarray(mask)


def predict(router: Router, batch: dict):
    """(latency [B, R], saturation [B], accepted [B, R]) of every packed curve under one router."""
    args = dict(batch)
    # the curve's channel latency (torus: 2), usable VCs and buffer depth; a packet holds a channel for
    # its flits (traced here: as a host constant it changed the fit's last bits)
    fields = tuple(args.pop(k) for k in ("link", "vcs", "buffer"))
    shape = eqx.tree_at(lambda r: (r.link, r.vcs, r.buffer), router, fields)
    shape = dataclasses.replace(shape, vc_bound=args.pop("vc_bound"))
    service = args["flits"][:, None] * jnp.ones_like(args["load"])
    c = netsim.vmap_latency(**args, service=service, router=shape)
    return c.latency, c.saturation, c.accepted


def _router(theta) -> Router:
    f = lambda x: jnp.asarray(x, dtype=jnp.float64)
    return Router(
        pipeline=f(3.0),
        link=f(1.0),
        base=jax.nn.softplus(theta[0]),
        blocking=jax.nn.softplus(theta[1]),
        vcs=f(8.0),
        overhead=jax.nn.softplus(theta[2]),
        buffer=f(8.0),
        credit=f(2.0),
        wormhole=jax.nn.softplus(theta[4]),
        variability=jax.nn.softplus(theta[3]),
        limit=f(math.inf),
    )


def _theta(router: Router) -> jax.Array:
    """`_router`'s inverse: the unconstrained parameters of a router's fitted coefficients."""
    inverse = lambda x: jnp.log(jnp.expm1(jnp.asarray(x, dtype=jnp.float64)))  # of softplus
    fields = (router.base, router.blocking, router.overhead, router.variability, router.wormhole)
    return jnp.stack([inverse(x) for x in fields])


def drawn(curves: list[Curve], n: int, seed: int) -> tuple[str, ...]:
    """n curves outside TRAIN drawn at random (seeded) from those on 2-D shapes up to DRAW_SIDE a side."""
    small = lambda cube: cube.n == 2 and cube.k <= DRAW_SIDE
    pool = [c.name for c in curves if c.name not in TRAIN and small(parse_shape(c.topology))]
    if not 0 <= n <= len(pool):
        raise ValueError(
            f"--draw: between 0 and {len(pool)} curves (2-D shapes up to {DRAW_SIDE} a side), got {n}"
        )
    return tuple(sorted(np.random.default_rng(seed).choice(pool, n, replace=False).tolist()))


def within_targets(row: dict) -> bool:
    """Whether an `errors` row meets TARGETS (a curve that saturates before a scored point does not)."""
    return (
        bool(np.isfinite(row["max"]))
        and row["mean"] <= TARGETS["mean"]
        and row["max"] <= TARGETS["max"]
        and abs(row["saturation"]) <= TARGETS["saturation"]
    )


def baseline() -> Router:
    """Zero-load latency by hand (base 6 cycles: injection, ejection, source router and its queue's cycle),
    channel-load saturation (no blocking, no overhead) and M/D/1 waits (variability 0). Use with
    contention 1 (every packet waits for every other: plain M/D/1)."""
    f = lambda x: jnp.asarray(x, dtype=jnp.float64)
    return Router(
        pipeline=f(3.0),
        link=f(1.0),
        base=f(6.0),
        blocking=f(0.0),
        vcs=f(8.0),
        overhead=f(0.0),
        buffer=f(8.0),
        credit=f(2.0),
        wormhole=f(0.0),
        variability=f(0.0),
        limit=f(math.inf),
    )


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def fit(
    curves: list[Curve],
    steps: int = 600,
    lr: float = 0.05,
    *,
    start: Router | None = None,
    progress: Callable[[str], None] | None = _say,
) -> Router:
    """Adam on `curves`, from `start`'s coefficients (None: a fixed guess); `progress` gets a line when the
    first step (the compile) is done and every PROGRESS_EVERY s after (None: silent)."""
    batch, target, mask = _pack(curves)
    sat = jnp.asarray([c.saturation for c in curves])

    def loss(theta):
        latency, saturation, _ = predict(_router(theta), batch)
        finite = jnp.isfinite(latency)
        err = jnp.where(finite, jnp.log(jnp.where(finite, latency, 1.0)) - jnp.log(target), 1.0)
        return jnp.sum(mask * err**2) / jnp.sum(mask) + jnp.mean((jnp.log(saturation) - jnp.log(sat)) ** 2)

    optim = optax.adam(lr)
    theta = jnp.asarray([2.0, -1.0, -1.0, -1.0, -2.0]) if start is None else _theta(start)
    state = optim.init(theta)

    @jax.jit
    def step(theta, state):
        value, grad = jax.value_and_grad(loss)(theta)
        updates, state = optim.update(grad, state, theta)
        return optax.apply_updates(theta, updates), state, value

    start = time.perf_counter()
    if progress:
        progress(f"fit: {steps} Adam steps on {len(curves)} curves; compiling the step")
    for k in range(steps):
        theta, state, value = step(theta, state)
        value = float(value)  # waits for the step (a fraction of a second), so the rate is the steps'
        now = time.perf_counter()
        if k == 0:
            first = last = now  # the rate and ETA leave the compile out
            if progress:
                progress(f"fit: step 1/{steps} (compiled and run in {now - start:.1f} s), loss {value:.4g}")
        elif progress and (k == steps - 1 or now - last >= PROGRESS_EVERY):
            rate = k / (now - first)
            progress(
                f"fit: step {k + 1}/{steps}, loss {value:.4g}, {rate:.2f} steps/s, "
                f"elapsed {now - start:.0f} s, ETA {(steps - k - 1) / rate:.0f} s"
            )
            last = now
    return _router(theta)


def errors(router: Router, curves: list[Curve], *, plain_md1: bool = False) -> list[dict]:
    """Per curve: mean and max |latency error| (%) over its scored points, and its `saturation_error` (%)."""
    batch, target, mask = _pack(curves)
    if plain_md1:
        batch = dict(
            batch,
            contention=jnp.where(batch["load"] > 0, 1.0, 0.0),
            divergence=0 * batch["divergence"],
            class_share=0 * batch["class_share"],  # no VC waits, no VC-pool saturation
        )
    latency, saturation, accepted = jax.device_get(predict(router, batch))
    rows = []
    for i, c in enumerate(curves):
        m = np.asarray(mask[i]) > 0
        rel = np.abs(np.asarray(latency[i])[m] / np.asarray(target[i])[m] - 1) * 100
        rows.append(
            dict(
                name=c.name,
                points=int(m.sum()),
                mean=float(rel.mean()),
                max=float(rel.max()),
                saturation=100 * saturation_error(float(saturation[i]), accepted[i], c.saturation),
            )
        )
    return rows


def table(rows_fit: list[dict], rows_base: list[dict], train: tuple[str, ...]) -> str:
    """Markdown: per curve the fitted model's errors beside the baseline's, in-sample curves first."""

    def cell(r):
        if not np.isfinite(r["max"]):  # the model saturates before a scored point
            return f"saturates early / {r['saturation']:+.1f}"
        return f"{r['mean']:.1f} / {r['max']:.1f} / {r['saturation']:+.1f}"

    lines = [
        "| curve | set | points | fitted: mean / max / saturation error (%) | baseline |",
        "|---|---|---|---|---|",
    ]
    order = sorted(
        range(len(rows_fit)), key=lambda i: (rows_fit[i]["name"] not in train, rows_fit[i]["name"])
    )
    for i in order:
        r, b = rows_fit[i], rows_base[i]
        kind = "in-sample" if r["name"] in train else "held-out"
        lines.append(f"| {r['name']} | {kind} | {r['points']} | {cell(r)} | {cell(b)} |")
    for kind, pick in (("in-sample", True), ("held-out", False)):
        sel = [i for i in range(len(rows_fit)) if (rows_fit[i]["name"] in train) == pick]
        if sel:

            def agg(rows, sel=sel):
                done = [i for i in sel if np.isfinite(rows[i]["max"])]
                early = len(sel) - len(done)
                return (
                    f"{np.mean([rows[i]['mean'] for i in done]):.1f} / {max(rows[i]['max'] for i in done):.1f} / "
                    f"{max(abs(rows[i]['saturation']) for i in sel):.1f}"
                    + (f" ({early} saturating early left out of the latency figures)" if early else "")
                )

            lines.append(f"| **all {kind}** | | | {agg(rows_fit)} | {agg(rows_base)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write netsim/data/latency_booksim.json")
    ap.add_argument(
        "--draw",
        type=int,
        default=0,
        metavar="N",
        help=f"also fit on N other curves drawn at random (2-D shapes up to {DRAW_SIDE} a side) and count the "
        "held-out rest within the targets beside the shipped fit",
    )
    ap.add_argument("--seed", type=int, default=0, help="the draw's seed")
    ap.add_argument("--steps", type=int, default=600, help="Adam steps")
    ap.add_argument("--lr", type=float, default=0.05, help="Adam's learning rate")
    ap.add_argument("--from-shipped", action="store_true", help="start from the shipped coefficients")
    args = ap.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    curves = stored_curves()
    try:
        names = TRAIN + drawn(curves, args.draw, args.seed)
    except ValueError as e:
        ap.error(str(e))
    shipped = router_preset("booksim").router()
    router = fit(
        [c for c in curves if c.name in names],
        args.steps,
        args.lr,
        start=shipped if args.from_shipped else None,
    )
    params = {
        k: float(getattr(router, k)) for k in ("base", "blocking", "overhead", "wormhole", "variability")
    }
    print(json.dumps(params, indent=1))
    rows = errors(router, curves)
    print(table(rows, errors(baseline(), curves, plain_md1=True), names))
    met = {r["name"]: within_targets(r) for r in rows}
    held = [c.name for c in curves if c.name not in names]
    line = (
        f"within the targets: {sum(met[n] for n in names)} of {len(names)} in-sample, "
        f"{sum(met[n] for n in held)} of {len(held)} held out"
    )
    if args.draw:
        before = {r["name"]: within_targets(r) for r in errors(shipped, curves)}
        line += f" (the shipped fit: {sum(before[n] for n in held)} of those {len(held)})"
    print(line)
    if args.write:
        path = DATA_DIR / "latency_booksim.json"
        doc = {
            "what": "queueing coefficients of the `booksim` router preset (netsim.latency), fitted by calibrate/latency.py",
            "train": list(names),
            "reach": REACH,
            "parameters": params,
        }
        write_atomic(path, json.dumps(doc, indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
