"""Fits the training compute model (netsim.workloads.ComputeModel) to vTrain's measured single-node table
and checks it, unfitted, on vTrain's multi-node table.

    python -m calibrate.training            # fit on the train split, report in-sample / held-out / baseline
    python -m calibrate.training --write    # ... and write netsim/data/training_a100.json

The fitted table is netsim/data/traces/vtrain_ground_truth_single.csv (Megatron-DeepSpeed on one 8 x A100
node, 1440 layouts). The fit minimises the mean |log error|^power of the closed-form iteration time
(`netsim.workloads.estimate_seconds`, which the simulated iterations match; see docs/training.md) with
Adam over the log of the fitted values, every layout placed on DGX A100 servers (`dgx_a100`, the link
rates of `link_rates`). The split: every row whose index is 0 mod 5 held out (20 %), the rest fitted. The
baseline: total FLOPs / (peak x one efficiency fitted on the same rows) + the same closed-form
communication (bandwidth terms only). The check: vtrain_ground_truth_multi.csv (64-512 A100s), predicted
with the fitted values on `dgx_a100` clusters sized by each row's GPU count, the baseline likewise.
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax

from netsim.checks import write_atomic
from netsim.data import DATA_DIR, trace_path
from netsim.topology import sized_cluster
from netsim.workloads import GPUS, ComputeModel, LinkRates, iteration_terms, link_rates, read_layout_table
from netsim.workloads import estimate_seconds as _estimate

TABLE = "vtrain_ground_truth_single.csv"
CHECK = "vtrain_ground_truth_multi.csv"
#: vTrain's own multi-node error with profiled kernels (its paper and README: 14.73 % mean absolute error)
VTRAIN_MULTI_MAPE = 14.73
CLUSTER = "dgx-a100"
GPU = "A100"
HOLD_OUT = 5  # rows i with i % HOLD_OUT == 0 are held out
OUT = DATA_DIR / "training_a100.json"


def stack(items):
    """Stacks a list of equal-structured NamedTuples of arrays along a new leading axis."""
    first = items[0]
    if hasattr(first, "_fields"):
        return type(first)(*(stack([getattr(x, f) for x in items]) for f in first._fields))
    return np.stack([np.asarray(x, dtype=np.float64) for x in items])


def load_table(recompute: str = "none", table: str = TABLE):
    """(terms stacked over rows, LinkRates [R] of each row on its DGX A100 cluster, measured seconds [R],
    rows) of a shipped vTrain table."""
    rows = read_layout_table(trace_path(table), recompute=recompute)
    terms = stack([iteration_terms(r.model, r.layout) for r in rows])
    clusters: dict[int, object] = {}
    rates = []
    for r in rows:
        gpus = r.layout.gpus
        if gpus not in clusters:
            clusters[gpus] = sized_cluster(CLUSTER, gpus)
        topo = clusters[gpus]
        rates.append(link_rates(topo, topo.workers, r.layout))
    return terms, LinkRates(*np.array(rates, dtype=np.float64).T), np.array([r.measured for r in rows]), rows


def predict(log_theta, terms, rates, xp=jnp):
    spec = GPUS[GPU]
    return _estimate(terms, xp.exp(log_theta), spec.peak_flops, spec.memory_bandwidth, rates, xp)


def fit(terms, rates, measured, train, *, steps: int = 3000, lr: float = 0.03, power: int = 2):
    """Log of the fitted values (ComputeModel.FITTED order), by Adam on the mean `power`-th power of the
    train rows' log errors (power 4 weighs the worst rows more than power 2)."""
    x0 = jnp.log(jnp.asarray(ComputeModel().vector()))
    t = jax.tree.map(lambda a: jnp.asarray(a[train]), terms)
    rt = LinkRates(*(jnp.asarray(a[train]) for a in rates))
    y = jnp.log(jnp.asarray(measured[train]))
    loss = lambda x: jnp.mean(jnp.abs(jnp.log(predict(x, t, rt)) - y) ** power) ** (2 / power)
    opt = optax.adam(lr)

    @jax.jit
    def step(carry, _):
        x, s = carry
        g = jax.grad(loss)(x)
        u, s = opt.update(g, s)
        return (optax.apply_updates(x, u), s), None

    with jax.enable_x64(True):
        x0 = jnp.asarray(x0, jnp.float64)
        (x, _), _ = jax.lax.scan(step, (x0, opt.init(x0)), None, length=steps)
        return np.asarray(x), float(loss(x))


