"""Signs of life of long work on stderr.

`Progress` is the one progress line: what is done, at what rate, for how long, and what is left when the
total is known (`simulate(progress=True)` counts events, sweeps points, `netsim jobs` jobs).

`Pulse` is the command line's guarantee that a long command is never silent (`netsim.cli` opens one around
every command): a background thread says what the process is doing whenever nothing else has spoken for a
while, e.g. "netsim run: compiling the engine for 10,240 items, 0:00:20 of ~25 s expected". It learns the
phase from JAX's own compile events (tracing, lowering, XLA's compile of each function) and from `doing`
blocks in netsim, and reports each long compile's real time against the expected one (`expect_compile`:
the last compile of that shape on this machine, else a rule of thumb). Library calls stay quiet: without
an open Pulse, none of this prints anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

clock = time.perf_counter  # the one clock of this module (tests replace it)


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """Counts `unit`s done; redraws one line in a terminal, elsewhere (logs, CI) prints a line at most
    every `every` s. Nothing shows before `after` s, so short work stays quiet. While a Pulse is open the
    open bar is what it shows between updates (with the current phase: "compiling ...").

    total: the count at completion, for the percentage and the ETA; None when unknown.
    done: the count already done when this run starts (a resumed sweep); the rate counts only new ones.
    """

    def __init__(
        self,
        label: str,
        unit: str,
        total: int | None = None,
        done: int = 0,
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
        after: float = 0.0,
        every: float = 10.0,
    ):
        self.label, self.unit, self.total = label, unit, total
        self.done, self.start_done = done, done
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.after, self.every = after, every
        self.t0 = clock()
        self.last_print = -float("inf")
        self.tty = enabled and getattr(self.stream, "isatty", lambda: False)()
        self.drawn = False
        if enabled and _state.pulse is not None:
            _state.bars.append(self)

    def line(self, detail: str = "") -> str:
        """E.g. "sweep: 50/100 points (50.0%), 15.0 points/s, elapsed 0:00:02, ETA 0:00:03"."""
        elapsed = clock() - self.t0
        rate = (self.done - self.start_done) / elapsed if elapsed > 0 else 0.0
        if self.total is None:
            parts = [f"{self.label}: {self.done} {self.unit}"]
        else:
            pct = 100.0 * self.done / self.total if self.total else 100.0
            parts = [f"{self.label}: {self.done}/{self.total} {self.unit} ({pct:.1f}%)"]
        parts += [f"{rate:,.1f} {self.unit}/s", f"elapsed {_clock(elapsed)}"]
        if self.total is not None:
            parts.append(f"ETA {_clock((self.total - self.done) / rate) if rate > 0 else '?'}")
        return ", ".join([*parts, detail] if detail else parts)

    def update(self, n: int, detail: str = "") -> None:
        """Counts n more done; `detail` ends the line."""
        self.done += n
        now = clock()
        if not self.enabled or now - self.t0 < self.after:
            return
        finished = self.total is not None and self.done >= self.total
        if self.tty or now - self.last_print >= self.every or finished:
            self.show(detail)

    def show(self, detail: str = "") -> None:
        """Writes the line now (redrawn in a terminal)."""
        if self.tty:
            self.stream.write("\r" + self.line(detail) + "\033[K")
        else:
            self.stream.write(self.line(detail) + "\n")
        self.stream.flush()
        self.last_print = _state.said = clock()
        self.drawn = True

    def close(self) -> None:
        """Ends a redrawn line; the Pulse no longer shows this bar."""
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
        if self in _state.bars:
            _state.bars.remove(self)


# --- the command line's pulse ----------------------------------------------------------------------------

#: JAX's compile phases, by the event JAX records at their start (a scalar: the start time) and end (a duration)
_PHASES = {
    "/jax/core/compile/jaxpr_trace_duration": "tracing",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering",
    "/jax/core/compile/backend_compile_duration": "compiling",
}
#: compiles shorter than this (s) pass unannounced: most are JAX's small helpers, or cache hits
ANNOUNCE_AFTER = 1.0


class _State:
    """What the pulse reads: open bars, the phases under way (innermost last), the last time anything was
    said, the open pulse (None: library use, silent) and the expected compile of the engine, if any."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bars: list[Progress] = []
        self.phases: list[_Phase] = []
        self.said = -float("inf")
        self.pulse: Pulse | None = None
        self.expected: tuple[str, str, float, str] | None = None  # (what, history key, seconds, source)


