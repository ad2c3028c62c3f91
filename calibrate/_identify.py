"""Which fitted parameters the data pins: the fit's curvature, read as eigen-directions.

Each fit keeps the Gauss-Newton curvature of its loss at the best parameters, C = J^T W J over the flat
log-parameters (J: the log-time residuals' Jacobian, the columns `jvp_columns` gives the optimizer;
W: the points' loss weights, summing to 1). Moving the parameters by d along a unit eigenvector of
eigenvalue lam changes the rms log-time error by about sqrt(lam) x d. A direction along which a factor
of 2 (d = ln 2) moves it by less than 1 % is one the data cannot pin: the fit stops anywhere along it,
and two fits of the same tables may disagree off the measured points. A parameter whose unit direction
lies mostly (over half of its squared length) in the span of such directions is reported as free, and a report of such a fit never shows a bare error figure (`FitReport.summary`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

import numpy as np

from ._fit import FitResult
from ._model import Params, Spec

__all__ = ["Identifiability", "identifiability", "parameter_names"]

#: a factor of 2 along a direction that moves the rms log-time error by less than this leaves it free
PINNED_RMS = 0.01


def parameter_names(spec: Spec, params: Params) -> list[str]:
    """A readable name per flat parameter (`ravel_pytree` order, as `Params.fields`): "bandwidth[pcie]",
    "shared[gpu0 staging]", "overhead[LL]", "threshold[LL->Simple]", "launch", ..."""
    regimes = params.costs.regimes
    index = {
        "log_bandwidth": [f"bandwidth[{c}]" for c in spec.link_classes],
        "log_latency": [f"latency[{c}]" for c in spec.link_classes],
        "log_shared": [f"shared[{s}]" for s in spec.shared],
        "log_overhead": [f"overhead[{r}]" for r in regimes],
        "log_inefficiency": [f"efficiency[{r}]" for r in regimes],
        "log_threshold": [f"threshold[{a}->{b}]" for a, b in itertools.pairwise(regimes)],
    }
    names = []
    for field, value in params.fields():
        names += index.get(field, [field.removeprefix("log_")] * int(np.size(value)))
    return names


@dataclasses.dataclass(frozen=True)
class Identifiability:
    """What the fitted tables pin.

    Attributes:
        names: every flat parameter's name (`parameter_names`).
        fitted: names of the parameters that were fitted (not held).
        free: names of fitted parameters the data cannot pin (see the module docstring), in order.
        directions: per unpinned direction, its main parameters with their signs ("+overhead[LL]
            -threshold[LL->Simple]": a change in one is bought back by the other).
        points: measured points per fit stage; parameters fitted per stage.
    """

    names: tuple[str, ...]
    fitted: tuple[str, ...]
    free: tuple[str, ...]
    directions: tuple[str, ...]
    points: tuple[int, ...]
    parameters: tuple[int, ...]

    @property
    def under_determined(self) -> bool:
        return bool(self.free)

    def summary(self) -> str:
        """One line: "identifiable: ..." or "under-determined: free parameters ...", with the count of
        points and fitted parameters of each stage."""
        counts = ", ".join(
            f"{p} point{'s' * (p != 1)} for {k} parameter{'s' * (k != 1)}"
            for p, k in zip(self.points, self.parameters, strict=True)
        )
        if not self.free:
            return f"identifiable: every fitted parameter is pinned by the data ({counts})"
        return (
            f"under-determined: free parameters {', '.join(self.free)} ({counts}); the data cannot pin "
            f"them, so the errors above are not evidence for them. Directions: {'; '.join(self.directions)}"
        )


def identifiability(
    spec: Spec, results: Sequence[FitResult], points: Sequence[int], *, threshold: float = PINNED_RMS
) -> Identifiability:
    """The free parameters of one or several fit stages (each `FitResult` with its own `curvature` and
    fitted set; `points`: the measured points each stage fitted)."""
    names = parameter_names(spec, results[-1].params)
    fitted, free, directions, counts = [], [], [], []
    cut = (threshold / math.log(2.0)) ** 2  # eigenvalue below which a factor 2 moves rms by < threshold
    for res in results:
        idx = np.asarray(res.fitted if res.fitted is not None else [], int)
        counts.append(len(idx))
        fitted += [names[k] for k in idx]
        if res.curvature is None or not len(idx):
            continue
        c = res.curvature[np.ix_(idx, idx)]
        lam, vec = np.linalg.eigh(0.5 * (c + c.T))
        null = vec[:, lam < cut]  # the flat subspace: any basis of it is as good as another
        # a parameter is free when most of its unit direction lies in the flat subspace (basis-free)
        share = np.sum(null**2, axis=1)
        mine = np.flatnonzero(share > 0.5)
        free += [names[idx[m]] for m in mine]
        for k in range(null.shape[1]):  # the directions, read over the free parameters only
            v = null[mine, k]
            main = [m for m, x in zip(mine, v, strict=True) if abs(x) >= 0.3]
            if main:
                sign = {m: "+" if x > 0 else "-" for m, x in zip(mine, v, strict=True)}
                directions.append(" ".join(f"{sign[m]}{names[idx[m]]}" for m in main))
    return Identifiability(
        tuple(names),
        tuple(dict.fromkeys(fitted)),
        tuple(dict.fromkeys(free)),
        tuple(dict.fromkeys(directions)),
        tuple(int(p) for p in points),
        tuple(counts),
    )
