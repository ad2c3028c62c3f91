"""Fitting `Params` to experiments by gradient descent through the simulator, and the fit report.

Loss: per experiment, the mean squared error of log time; experiments weigh equally. Gradients are
forward-mode (one JVP per free parameter, through the engine's `lax.while_loop`): with tens of
parameters this compiled faster and ran faster than the checkpointed reverse-mode loop. The
optimizer is Adam with a cosine-decayed learning rate, its rate carried in the optimizer state so
that fits with new learning rates or step counts reuse the compiled step.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from netsim import BatchRun, ScenarioError, SimulationError, jvp_columns
from netsim.checks import count, format_bytes, number, samples, write_atomic

from ._model import (
    Experiment,
    ExperimentBatch,
    Params,
    experiment_batches,
    float64_leaves,
    simulate_experiments,
)
from ._model import times as simulated_times

__all__ = [
    "ExperimentReport",
    "FitReport",
    "FitResult",
    "alpha_beta_fit",
    "compare",
    "descend",
    "evaluate",
    "fit",
    "free_indices",
    "plot_fit",
    "report",
]

_OPTIM = optax.inject_hyperparams(optax.adam)(learning_rate=1e-2)

Freeze = Iterable[str] | Mapping[str, bool | Sequence[int]]


@eqx.filter_jit
def _step(params: Params, opt_state, batches: tuple[ExperimentBatch, ...], free: tuple[jax.Array, ...]):
    # The one jit. Residuals are log-time errors; per batch, one JVP per free parameter that can move
    # it (vmapped) gives the Jacobian columns, and the primal gives the simulated times for the report.
    # The engine's status and event counts come back as data: `fit` checks them on the host.
    flat, unravel = ravel_pytree(params)
    grad, value, out = jnp.zeros_like(flat), 0.0, []

    def residuals(x, b):
        p = unravel(x)
        state = simulate_experiments(p, b)
        return jnp.log(simulated_times(p, b, state)) - jnp.log(b.measured), (state.status, state.events)

    for batch, idx in zip(batches, free, strict=True):
        tangents = (
            jnp.zeros((idx.shape[0], flat.shape[0]), flat.dtype).at[jnp.arange(idx.shape[0]), idx].set(1.0)
        )
        r, jac, (status, events) = jvp_columns(lambda x, b=batch: residuals(x, b), flat, tangents)
        value = value + jnp.sum(batch.weight * r**2)
        grad = grad.at[idx].add(2.0 * jac @ (batch.weight * r))
        out.append((batch.measured * jnp.exp(r), status, events, jac))
    updates, opt_state = _OPTIM.update(unravel(grad), opt_state, params)
    return eqx.apply_updates(params, updates), opt_state, value, tuple(out)


@dataclasses.dataclass(frozen=True)
class FitResult:
    """Fitted parameters and how the fit went.

    Attributes:
        params: the best parameters seen (lowest loss).
        loss: their loss (mean squared log-time error).
        history: loss per step.
        steps: steps taken.
        stopped: "converged" (no relative progress over `patience` steps, the loss's Gauss-Newton
            model promising none either, or `target` reached) or "max_steps".
        simulated: per experiment, the simulated times (s) at `params`.
        curvature: the loss's Gauss-Newton curvature J^T W J at `params` over the flat parameters
            (`ravel_pytree` order; rows and columns of held parameters are 0): see `identifiability`.
        fitted: flat indices of the parameters the fit moved (free, and able to change some point).
    """

    params: Params
    loss: float
    history: tuple[float, ...]
    steps: int
    stopped: str
    simulated: tuple[np.ndarray, ...]
    curvature: np.ndarray | None = None
    fitted: np.ndarray | None = None

    def report(self, experiments: Sequence[Experiment]) -> FitReport:
        """The report of the fitted experiments at the best parameters (no new simulation)."""
        return compare(experiments, self.simulated)


def free_indices(params: Params, freeze: Freeze = ()) -> np.ndarray:
    """Flat indices of the parameters that are fitted (all but `freeze`).

    freeze: names of `Params.fields()` ("log_launch"), or a mapping name -> True / indices to hold.
    """
    items = dict(freeze) if isinstance(freeze, Mapping) else {name: True for name in freeze}
    mask = []
    for name, value in params.fields():
        held = np.zeros(np.shape(value), bool).ravel()
        rule = items.pop(name, False)
        if rule is True:
            held[:] = True
        elif rule is not False:
            held[np.asarray(list(rule), int)] = True
        mask.append(held)
    if items:
        raise ScenarioError(
            f"freeze: unknown parameter(s) {sorted(items)}; known: {[name for name, _ in params.fields()]}"
        )
    return np.flatnonzero(~np.concatenate(mask)).astype(np.int32)


def _with(freeze: Freeze, name: str) -> Freeze:
    """`freeze` with field `name` held as well."""
    if isinstance(freeze, Mapping):
        return {**freeze, name: True}
    return (*freeze, name)


def fit(
    params: Params,
    experiments: Sequence[Experiment],
    *,
    steps: int = 500,
    learning_rate: float = 0.05,
    freeze: Freeze = (),
    patience: int = 50,
    tol: float = 1e-4,
    target: float = 0.0,
    progress: Callable[[str], None] | None = print,
    log_every: int = 50,
) -> FitResult:
    """Fits `params` to `experiments` with Adam, from the given start.

    Args:
        params: starting values (see `Params.from_values`).
        experiments: measured tables (see `collective_experiment`, `p2p_experiment`).
        steps: most optimizer steps.
        learning_rate: peak Adam rate (in log units), decayed by a cosine to 1 % at `steps`.
        freeze: parameters held at their starting values (see `free_indices`).
        patience, tol: stop early once the best loss has not improved by a fraction `tol` for
            `patience` steps, or once the loss's Gauss-Newton model (from the Jacobian each step computes)
            finds no point below the best loss by a fraction `tol`, along the directions the data pins.
        target: stop once the loss is at most this.
        progress: called with one line every `log_every` steps and at the end; None for silence.
    """
    if not experiments:
        raise ScenarioError("fit: no experiments to fit")
    steps = count(steps, "fit: steps")
    learning_rate = number(learning_rate, "fit: learning_rate")  # 0: evaluate only (see `evaluate`)
    patience, log_every = count(patience, "fit: patience"), count(log_every, "fit: log_every")
    tol, target = number(tol, "fit: tol"), number(target, "fit: target")
    laid, where = experiment_batches(experiments)
    with (
        jax.enable_x64(True),
        jax.numpy_dtype_promotion("standard"),
    ):  # optax.adam fails under strict promotion
        params = float64_leaves(params)
        copies = [e for e in experiments if e.kind != "collective"]
        if copies and all(np.all(e.staged) for e in copies):
            # without a direct copy, the staging efficiency and the link figures enter staged copies
            # only as a product: hold the efficiency at 1 rather than let it trade against the links
            # (without any copy it is not touched: a collectives-only stage keeps the copies' value)
            freeze = _with(freeze, "log_staged_inefficiency")
            params = eqx.tree_at(lambda p: p.costs.log_staged_inefficiency, params, jnp.asarray(np.log(1e-9)))
        mask = np.zeros(ravel_pytree(params)[0].shape[0], bool)
        mask[free_indices(params, freeze)] = True
        free = []
        for b in range(len(laid)):
            relevant = np.zeros_like(mask)
            for i, (k, _, _) in enumerate(where):
                if k == b:
                    relevant |= experiments[i].relevant(params)
            free.append(jnp.asarray(np.flatnonzero(mask & relevant), jnp.int32))
        free = tuple(free)
        step = lambda p, state: _step(p, state, laid, free)
        check = lambda out: _check(out, laid, where, experiments)
        floor = lambda out, value: _gauss_newton_floor(*_gauss_newton(laid, out, free, mask.size), value)
        best, best_loss, out, history, stopped = descend(
            step,
            params,
            steps=steps,
            learning_rate=learning_rate,
            patience=patience,
            tol=tol,
            target=target,
            progress=progress,
            log_every=log_every,
            check=check,
            floor=floor,
            describe=lambda v: f"rms log-time error {math.sqrt(v):.2%}",
        )
        best_times = np.asarray(jax.device_get(jnp.concatenate([t for t, _, _, _ in out])))
    simulated = _split(laid, where, best_times)
    _, curvature = _gauss_newton(laid, out, free, mask.size)  # at `best`
    fitted = np.unique(np.concatenate([np.asarray(i) for i in free])).astype(np.int32)
    return FitResult(
        jax.device_get(best), best_loss, tuple(history), len(history), stopped, simulated, curvature, fitted
    )


def _gauss_newton(laid, out, free, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(J^T W r, J^T W J) over the n flat parameters from a step's aux `out` (rows and columns of the
    parameters a batch does not move are 0): the loss sum(W r^2) is r^T W r, its Gauss-Newton model
    about the point is (r + J s)^T W (r + J s)."""
    g, c = np.zeros(n), np.zeros((n, n))
    for b, (times, _, _, jac), idx in zip(laid, out, free, strict=True):
        idx, jac = np.asarray(idx), np.asarray(jax.device_get(jac))
        w = np.asarray(b.weight)
        r = np.log(np.asarray(jax.device_get(times)) / np.asarray(b.measured))
        g[idx] += jac @ (w * r)
        c[np.ix_(idx, idx)] += (jac * w) @ jac.T
    return g, c