class _Phase:
    def __init__(self, what: str, key: tuple[str, str] | None = None):
        self.what, self.key, self.since = what, key, clock()
        self.expected: tuple[str, str, float, str] | None = None
        self.announced = False


_state = _State()


@contextlib.contextmanager
def doing(what: str) -> Iterator[_Phase]:
    """Names what the process does inside the block, for the pulse ("reading the scenario"); the block may
    set the phase's `what` as it goes."""
    phase = _Phase(what)
    with _state.lock:
        _state.phases.append(phase)
    try:
        yield phase
    finally:
        with _state.lock:
            if phase in _state.phases:
                _state.phases.remove(phase)


def say(line: str) -> None:
    """Writes `line` on stderr while a Pulse is open (a command line), else nothing."""
    pulse = _state.pulse
    if pulse is not None:
        pulse.write(line)


# --- expected compile times ---------------------------------------------------------------------------------

#: rule of thumb for the engine's compile when no compile of the shape was seen here, without the active-set
#: frontier's code (up to 256 items, a small incidence matrix, or a flat program: netsim._runner.engine_options):
#: FLAT_BASE_S plus FLAT_LOOP_S per max-min buffer loop (`kernels.maxmin.buffer_sizes`: one up to 1024 items,
#: 4 at 2048, 6 at 10240, 9 at 114688), each a loop XLA compiles of its own. Measured (a first `netsim run` of
#: k=16 fat-tree random flows, fresh cache, 2 cores, load ~1; benchmarks/RESULTS.md, Round 14): 1.3 s at 224
#: items, 1.0 at 1024, 2.6 at 2048, 3.5 at 3072, 4.0 at 4096, 2.8-4.3 at 10240, 6.9 at 114688 (tolerance
#: 1e-2); the rule says 1.2, 1.2, 3.3, 3.3, 4.0, 4.7, 6.8 (it said 1.7, 3.4, 4, 4, 4, 4, 4). A route's hops do
#: not count: the engine folds over them in blocks (`kernels.maxmin.over_columns`; Round 18: 2.4-2.6 s at 1024
#: items and 4.7-6.7 s at 4096 for routes of 6, 24 and 48 hops, on a machine slower than Round 14's).
FLAT_BASE_S, FLAT_LOOP_S = 0.5, 0.7
#: with the frontier the compile barely grows with the items or the route hops and grows with each item's
#: predecessors: FRONTIER_COMPILE_S + FRONTIER_PREDECESSOR_S per predecessor. Measured
#: (`jax.jit(kernels.run).lower().compile()`, pp_1f1b padded to 2048 items, 2 cores, load ~1.5,
#: benchmarks/RESULTS.md, Round 18): 7.6-10.1 s at 4 hops + 2 predecessors, 10.4 at 8 + 2, 9.5 at 16 + 2, 8.0
#: at 32 + 2, 12.7 at 64 + 2, 10.5-11.1 at 4 + 1024, 12.4 at 64 + 1024; `netsim train --table` on vTrain's
#: multi-node rows 9.6-11.4 s at 4 + 128 (2048 and 4096 items), 11.5-12.6 s at 4 + 1024 (8192); on an
#: earlier, faster machine 7.0-7.4 s at 4 + 2 (Round 13). The rule says 7.0 s at 2 predecessors, 7.5 at 128,
#: 11.1 at 1024. (It was 5.0 + 0.1 s x (hops + predecessors): "expected ~108 s" for a compile of 12.6 s.)
FRONTIER_COMPILE_S, FRONTIER_PREDECESSOR_S = 7.0, 0.004
_HISTORY_FILE = "compile_times.json"
_history: dict[str, float] | None = None


