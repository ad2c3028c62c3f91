"""netsim command line: simulate scenarios, sweep what-ifs, calibrate against measured traces."""

# JAX is imported by the commands, not here: `netsim --help`, `--version` and argument errors stay instant.
from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import sys
import traceback

# XLA's CPU backend runs large loops on a pool of threads, one per core by default, sized by PJRT_NPROC when
# it starts. One simulation is a long chain of small ops for which the hand-offs cost more than they save
# (1.3-1.4x slower on 2 cores than with one thread, benchmarks/RESULTS.md); a sweep's batched ops gain from them.
CPU_THREADS = {"run": 1}  # per command; the others use one thread per core


#: what every `--topology` option takes: whatever `netsim.topology.load` reads
TOPOLOGY_HELP = (
    "an `nvidia-smi topo -m` text file, a calibration JSON (`netsim calibrate --out`), a preset or "
    "calibrated preset name (`netsim presets`; a calibrated preset gives its fitted figures), or a "
    "cluster shape (fat-tree:K, leaf-spine:L,S,H)"
)


def set_cpu_threads(n: int) -> None:
    """Sizes XLA's CPU thread pool: n threads, or one per core for 0. Only takes effect before JAX starts its
    CPU backend (its first computation or device query), so call it first thing in a script."""
    if n < 0:
        raise ValueError(f"cpu threads: must be >= 0 (0 = one per core), got {n}")
    if n:
        os.environ["PJRT_NPROC"] = str(n)
    else:
        os.environ.pop("PJRT_NPROC", None)


def cpu_threads(option: int | None, command: str) -> int:
    """The thread count for a command: --cpu-threads, else PJRT_NPROC if set, else the command's default."""
    if option is not None:
        return option
    if os.environ.get("PJRT_NPROC", "").isdigit():
        return int(os.environ["PJRT_NPROC"])
    return CPU_THREADS.get(command, 0)


def cpu_threads_label() -> str:
    """XLA's CPU thread pool size as set for this process, for headers."""
    return os.environ.get("PJRT_NPROC", "one per core")


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0 (0 = one per core), got {text!r}")
    return int(text)


def check_outputs(inputs: dict[str, str], outputs: dict[str, tuple[str | None, tuple[str, ...]]]) -> None:
    """Refuses, before any work, an output of unknown type, one that would replace an input or another
    output, and one that cannot be written (missing or read-only folder).

    inputs: option -> path read; outputs: option -> (path or None, accepted suffixes). Raises OSError.
    """
    from ._checks import check_writable

    taken = dict(inputs)
    for option, (path, suffixes) in outputs.items():
        if path is None:
            continue
        if not path.endswith(suffixes):
            kind = os.path.splitext(path)[1] or "(none)"
            raise OSError(
                f"{option}: unknown output type {kind!r} in {path!r}; use one of {', '.join(suffixes)}"
            )
        for other, used in taken.items():
            if _same_file(path, used):
                raise OSError(f"{option}: {path!r} is also {other}; refusing to overwrite it")
        check_writable(path, option)
        taken[option] = path


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links
    except OSError:
        return False


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 0.5:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 0.5] (0 = exact), got {text!r}")
    return value


