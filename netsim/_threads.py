"""XLA's CPU thread pool, sized for this process before JAX starts its CPU backend.

XLA's CPU backend runs large loops on a pool of threads, one per core by default, sized by PJRT_NPROC when it
starts. One simulation is a long chain of small ops for which the hand-offs cost more than they save (1.3-1.4x
slower on 2 cores than with one thread, benchmarks/RESULTS.md); a sweep's batched ops gain from them.
"""

from __future__ import annotations

import os


def set_cpu_threads(n: int) -> None:
    """Sizes XLA's CPU thread pool: n threads, or one per core for 0. Only takes effect before JAX starts its
    CPU backend (its first computation or device query), so call it first thing in a script."""
    if n < 0:
        raise ValueError(f"cpu threads: must be >= 0 (0 = one per core), got {n}")
    if n:
        os.environ["PJRT_NPROC"] = str(n)
    else:
        os.environ.pop("PJRT_NPROC", None)


def cpu_threads_label() -> str:
    """XLA's CPU thread pool size as set for this process, for headers."""
    return os.environ.get("PJRT_NPROC", "one per core")