def _gauss_newton_floor(g: np.ndarray, c: np.ndarray, loss: float) -> float:
    """The lowest loss of the Gauss-Newton model (r + J s)^T W (r + J s) about a point of loss r^T W r,
    with g = J^T W r and c = J^T W J: loss - g^T c^+ g, over the directions of numerically nonzero
    curvature (flat ones, which the data does not pin, promise nothing)."""
    lam, vec = np.linalg.eigh(c)
    keep = lam > 1e-9 * max(float(lam.max(initial=0.0)), 0.0)
    if not keep.any():
        return loss
    return loss - float(np.sum((vec[:, keep].T @ g) ** 2 / lam[keep]))


def descend(
    step: Callable,
    params,
    *,
    steps: int,
    learning_rate: float,
    patience: int,
    tol: float,
    target: float,
    progress: Callable[[str], None] | None,
    log_every: int,
    check: Callable[[object], None] = lambda aux: None,
    floor: Callable[[object, float], float] | None = None,
    describe: Callable[[float], str] = lambda value: "",
) -> tuple[object, float, object, tuple[float, ...], str]:
    """The optimizer loop every fit shares: Adam (`_OPTIM`) with a cosine-decayed rate, keeping the best
    parameters seen, stopping early on no progress or at `target`, printing progress.

    Call it inside `jax.enable_x64(True)` and `jax.numpy_dtype_promotion("standard")`.

    Args:
        step: (params, opt_state) -> (new params, opt_state, loss of `params`, aux); jitted by the
            caller, with the rate read from `opt_state.hyperparams["learning_rate"]`.
        check: called with each step's aux on the host (raise there to stop).
        floor: (aux, loss) -> the lowest loss a model of the loss about the current parameters reaches
            (`fit`: its Gauss-Newton model); the descent stops, converged, once that is not below the best
            loss by a fraction `tol` (no better point is left near here for Adam to wander towards).
        describe: loss -> the rest of a progress line.
        Others: as `fit`'s.

    Returns:
        (best params, their loss, their aux, loss per step, "converged" or "max_steps").
    """
    schedule = optax.cosine_decay_schedule(learning_rate, max(steps, 1), alpha=0.01)
    opt_state = _OPTIM.init(params)
    best, best_loss, best_aux, last_gain, history = params, math.inf, None, 0, []
    stopped = "max_steps"
    if progress:
        progress("compiling (first step takes ~20 s)")
    for k in range(steps):
        opt_state.hyperparams["learning_rate"] = jnp.asarray(schedule(k))
        new, opt_state, value, aux = step(params, opt_state)
        check(aux)
        value = float(value)  # loss of `params`, before this update
        history.append(value)
        if not math.isfinite(value):
            raise FloatingPointError(f"fit: loss became {value} at step {k}; lower learning_rate")
        if value < best_loss * (1 - tol):
            last_gain = k
        if value < best_loss:
            best, best_loss, best_aux = params, value, aux
        if progress and k % log_every == 0:
            progress(f"step {k:5d}  loss {value:.3e}  {describe(value)}")
        if (
            k - last_gain >= patience
            or value <= target
            or (floor and floor(aux, value) >= best_loss * (1 - tol))
        ):
            stopped = "converged"
            break
        params = new
    if progress:
        progress(f"{stopped} after {len(history)} steps: loss {best_loss:.3e} ({describe(best_loss)})")
        if (
            stopped == "max_steps"
            and steps > 1
            and last_gain >= len(history) - max(2, min(patience, steps // 10))
        ):
            progress(
                f"warning: stopped at the step limit ({steps}) with the loss still falling; "
                "more steps may fit better"
            )
    return best, best_loss, best_aux, tuple(history), stopped


def evaluate(
    params: Params, experiments: Sequence[Experiment], *, freeze: Freeze = ()
) -> tuple[float, tuple]:
    """(loss, simulated times per experiment) at `params`, through the fit's compiled step: called with
    the experiments and `freeze` of a fit, it reuses that fit's compile."""
    res = fit(params, experiments, steps=1, learning_rate=0.0, freeze=freeze, progress=None)
    return res.loss, res.simulated


def _split(laid, where, times: np.ndarray) -> tuple[np.ndarray, ...]:
    offsets = np.cumsum([0] + [b.n_points for b in laid])
    return tuple(times[offsets[k] + lo : offsets[k] + hi] for k, lo, hi in where)


def _check(out, laid, where, experiments) -> None:
    """Raises SimulationError naming the experiment whose simulation did not finish (status on the host)."""
    for b, ((_, status, events, _), batch) in enumerate(zip(out, laid, strict=True)):
        status = np.asarray(status)
        if np.any(status != 0):
            names = [experiments[i].name for i, (k, _, _) in enumerate(where) if k == b]
            try:
                BatchRun(status, np.asarray(events), batch.max_events, {}).check(" + ".join(names))
            except SimulationError as e:
                raise SimulationError(f"fit: {e}") from None


# --- report ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ExperimentReport:
    """Measured against simulated, in the unit the tool reports.

    Attributes:
        name, kind: the experiment's.
        quantity: "busbw" (collectives, bytes/s), "bandwidth" (copies, bytes/s) or "latency" (s).
        labels: per point, size in bytes or "i->j".
        measured, simulated: per point, in SI units of `quantity`.
    """

    name: str
    kind: str
    quantity: str
    labels: tuple
    measured: np.ndarray
    simulated: np.ndarray

    @property
    def relative_error(self) -> np.ndarray:
        """(simulated - measured) / measured, per point."""
        return self.simulated / self.measured - 1.0

    @property
    def mean_error(self) -> float:
        return float(np.mean(np.abs(self.relative_error)))

    @property
    def max_error(self) -> float:
        return float(np.max(np.abs(self.relative_error)))

    def table(self) -> list[str]:
        """Measured vs simulated per point, aligned: size (or cell), measured, simulated, error."""
        unit, scale = ("us", 1e6) if self.quantity == "latency" else ("GB/s", 1e-9)
        label = "size" if self.quantity == "busbw" else "cell"
        rows = [f"{label:>10}  {'measured ' + self.quantity:>18}  {'simulated':>18}  {'error':>8}"]
        for x, m, s, r in zip(self.labels, self.measured, self.simulated, self.relative_error, strict=True):
            name = format_bytes(x) if self.quantity == "busbw" else str(x)
            rows.append(f"{name:>10}  {m * scale:>13.4g} {unit:<4}  {s * scale:>13.4g} {unit:<4}  {r:>+8.2%}")
        return rows


@dataclasses.dataclass(frozen=True)
class FitReport:
    """Measured against simulated per experiment; `free`: fitted parameters the data cannot pin
    (`netsim.calibrate.identifiability`), whose presence marks every error figure as no evidence."""

    experiments: tuple[ExperimentReport, ...]
    free: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> ExperimentReport:
        for e in self.experiments:
            if e.name == name:
                return e
        raise KeyError(f"no experiment {name!r}; have {[e.name for e in self.experiments]}")

    def summary(self, *, points: bool = False) -> str:
        """One line per experiment (mean and max |relative error|), optionally every point; aligned columns.
        An under-determined fit (`free`) marks its figures with * and says which parameters are free."""
        width = max([len("experiment")] + [len(e.name) for e in self.experiments])
        lines = [f"{'experiment':<{width}}  {'quantity':>9} {'points':>6} {'mean err':>9} {'max err':>9}"]
        mark = "*" if self.free else ""
        for e in self.experiments:
            lines.append(
                f"{e.name:<{width}}  {e.quantity:>9} {len(e.labels):>6} {e.mean_error:>8.2%}{mark or ' '}"
                f"{e.max_error:>8.2%}{mark}"
            )
            if points:
                lines += ["    " + line for line in e.table()]
        if self.free:
            lines.append(
                f"* under-determined: free parameters {', '.join(self.free)}: the data cannot pin them, so "
                "these errors say nothing of them (another fit may predict otherwise between the points)"
            )
        return "\n".join(lines)


def report(params: Params, experiments: Sequence[Experiment]) -> FitReport:
    """Per-point measured and simulated values of every experiment under `params` (held-out tables)."""
    frozen = [name for name, _ in params.fields()]
    return compare(experiments, evaluate(params, experiments, freeze=frozen)[1])


def compare(experiments: Sequence[Experiment], simulated: Sequence[np.ndarray]) -> FitReport:
    """The report of experiments against their simulated times (s), in the tools' units (busbw, ...)."""
    out = []
    for exp, t in zip(experiments, simulated, strict=True):
        m = np.asarray(exp.measured)
        if exp.kind == "latency":
            out.append(ExperimentReport(exp.name, exp.kind, "latency", exp.labels, m, t))
        else:
            moved = np.asarray(exp.moved) * exp.factor
            quantity = "busbw" if exp.kind == "collective" else "bandwidth"
            out.append(ExperimentReport(exp.name, exp.kind, quantity, exp.labels, moved / m, moved / t))
    return FitReport(tuple(out))


def plot_fit(
    rep: FitReport,
    path: str | os.PathLike | None = None,
    *,
    baselines: Mapping[str, Mapping[str, np.ndarray]] = {},
    title: str = "",
):
    """busbw vs size, measured (markers) and simulated (lines), for every collective in `rep`; returns the
    matplotlib Figure and, given `path`, writes a PNG there (as netsim.plots' functions do).

    baselines: experiment name -> {label: simulated busbw per point} drawn dashed (e.g. alpha-beta).
    """
    import io

    import matplotlib.ticker
    from matplotlib.figure import Figure

    colls = [e for e in rep.experiments if e.quantity == "busbw"]
    if not colls:
        raise ScenarioError("plot_fit: the report has no collective experiment to plot")
    fig = Figure(figsize=(6 * len(colls), 4.2), layout="constrained")  # no pyplot state
    for ax, e in zip(fig.subplots(1, len(colls), squeeze=False)[0], colls, strict=True):
        size = np.asarray(e.labels, float)
        ax.plot(size, e.measured / 1e9, "o", color="black", label="measured")
        # "x" marks each simulated point, so a one-size table shows its model point too
        ax.plot(
            size,
            e.simulated / 1e9,
            "-x",
            color="tab:blue",
            label=f"netsim (mean {e.mean_error:.1%}, max {e.max_error:.1%})",
        )
        for label, values in baselines.get(e.name, {}).items():
            err = np.abs(np.asarray(values) / e.measured - 1)
            ax.plot(
                size,
                np.asarray(values) / 1e9,
                "--x",
                label=f"{label} (mean {err.mean():.1%}, max {err.max():.1%})",
            )
        ax.set_xscale("log", base=2)
        if size.min() == size.max():  # one size: an octave either side, not matplotlib's offset ticks
            ax.set_xlim(size.min() / 2, size.max() * 2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: format_bytes(x)))
        ax.set_ylim(bottom=0)  # busbw from zero: relative gaps read as they are
        ax.set_xlabel("size")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(e.name)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    if path is not None:
        png = io.BytesIO()
        fig.savefig(png, dpi=110, format="png")
        write_atomic(path, png.getvalue())
    return fig


def alpha_beta_fit(sizes, times, *, iterations: int = 100) -> tuple[float, float, np.ndarray]:
    """The plain 2-parameter model t = alpha + S / beta, least squares on log time (Gauss-Newton).

    sizes (bytes) and times (s): as many of each, at least 2, finite and > 0 (else ScenarioError).
    Returns (alpha s, beta bytes/s, fitted times).
    """
    s, t = samples(sizes, "sizes", positive=True), samples(times, "times", positive=True)
    if len(s) != len(t):
        raise ScenarioError(f"alpha_beta_fit: {len(s)} sizes but {len(t)} times; expected one time per size")
    if len(s) < 2:
        raise ScenarioError(f"alpha_beta_fit: needs at least 2 (size, time) points, got {len(s)}")
    count(iterations, "iterations")
    x = np.array(
        [np.log(t.min()), np.log(s.max() / t.max())]
    )  # start: latency-bound small, bandwidth-bound large
    for _ in range(iterations):
        a, b = np.exp(x)
        model = a + s / b
        r = np.log(model) - np.log(t)
        jac = np.stack([a / model, -(s / b) / model], axis=1)
        step, *_ = np.linalg.lstsq(jac, -r, rcond=None)
        x = x + step
        if np.max(np.abs(step)) < 1e-12:
            break
    a, b = np.exp(x)
    return float(a), float(b), a + s / b