def _history_path() -> str | None:
    from . import _cache

    return None if _cache._folder is None else os.path.join(_cache._folder, _HISTORY_FILE)


def _load_history() -> dict[str, float]:
    global _history
    if _history is None:
        _history = {}
        path = _history_path()
        if path is not None and os.path.exists(path):
            try:
                with open(path) as f:
                    _history = {str(k): float(v) for k, v in json.load(f).items()}
            except (OSError, ValueError, TypeError, AttributeError):  # unreadable: estimate afresh
                _history = {}
    return _history


def _record(key: str, seconds: float) -> None:
    history = _load_history()
    history[key] = round(seconds, 2)
    path = _history_path()
    if path is not None:
        from ._checks import write_atomic

        with contextlib.suppress(OSError):
            write_atomic(path, json.dumps(history, indent=0, sort_keys=True).encode())


def expected_compile(
    what: str, items: int, batch: int = 1, frontier: bool = False, hops: int = 0, predecessors: int = 0
) -> tuple[str, float, str]:
    """(history key, expected seconds, where the figure comes from) of compiling `what` for this shape;
    frontier: whether it holds the active-set frontier's code, most of a large engine's compile; hops and
    predecessors: an item's route hops and predecessors in the shape (the key's; the rule charges the
    predecessors)."""
    key = f"{what}|{items}|{batch}" + (f"|h{hops}p{predecessors}" if frontier else "|flat")
    history = _load_history() if _state.pulse is not None else {}
    if key in history:
        return key, history[key], "its last compile here"
    if frontier:
        rule = FRONTIER_COMPILE_S + FRONTIER_PREDECESSOR_S * predecessors
    else:
        from .kernels.maxmin import buffer_sizes  # the engine's own ladder (jax is imported by now)

        rule = FLAT_BASE_S + FLAT_LOOP_S * len(buffer_sizes(items))
    return key, rule, f"estimate for {items:,} items"


@contextlib.contextmanager
def expect_compile(
    what: str, items: int, batch: int = 1, frontier: bool = False, hops: int = 0, predecessors: int = 0
) -> Iterator[None]:
    """Inside the block, an XLA compile is `what` for this shape (e.g. "the engine", 10240 items; frontier:
    see `expected_compile`): the pulse announces it with the expected time and reports the real one.
    Costs nothing without a Pulse."""
    if _state.pulse is None:
        yield
        return
    key, seconds, source = expected_compile(what, items, batch, frontier, hops, predecessors)
    shape = f"{items:,} items" + (f" x {batch:,} points" if batch > 1 else "")
    previous, _state.expected = _state.expected, (f"{what} for {shape}", key, seconds, source)
    try:
        yield
    finally:
        _state.expected = previous


def _on_start(event: str, value: float, **kwargs) -> None:
    verb = _PHASES.get(event)
    if verb is None or _state.pulse is None:
        return
    name = str(kwargs.get("fun_name", "a function"))
    phase = _Phase(f"{verb} {name} (JAX)", (event, name))
    if _state.expected is not None:
        phase.what = f"{verb} {_state.expected[0]}"
        if verb == "compiling":
            # JAX's small helpers may compile first, inside the same block: the expectation stays until
            # a compile long enough to be the one expected has ended
            phase.expected = _state.expected
    with _state.lock:
        _state.phases.append(phase)


def _on_end(event: str, duration: float, **kwargs) -> None:
    if event not in _PHASES or _state.pulse is None:
        return
    key = (event, str(kwargs.get("fun_name", "a function")))
    with _state.lock:
        ended = next((p for p in reversed(_state.phases) if p.key == key), None)
        if ended is None:
            return
        _state.phases.remove(ended)
    if ended.expected is not None and duration >= ANNOUNCE_AFTER:
        what, history, seconds, source = ended.expected
        say(
            f"{_state.pulse.label}: compiled {what} in {duration:.1f} s (expected ~{seconds:.0f} s: {source})"
        )
        _record(history, duration)
        if _state.expected is ended.expected:
            _state.expected = None
    elif ended.announced:
        say(f"{_state.pulse.label}: {ended.what.replace('compiling', 'compiled', 1)} in {duration:.1f} s")


