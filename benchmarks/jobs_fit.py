"""Job traffic models fitted to DeepShare's measurements: in-sample fit, a held-out split, baselines.

    python benchmarks/jobs_fit.py            # the report (docs/jobs.md, "Fitted traffic"); ~minutes
    python benchmarks/jobs_fit.py --write    # also writes netsim/data/job_models.json (the default MODELS)
    python benchmarks/jobs_fit.py --held-out-only   # only the held-out fit and its per-model table

Fits every model (compute s, collective size S, bytes per extra server) through the simulator with
`netsim.calibrate.jobs.fit_jobs`: (1) on every measured pair, (2) on a seeded half of the pairs,
predicting the other half. Baselines: the hand-set models netsim shipped before, "no contention"
(ratio 1) and the table's own scatter ([A, B] against [B, A]), overall and per model (the slowed job's
model: its rows of the table). Prints progress.
"""

import argparse
import json
import pathlib
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np
from netsim.calibrate import jobs

from netsim.jobs import MODELS_PATH, DeepShareTable, Model

#: the illustrative models netsim shipped before the fit (compute s, S bytes): the fit's start and
#: baseline (a)
HAND_SET = {
    "MobileNetV3": Model("allreduce", 0.060, 22e6),
    "GraphSage": Model("allreduce", 0.040, 2e6),
    "FSDP": Model("fsdp", 0.300, 2.6e9),
    "Transformer-XL": Model("allreduce", 0.150, 0.6e9),
    "DLRM": Model("alltoall", 0.030, 64e6),
    "MoE": Model("alltoall", 0.080, 256e6),
}
# the bytes per extra server start at 12.5 MB, 1 ms of a 100 Gb/s NIC (a zero has no gradient in log space)
START = {m: Model(x.pattern, x.compute, x.comm_bytes, "", 12.5e6) for m, x in HAND_SET.items()}


def line(name: str, e: dict) -> str:
    iso = f"  isolated ratios: mean {e['isolated_mean_rel_err']:.1%}" if "isolated_mean_rel_err" in e else ""
    return (
        f"{name:<34} entries {int(e['entries']):>5}  MAE {e['mae']:.3f}  max {e['max_abs_err']:.3f}  "
        f"Spearman {e['spearman']:+.3f}{iso}"
    )


def per_model(table: DeepShareTable, pred: jobs.JobPrediction) -> None:
    """Per model as the slowed job (A of [A, B]): held-out MAE of the fit and of "no contention", and
    the noise floor: the table's |[A, B] - [B, A]| over the same held-out entries (A != B)."""
    index = {c: i for i, c in enumerate(table.configs)}
    err = np.abs(pred.simulated - pred.measured)
    ones = np.abs(1 - pred.measured)
    model = np.array([a[0] for a, _ in pred.entries])
    swap = np.array(
        [abs(table.ratio[index[a], index[b]] - table.ratio[index[b], index[a]]) for a, b in pred.entries]
    )
    other = np.array([a != b for a, b in pred.entries])
    print(
        f"  {'model (slowed)':<16} entries  fitted  no contention  noise floor ([A,B] vs [B,A])  fitted <= floor"
    )
    for m in dict.fromkeys(c[0] for c in table.configs):
        k = model == m
        floor = swap[k & other].mean()
        print(
            f"  {m:<16} {k.sum():>7}  {err[k].mean():6.3f}  {ones[k].mean():13.3f}  "
            f"{floor:28.3f}  {'yes' if err[k].mean() <= floor else 'no'}"
        )
    print(
        f"  {'all':<16} {len(err):>7}  {err.mean():6.3f}  {ones.mean():13.3f}  {swap[other].mean():28.3f}  "
        f"{'yes' if err.mean() <= swap[other].mean() else 'no'}"
    )


def models_table(models: dict) -> None:
    for m, x in models.items():
        print(
            f"  {m:<15} {x.pattern:<10} compute {x.compute * 1e3:8.2f} ms  S {x.comm_bytes / 1e6:9.2f} MB  "
            f"per extra server {x.server_bytes / 1e6:8.2f} MB   ({x.compute!r}, {x.comm_bytes!r}, {x.server_bytes!r})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", action="store_true", help="write netsim/data/job_models.json")
    ap.add_argument("--held-out-only", action="store_true", help="skip the fit on every pair")
    args = ap.parse_args()
    command = "python benchmarks/jobs_fit.py " + " ".join(sys.argv[1:])
    table = DeepShareTable.load()
    print(f"device: {jax.devices()[0].device_kind}; {len(table.configs)} configs, {table.ratio.size} entries")
    print("the table's own scatter:", json.dumps({k: round(v, 3) for k, v in table.noise().items()}))
    t0 = time.perf_counter()
    say = lambda text: print(f"[{time.perf_counter() - t0:6.0f} s] {text}", flush=True)
    opts = {"steps": args.steps, "rounds": args.rounds, "progress": say, "log_every": 5}

    if args.write and args.held_out_only:
        ap.error("--write needs the fit on every pair (drop --held-out-only)")
    full = None
    if not args.held_out_only:
        print("\n== fit on every pair ==")
        full = jobs.fit_jobs(table, start=START, **opts)
        print(f"({time.perf_counter() - t0:.0f} s)")
        hand = jobs.predict_jobs(HAND_SET, table)
        ones = jobs.colocation_errors(np.ones_like(full.prediction.measured), full.prediction.measured)

    print("\n== held out: fit on half of the pairs, predict the other half ==")
    fit_pairs, held = table.split(args.seed)
    half = jobs.fit_jobs(table, start=START, pairs=fit_pairs, **opts)
    pred = jobs.predict_jobs(half.models, table, pairs=held)
    hand_held = jobs.predict_jobs(HAND_SET, table, pairs=held)
    ones_held = jobs.colocation_errors(np.ones_like(pred.measured), pred.measured)
    print(f"({time.perf_counter() - t0:.0f} s in all)")

    print("\n== report (co-location ratio: |simulated - measured|) ==")
    if full is not None:
        print("in sample, every measured pair:")
        print(line("  fitted models", full.prediction.errors()))
        print(line("  hand-set models (before)", hand.errors()))
        print(line("  no contention (ratio 1)", ones))
    print(f"held out (seed {args.seed}: fit on {len(fit_pairs)} pairs, predict {len(held)}):")
    print(line("  fitted on the other half", pred.errors()))
    print(line("  hand-set models (before)", hand_held.errors()))
    print(line("  no contention (ratio 1)", ones_held))
    print("held out, per model (rows of the table: the slowed job's model):")
    per_model(table, pred)
    print("\nfitted models (held-out half):")
    models_table(half.models)
    if full is None:
        return
    print("\nfitted models (all pairs):")
    models_table(full.models)
    worst = np.argsort(-np.abs(full.prediction.simulated - full.prediction.measured))[:5]
    print("worst entries:")
    for i in worst:
        (a, b) = full.prediction.entries[i]
        print(
            f"  {a} next to {b}: simulated {full.prediction.simulated[i]:.3f}, measured "
            f"{full.prediction.measured[i]:.3f}"
        )
    if args.write:
        pathlib.Path(MODELS_PATH).write_text(full.to_json(command))
        print(f"wrote {pathlib.Path(MODELS_PATH).name}")


if __name__ == "__main__":
    main()
