"""`netsim sweep SPEC --out results.h5`: run (or resume) a what-if sweep from a JSON spec."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from ._common import whole


def register(subparsers) -> None:
    """Adds the `sweep` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "sweep",
        help="run a what-if sweep (grid or random samples) from a JSON spec; resumable",
        description="Runs every point of a sweep spec (see docs/sweeps.md) in vmapped batches over all "
        "devices, writing each finished chunk to an HDF5 file. Rerunning the same command "
        "resumes an interrupted sweep.",
    )
    p.add_argument("spec", help="sweep spec JSON file")
    p.add_argument(
        "--out", required=True, help="results file (.h5 or .hdf5); resumed if it holds the same sweep"
    )
    p.add_argument("--samples", type=int, help="random points instead of the spec's grid (or its samples)")
    p.add_argument("--seed", type=int, help="random seed for --samples (default: the spec's, else 0)")
    p.add_argument("--chunk-size", type=int, help="points per batch (default: sized to device memory)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it holds a different sweep")
    p.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    p.add_argument("--plot", help="also save a PNG of --metric over the axes")
    p.add_argument(
        "--metric",
        choices=("makespan", "busbw"),
        help="what --plot draws (default: busbw when the spec gives `busbw`, its collective; else makespan)",
    )
    dist = p.add_argument_group("multi-host (jax.distributed; run the same command on every host)")
    dist.add_argument("--coordinator", help="host:port of process 0")
    dist.add_argument("--num-processes", type=whole(1))
    dist.add_argument("--process-id", type=whole(0))
    p.set_defaults(handler=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    import jax

    from netsim import NetsimError
    from netsim.sweep import SweepError, check_out_path, load_spec

    from ._common import check_outputs

    try:  # before any work: a bad --out or --chunk-size must not cost a plan, nor leave a file behind
        check_out_path(args.out)
        # a missing or read-only folder, the spec itself, --plot over --out: refused now, not after the run
        plots = (".png", ".pdf", ".svg")  # matplotlib writes the format the suffix names
        check_outputs(
            {"the spec": args.spec}, {"--out": (args.out, (args.out,)), "--plot": (args.plot, plots)}
        )
        if args.metric and not args.plot:
            raise SweepError("--metric: chooses what --plot draws; give --plot too")
        if args.chunk_size is not None and args.chunk_size < 1:
            raise SweepError(
                f"--chunk-size: expected a positive number of points per batch, got {args.chunk_size}"
            )
    except SweepError as e:
        print(f"netsim: error: {e}", file=sys.stderr)
        return 2
    if args.coordinator or args.num_processes is not None or args.process_id is not None:
        if not args.coordinator or args.num_processes is None or args.process_id is None:
            print(
                "netsim: error: --coordinator, --num-processes and --process-id go together "
                "(a multi-host sweep needs all three)",
                file=sys.stderr,
            )
            return 2
        if args.process_id >= args.num_processes:
            print(
                f"netsim: error: --process-id: must be < --num-processes ({args.num_processes}), "
                f"got {args.process_id}",
                file=sys.stderr,
            )
            return 2
        jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id)
    try:
        sweep = load_spec(args.spec)
        if args.metric == "busbw" and sweep.busbw is None:
            raise SweepError(
                f'--metric busbw: {args.spec} does not say which collective it sweeps (add "busbw": '
                '{"kind": ..., "ranks": ..., "size": ...}; see docs/sweeps.md)'
            )
        if args.samples is not None or args.seed is not None:
            sweep = dataclasses.replace(
                sweep,
                samples=args.samples if args.samples is not None else sweep.samples,
                seed=args.seed if args.seed is not None else sweep.seed,
            )
        if jax.process_index() == 0:
            print(
                f"netsim: sweep {args.spec}: {sweep.n_points} points over {len(sweep.axes)} axes "
                f"({', '.join(a.name for a in sweep.axes)}) on {jax.device_count()} {jax.default_backend()} "
                "device(s)",
                file=sys.stderr,
            )
        result = sweep.run(
            args.out, chunk_size=args.chunk_size, progress=not args.no_progress, overwrite=args.overwrite
        )
    except NetsimError as e:
        print(f"netsim: error: {e}", file=sys.stderr)
        return 2
    if result is None:  # not process 0
        return 0
    print(summary(result))
    print(f"wrote {args.out}")
    if args.plot:
        from netsim.plots import plot_sweep

        metric = args.metric or ("busbw" if sweep.busbw is not None else "makespan")
        plot_sweep(result, args.plot, metric=metric)
        print(f"wrote {args.plot}")
    return 0


def summary(result) -> str:
    """Counts of finished and failed points, and the makespan's spread with the best and worst points."""
    import numpy as np

    from netsim import Status
    from netsim._units import format_quantity

    ok = result.ok
    not_run = (result.status & int(Status.NOT_RUN)) != 0
    failed = ~ok & ~not_run
    lines = [
        f"{result.n_points} points: {int(ok.sum())} finished, {int(failed.sum())} failed, "
        f"{int(not_run.sum())} not run"
    ]
    if ok.any():
        span = result.makespan[ok]
        lines.append(
            "makespan  min {}  median {}  max {}".format(
                *(format_quantity(float(v), "time") for v in (span.min(), np.median(span), span.max()))
            )
        )
        if "busbw" in result.meta:
            bw = result.metric("busbw")[ok] / 1e9
            lines.append(f"busbw     min {bw.min():.2f}  median {np.median(bw):.2f}  max {bw.max():.2f} GB/s")
        rows = np.flatnonzero(ok)
        for what, row in (("best", rows[np.argmin(span)]), ("worst", rows[np.argmax(span)])):
            lines.append(f"{what:<6}" + "  ".join(f"{a.name}={_point_label(a, row)}" for a in result.axes))
    engine = failed & ((result.status & int(Status.NOT_BUILT)) == 0)
    if engine.any():  # unbuilt points are explained once per scenario below
        row = int(np.flatnonzero(engine)[0])
        lines.append(f"failed point {row}: " + "; ".join(result.reasons(row)))
    for err in sorted(set(filter(None, result.errors))):
        lines.append(f"unbuilt points: {err}")
    return "\n".join(lines)


def _point_label(axis, row: int) -> str:
    import numpy as np

    if axis.index is not None and axis.labels:
        return axis.labels[int(axis.index[row])]
    v = axis.value[row]
    return f"{v:.4g}" if np.ndim(v) == 0 else f"[{len(v)} draws]"