_listening = False


def _listen() -> None:
    """Registers the JAX listeners once per process (they do nothing while no Pulse is open), as soon as
    JAX's monitoring module is loaded: the pulse's thread may look while another thread imports JAX."""
    global _listening
    monitoring = sys.modules.get("jax.monitoring")
    if _listening or not hasattr(monitoring, "register_event_duration_secs_listener"):
        return
    monitoring.register_scalar_listener(_on_start)
    monitoring.register_event_duration_secs_listener(_on_end)
    _listening = True


class Pulse:
    """While open, a daemon thread writes a line on stderr whenever nothing has been said for `every` s
    (the first after `first` s): the open progress bar with the current phase, or the phase and how long
    it has run. A compile still running after ANNOUNCE_AFTER s is announced at once, with its expected time.

    label: starts every line ("netsim run"). enabled: False opens nothing (--quiet).
    """

    def __init__(
        self,
        label: str,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        first: float = 1.5,
        every: float = 9.5,  # the promise is a line at least every 10 s: poll and thread wake-up are late
        poll: float = 0.25,
    ):
        self.label, self.enabled = label, enabled
        self.stream = sys.stderr if stream is None else stream
        self.first, self.every, self.poll = first, every, poll
        self.t0 = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Pulse:
        if not self.enabled or _state.pulse is not None:  # one pulse per process: the outer one speaks
            self.enabled = False
            return self
        self.t0, _state.said = clock(), -float("inf")
        _state.pulse = self
        _listen()
        self._thread = threading.Thread(target=self._run, name="netsim-pulse", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if not self.enabled:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with _state.lock:
            _state.pulse = None
            _state.phases.clear()
            _state.bars.clear()
            _state.expected = None

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            _listen()  # JAX may arrive after the pulse opened (the commands import it late)
            self.tick()

    def write(self, line: str) -> None:
        bar = next((b for b in reversed(_state.bars) if b.tty and b.drawn), None)
        self.stream.write(("\n" if bar is not None else "") + line + "\n")
        self.stream.flush()
        if bar is not None:
            bar.drawn = False  # its line was ended
        _state.said = clock()

    def tick(self) -> None:
        """One look: announce a long compile, or fill a silence (the thread calls this every `poll` s)."""
        now = clock()
        with _state.lock:
            phase = _state.phases[-1] if _state.phases else None
        if phase is not None and phase.expected is not None and not phase.announced:
            if now - phase.since >= ANNOUNCE_AFTER:
                phase.announced = True
                _, _, seconds, source = phase.expected
                self.write(f"{self.label}: {phase.what} (expected ~{seconds:.0f} s: {source})")
            return
        quiet = now - max(_state.said, self.t0)
        if quiet < (self.first if _state.said < self.t0 else self.every):
            return
        if phase is not None and phase.key is not None and phase.key[0].endswith("backend_compile_duration"):
            phase.announced = True  # a compile long enough to be shown: its end is reported too
        bar = _state.bars[-1] if _state.bars else None
        if bar is not None:
            detail = "" if phase is None else f"{phase.what} for {_clock(now - phase.since)}"
            if phase is not None and phase.expected is not None:
                detail += f" of ~{phase.expected[2]:.0f} s expected"
            bar.show(detail)
            return
        if phase is None:
            self.write(f"{self.label}: working, elapsed {_clock(now - self.t0)}")
            return
        line = f"{self.label}: {phase.what}, {_clock(now - phase.since)}"
        if phase.expected is not None:
            line += f" of ~{phase.expected[2]:.0f} s expected"
        self.write(f"{line}, elapsed {_clock(now - self.t0)}")
