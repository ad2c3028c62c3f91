"""What every command shares: the `--topology` help, XLA CPU thread counts, output checks, start-up's end."""

from __future__ import annotations

import argparse
import gc
import os

# XLA CPU threads per command (`netsim.set_cpu_threads`): one simulation runs faster on one thread, a sweep's
# batched ops gain from one per core; the commands not listed use one per core
CPU_THREADS = {"run": 1}


#: what every `--topology` option takes: whatever `netsim.topology.load` reads
TOPOLOGY_HELP = (
    "an `nvidia-smi topo -m` text file, a calibration JSON (`netsim calibrate --out`), a preset or "
    "calibrated preset name (`netsim presets`; a calibrated preset gives its fitted figures), or a "
    "cluster shape (fat-tree:K, leaf-spine:L,S,H, dgx-a100:N or dgx-h100:N for N DGX servers on InfiniBand, ,nic=BW for other NICs; FABRIC/SERVER puts "
    "servers under a fat-tree or leaf-spine, one per NIC group: leaf-spine:4,2,4/pcie:8,nics=2), or a PCIe server "
    "(pcie:N[,sockets=S][,numa=K][,switches=G][,nics=M][,nvlink=L])"
)


def whole(minimum: int, maximum: int | None = None, note: str = ""):
    """An argparse type: a whole number in [minimum, maximum]; argparse's error names the option."""

    def read(text: str) -> int:
        value = int(text) if text.strip().lstrip("+-").isdigit() else None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
            raise argparse.ArgumentTypeError(f"must be a whole number {bound}{note}, got {text!r}")
        return value

    return read


#: XLA CPU threads a command may ask for: more than a few per core only costs memory and start-up (100000
#: threads took 6.3 GB and two minutes before the first event)
MAX_CPU_THREADS = 4 * (os.cpu_count() or 1)


def cpu_threads(option: int | None, command: str) -> int:
    """The thread count for a command: --cpu-threads, else PJRT_NPROC if set, else the command's default."""
    if option is not None:
        return option
    if os.environ.get("PJRT_NPROC", "").isdigit():
        return int(os.environ["PJRT_NPROC"])
    return CPU_THREADS.get(command, 0)


def check_outputs(inputs: dict[str, str], outputs: dict[str, tuple[str | None, tuple[str, ...]]]) -> None:
    """Refuses, before any work, an output of unknown type, one that would replace an input or another
    output, and one that cannot be written (missing or read-only folder).

    inputs: option -> path read; outputs: option -> (path or None, accepted suffixes). Raises OSError.
    """
    from .._checks import check_writable

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


def topology_input(topology: str | None) -> dict[str, str]:
    """`check_outputs`' inputs entry for a --topology that names a file (a preset or shape names none)."""
    return {"--topology": topology} if topology and os.path.isfile(topology) else {}


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links
    except OSError:
        return False


def started() -> None:
    """Ends a command's start-up: garbage collection runs again (`netsim.cli.main` holds it off until then)."""
    gc.enable()
