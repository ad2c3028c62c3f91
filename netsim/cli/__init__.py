"""netsim command line: simulate scenarios, sweep what-ifs, calibrate against measured traces."""

# JAX is imported by the commands' handlers, not by these modules: `netsim --help`, `--version` and argument
# errors stay instant. Each command is one module with `register(subparsers)`; COMMANDS lists them in help order.
from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
import traceback

from .._progress import Pulse, doing, say
from .._threads import set_cpu_threads
from . import calibrate, collective, jobs, latency, predict, presets, run, sweep, train, workload
from ._common import CPU_THREADS, MAX_CPU_THREADS, started, whole
from ._common import check_outputs as check_outputs
from ._common import cpu_threads as cpu_threads

COMMANDS = (run, sweep, calibrate, predict, collective, presets, workload, jobs, latency, train)


def build_parser() -> argparse.ArgumentParser:
    from netsim import __version__

    parser = argparse.ArgumentParser(prog="netsim", description=__doc__)
    parser.add_argument("--version", action="version", version=f"netsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    for name, command in sub.choices.items():
        default = f"{CPU_THREADS[name]}" if name in CPU_THREADS else "one per core"
        command.add_argument(
            "--cpu-threads",
            type=whole(0, MAX_CPU_THREADS, " (0 = one per core; 4 per core at most)"),
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


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)  # --help, --version, bad arguments: exit here, without JAX
    set_cpu_threads(cpu_threads(args.cpu_threads, args.command))  # before anything starts JAX's backend
    # a long command is never silent: a line within 2 s, then one at least every 10 s (netsim._progress)
    quiet = getattr(args, "quiet", False) or getattr(args, "no_progress", False)
    with Pulse(f"netsim {args.command}", enabled=not quiet):
        return _handle(args)


def _handle(args: argparse.Namespace) -> int:
    if not args.no_compile_cache:
        from .._cache import enable_compilation_cache

        with doing("starting (importing JAX)"):
            if "jax" not in sys.modules:  # the import holds the pulse's thread off for seconds: say it first
                say(f"netsim {args.command}: starting (importing JAX)")
            enable_compilation_cache()  # before the first compile; imports JAX only here
    if args.command != "run":  # `run` reads its scenario first
        started()
    from .._errors import NetsimError

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