def baseline_terms(terms, rates):
    """(FLOPs / peak, closed-form communication) per row: the baseline's two parts."""
    flops = lambda ops: np.einsum("rgp,rg->r", ops.gemm_pass, 2 * np.prod(ops.gemm, axis=-1))
    work = (terms.body_count * flops(terms.body) + terms.head_count * flops(terms.head)) / GPUS[
        GPU
    ].peak_flops
    one = terms.dp_bytes / rates.dp
    comm = terms.tp_bytes / rates.tp + terms.send_bytes / rates.pp
    return work, comm + np.maximum(one, terms.dp_buckets * one - terms.dp_hide * work)


def baseline(terms, rates, measured, train):
    """(efficiency, times): total FLOPs / (peak x one efficiency) + closed-form communication, the
    efficiency fitted on the train rows by a 1-D search on the squared log error."""
    work, comm = baseline_terms(terms, rates)
    grid = np.linspace(0.05, 1.0, 1901)
    errs = [np.mean(np.log((work[train] / e + comm[train]) / measured[train]) ** 2) for e in grid]
    e = float(grid[int(np.argmin(errs))])
    return e, work / e + comm


def errors(pred, measured, mask):
    rel = np.abs(pred[mask] - measured[mask]) / measured[mask]
    return 100 * float(np.mean(rel)), 100 * float(np.max(rel))


def check(log_theta, efficiency: float, recompute: str = "none") -> dict:
    """The fitted model and the baseline (its single-node efficiency) on the multi-node table: MAPE and
    max error (%) over all its rows, none of which the fit saw."""
    terms, rates, measured, rows = load_table(recompute, CHECK)
    with jax.enable_x64(True):
        pred = np.asarray(predict(jnp.asarray(log_theta), jax.tree.map(jnp.asarray, terms), rates))
    work, comm = baseline_terms(terms, rates)
    every = np.ones(len(rows), dtype=bool)
    return {
        "table": CHECK,
        "rows": len(rows),
        "cluster": f"{CLUSTER}:N, N = # GPUs / 8",
        "model": errors(pred, measured, every),
        "baseline": errors(work / efficiency + comm, measured, every),
        "vtrain_reported_mape": VTRAIN_MULTI_MAPE,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {OUT.name}")
    ap.add_argument("--recompute", default="none", choices=("none", "selective", "full"))
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument(
        "--power", type=int, default=5, choices=(2, 3, 4, 5, 6), help="loss: mean |log error|^power"
    )
    args = ap.parse_args(argv)
    terms, rates, measured, rows = load_table(args.recompute)
    idx = np.arange(len(rows))
    test = idx % HOLD_OUT == 0
    train = ~test
    x, train_loss = fit(terms, rates, measured, train, steps=args.steps, power=args.power)
    with jax.enable_x64(True):
        pred = np.asarray(predict(jnp.asarray(x), jax.tree.map(jnp.asarray, terms), rates))
    e, base = baseline(terms, rates, measured, train)
    fitted = dict(zip(ComputeModel.FITTED, map(float, np.exp(x)), strict=True))
    report = {
        "rows": len(rows),
        "train": int(train.sum()),
        "held_out": int(test.sum()),
        "split": f"row index % {HOLD_OUT} == 0 held out",
        "recompute": args.recompute,
        "loss": f"mean |log error|^{args.power}",
        "train_loss": train_loss,
        "model": {"in_sample": errors(pred, measured, train), "held_out": errors(pred, measured, test)},
        "baseline": {
            "efficiency": e,
            "in_sample": errors(base, measured, train),
            "held_out": errors(base, measured, test),
        },
        "multi_node": check(x, e, args.recompute),
    }
    print(json.dumps({"compute": fitted, "fit": report}, indent=1))
    if args.write:
        source = (
            f"fitted by calibrate/training.py on netsim/data/traces/{TABLE} (vTrain, 8 x A100), "
            f"GPU {GPU} datasheet peak, on {CLUSTER} servers (netsim.topology.dgx_a100)"
        )
        write_atomic(OUT, json.dumps({"source": source, "compute": fitted, "fit": report}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