def _run(args: argparse.Namespace) -> int:
    check_outputs(
        {"the scenario": args.scenario},
        {"--out": (args.out, (".json", ".h5", ".hdf5")), "--trace": (args.trace, (".json",))},
    )
    import jax

    import netsim

    scenario = netsim.compile_scenario(netsim.Scenario.load(args.scenario))
    started()
    links, flows, tasks = scenario.scenario.links, scenario.scenario.flows, scenario.scenario.tasks
    backend = jax.default_backend()
    if backend == "cpu":
        backend += f", XLA threads: {cpu_threads_label()}"
    print(
        f"netsim: simulating {args.scenario} ({len(links)} links, {len(flows)} flows, {len(tasks)} tasks) "
        f"on {backend}",
        file=sys.stderr,
    )
    result = netsim.simulate(scenario, max_events=args.max_events, tolerance=args.tolerance, progress=True)
    print(result.summary(top=args.top))
    if args.out:
        result.save(args.out)
        print(f"\nwrote {args.out}")
    if args.trace:
        from netsim.timeline import save_trace

        save_trace(result, args.trace)
        print(f"wrote {args.trace} (open in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from netsim import __version__

    parser = argparse.ArgumentParser(prog="netsim", description=__doc__)
    parser.add_argument("--version", action="version", version=f"netsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate a scenario JSON file and print a summary")
    run.add_argument("scenario", help="scenario JSON file (see docs/scenario-format.md)")
    run.add_argument("--out", help="write results: .json, or .h5 for HDF5")
    run.add_argument("--trace", help="write a Chrome/Perfetto trace JSON of flows and tasks")
    run.add_argument(
        "--max-events", type=int, default=None, help="event-loop bound (default: 2 x padded items + 16)"
    )
    run.add_argument("--top", type=int, default=5, help="rows in the summary tables")
    run.add_argument(
        "--tolerance",
        type=_tolerance,
        default=0.0,
        metavar="W",
        help="fast mode: merge events within a relative time window W, e.g. 0.01 (default 0: "
        "exact; errors in docs/performance.md)",
    )
    run.set_defaults(handler=_run)
    for module in (
        "netsim._sweep_cli",
        "netsim._calibrate_cli",
        "netsim._predict_cli",
        "netsim._collective_cli",
        "netsim._presets_cli",
        "netsim._workload_cli",
        "netsim._jobs_cli",
        "netsim._latency_cli",
    ):
        try:
            importlib.import_module(module).register(sub)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
    for name, command in sub.choices.items():
        default = f"{CPU_THREADS[name]}" if name in CPU_THREADS else "one per core"
        command.add_argument(
            "--cpu-threads",
            type=_count,
            metavar="N",
            help=f"XLA CPU threads, 0 = one per core (default: PJRT_NPROC if set, else {default})",
        )
        command.add_argument(
            "--no-compile-cache",
            action="store_true",
            help="do not keep compiled engines on disk (default: kept in $NETSIM_CACHE_DIR, "
            "else ~/.cache/netsim/jax; see docs/performance.md)",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs a command; returns the exit code: 0 done, 2 bad input or I/O (a one-line message on stderr),
    1 a bug in netsim (the message, then the traceback to report)."""
    # Start-up (importing JAX, reading a scenario) allocates much and frees little: Python's cyclic garbage
    # collections there only cost time (~0.2 s of importing JAX). Off until the command has started
    # (`started`); as the caller had it afterwards.
    collecting = gc.isenabled()
    gc.disable()
    # and at exit, Python's last collection would walk every object JAX made (~0.3 s): skip them
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    try:
        return _main(argv)
    finally:
        (gc.enable if collecting else gc.disable)()


def started() -> None:
    """Ends a command's start-up: garbage collection runs again."""
    gc.enable()


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)  # --help, --version, bad arguments: exit here, without JAX
    set_cpu_threads(cpu_threads(args.cpu_threads, args.command))  # before anything starts JAX's backend
    if not args.no_compile_cache:
        from ._cache import enable_compilation_cache

        enable_compilation_cache()  # before the first compile; imports JAX only here
    if args.handler is not _run:  # `run` reads its scenario first
        started()
    from ._errors import NetsimError

    try:
        return args.handler(args)
    except NetsimError as e:  # bad input, or a simulation that cannot finish: the message names the field
        print(f"netsim: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`netsim run ... | head`): nothing of netsim's to report
        os.dup2(
            os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno()
        )  # so the exit's flush cannot fail again
        return 1
    except OSError as e:  # a file that cannot be read or written: the message names it
        print(f"netsim: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # anything else is a bug in netsim
        print(f"netsim: internal error (please report): {type(e).__name__}: {e}", file=sys.stderr)
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
