"""Fits the training compute model (netsim.workloads.ComputeModel) to vTrain's measured single-node table.

    python -m calibrate.training            # fit on the train split, report in-sample / held-out / baseline
    python -m calibrate.training --write    # ... and write netsim/data/training_a100.json

The table is netsim/data/traces/vtrain_ground_truth_single.csv (Megatron-DeepSpeed on one 8 x A100 node,
1440 layouts). The fit minimises the squared log error of the closed-form iteration time
(`netsim.workloads.estimate_seconds`, which the simulated iterations match; see docs/training.md) with
Adam over the log of the fitted values. The split: every row whose index is 0 mod 5 held out (20 %), the
rest fitted. The baseline: total FLOPs / (peak x one fitted efficiency) + the same closed-form
communication (bandwidth terms only).
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
from netsim.workloads import GPUS, ComputeModel, iteration_terms, read_layout_table
from netsim.workloads import estimate_seconds as _estimate

TABLE = "vtrain_ground_truth_single.csv"
#: NVSwitch port bandwidth of a DGX A100, per direction: nccl-tests all_reduce busbw 222 GB/s (m05 trace)
LINK_BANDWIDTH = 222e9
GPU = "A100"
HOLD_OUT = 5  # rows i with i % HOLD_OUT == 0 are held out
OUT = DATA_DIR / "training_a100.json"


def stack(items):
    """Stacks a list of equal-structured NamedTuples of arrays along a new leading axis."""
    first = items[0]
    if hasattr(first, "_fields"):
        return type(first)(*(stack([getattr(x, f) for x in items]) for f in first._fields))
    return np.stack([np.asarray(x, dtype=np.float64) for x in items])


def load(recompute: str = "none"):
    """(terms stacked over rows, measured seconds [R], rows)."""
    rows = read_layout_table(trace_path(TABLE), recompute=recompute)
    terms = stack([iteration_terms(r.model, r.layout) for r in rows])
    return terms, np.array([r.measured for r in rows]), rows


def predict(log_theta, terms, xp=jnp):
    spec = GPUS[GPU]
    return _estimate(terms, xp.exp(log_theta), spec.peak_flops, spec.memory_bandwidth, LINK_BANDWIDTH, xp)


def fit(terms, measured, train, *, steps: int = 3000, lr: float = 0.03, power: int = 2):
    """Log of the fitted values (ComputeModel.FITTED order), by Adam on the mean `power`-th power of the
    train rows' log errors (power 4 weighs the worst rows more than power 2)."""
    x0 = jnp.log(jnp.asarray(ComputeModel().vector()))
    t = jax.tree.map(lambda a: jnp.asarray(a[train]), terms)
    y = jnp.log(jnp.asarray(measured[train]))
    loss = lambda x: jnp.mean(jnp.abs(jnp.log(predict(x, t)) - y) ** power) ** (2 / power)
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


def baseline(terms, measured, train):
    """Total FLOPs / (peak x one efficiency) + closed-form communication; the efficiency fitted on train
    (the exp of the mean log ratio: the least-squares fit in log space)."""
    flops = lambda ops: np.einsum("rgp,rg->r", ops.gemm_pass, 2 * np.prod(ops.gemm, axis=-1))
    work = (terms.body_count * flops(terms.body) + terms.head_count * flops(terms.head)) / GPUS[
        GPU
    ].peak_flops
    one = terms.dp_bytes / LINK_BANDWIDTH
    comm = (terms.tp_bytes + terms.send_bytes) / LINK_BANDWIDTH + np.maximum(
        one, terms.dp_buckets * one - terms.dp_hide * work
    )
    # time = work / e + comm: e from the train rows by a 1-D search on the log error
    grid = np.linspace(0.05, 1.0, 1901)
    errs = [np.mean(np.log((work[train] / e + comm[train]) / measured[train]) ** 2) for e in grid]
    e = float(grid[int(np.argmin(errs))])
    return e, work / e + comm


def errors(pred, measured, mask):
    rel = np.abs(pred[mask] - measured[mask]) / measured[mask]
    return 100 * float(np.mean(rel)), 100 * float(np.max(rel))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {OUT.name}")
    ap.add_argument("--recompute", default="none", choices=("none", "selective", "full"))
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument(
        "--power", type=int, default=5, choices=(2, 3, 4, 5, 6), help="loss: mean |log error|^power"
    )
    args = ap.parse_args(argv)
    terms, measured, rows = load(args.recompute)
    idx = np.arange(len(rows))
    test = idx % HOLD_OUT == 0
    train = ~test
    x, train_loss = fit(terms, measured, train, steps=args.steps, power=args.power)
    with jax.enable_x64(True):
        pred = np.asarray(predict(jnp.asarray(x), jax.tree.map(jnp.asarray, terms)))
    e, base = baseline(terms, measured, train)
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
    }
    print(json.dumps({"compute": fitted, "fit": report}, indent=1))
    if args.write:
        source = (
            f"fitted by calibrate/training.py on netsim/data/traces/{TABLE} (vTrain, 8 x A100), "
            f"GPU {GPU} datasheet peak, NVSwitch port {LINK_BANDWIDTH / 1e9:g} GB/s"
        )
        write_atomic(OUT, json.dumps({"source": source, "compute": fitted, "fit": report}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
