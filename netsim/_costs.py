"""CostModel: a machine's collective software costs, the one formula that calibration fits and that
collectives built on a calibrated machine pay.

NCCL switches protocol with message size (LL for small messages: half of every 8-byte store is a flag,
50 % payload efficiency, a short per-step latency; Simple for large ones: full bandwidth, a longer
handshake). Each regime has its own per-step overhead and payload efficiency; their logs are blended by
logistic hand-overs in log(bytes per step). Bytes per step is the natural variable: the size where the
fastest protocol changes, (overhead_Simple - overhead_LL) x bandwidth, does not depend on the rank count.
Copies (p2pBandwidthLatencyTest) pay a fixed overhead, and host-staged ones move their bytes at the
staging pipeline's efficiency: cudaMemcpy without P2P bounces each chunk through a pinned buffer and waits
for it, which NCCL's SHM transport (pipelined by the GPU kernels themselves) does not.

Values are kept as logs (every one positive), so that `netsim.calibrate` fits them unconstrained; the
formula is written once, in jax.numpy, and traced by the fit as it is evaluated on the host.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._checks import fraction, number, quantity
from ._compile import bucket
from ._scenario import Flow, Scenario, ScenarioError

__all__ = ["DEFAULT_COSTS", "CostModel"]

#: NCCL-like values, where a calibration gives none. LL: 50 % payload efficiency (a 4-byte flag in
#: every 8-byte store), ~1 us per step; Simple: ~98 % efficiency, ~5 us per step, handing over at 16 KiB
#: per step. Further regimes take 2 us x (index + 1), 90 %, and hand-overs 4 x apart. Host-staged
#: copies (cudaMemcpy with P2P off): ~10 us (m01's P2P=Disabled latency matrix, 10-12 us) and the
#: staging pipeline's 0.77, fitted on m01's P2P=Disabled copies (docs/heldout.md).
DEFAULT_COSTS: dict[str, Any] = {
    "width": 0.5,
    "launch": 0.0,
    "copy_overhead": 1e-6,
    "staged_overhead": 10e-6,
    "staged_efficiency": 0.77,
}
_DEFAULT_REGIMES = {"LL": (1e-6, 0.5), "Simple": (5e-6, 0.98)}


#: zero times are kept as this, so that their logs are finite (s)
_TINY = 1e-15


def _within(value: Any, kind: str, field: str, *, positive: bool = True) -> float:
    """A plain number (`number`) within netsim's limits for `kind` ("time", "bytes"; `quantity`)."""
    return quantity(number(value, field, positive=positive), kind, field, positive=positive)


def _log_inefficiency(efficiency) -> np.ndarray:
    """log(-log(efficiency)); -inf for an efficiency of exactly 1, whose exp gives back 1."""
    with np.errstate(divide="ignore"):
        return np.log(-np.log(np.asarray(efficiency, dtype=np.float64)))


class CostModel(eqx.Module):
    """Collective and copy software costs, as logs (SI units); see the module docstring.

    Attributes:
        log_overhead: per regime, s of software cost per collective step (per flow).
        log_inefficiency: per regime; payload efficiency = exp(-exp(log_inefficiency)) in (0, 1].
        log_threshold: P - 1 hand-over sizes, bytes per step.
        log_width: width of each hand-over, in log(bytes).
        log_launch: s, once per collective (kernel launch and setup).
        log_copy_overhead: s, once per direct (P2P) copy.
        log_staged_overhead: s, once per host-staged copy (the driver's bounce through host memory costs
            ~10 us, an order more than a direct copy).
        log_staged_inefficiency: host-staged copies move bytes at efficiency exp(-exp(.)) of their path's
            rate.
        regimes: the regimes' names, smallest messages first.
    """

    log_overhead: Float[Array, " P"]
    log_inefficiency: Float[Array, " P"]
    log_threshold: Float[Array, " Pm1"]
    log_width: Float[Array, ""]
    log_launch: Float[Array, ""]
    log_copy_overhead: Float[Array, ""]
    log_staged_overhead: Float[Array, ""]
    log_staged_inefficiency: Float[Array, ""]
    regimes: tuple[str, ...] = eqx.field(static=True, default=("LL", "Simple"))

    # --- the formula (jax.numpy: traced by the fit, evaluated eagerly on the host) ---------------------
    def regime_weights(self, step_bytes) -> Float[Array, "*S P"]:
        """Weight of each regime at each bytes-per-step, summing to 1 over the last axis: regime p holds
        past hand-overs < p and before hand-over p, each a logistic step in log(bytes per step)."""
        x = jnp.log(jnp.maximum(jnp.asarray(step_bytes, dtype=jnp.float64), 1.0))[..., None]
        threshold = jnp.reshape(self.log_threshold, (1,) * (x.ndim - 1) + (-1,))  # ranks match: no promotion
        z = (x - threshold) / jnp.exp(self.log_width)
        above = 0.5 * (1.0 + jnp.tanh(0.5 * z))  # the logistic, with finite gradients at any z
        ones = jnp.ones_like(x)
        past = jnp.concatenate([ones, jnp.cumprod(above, axis=-1)], axis=-1)
        return past * jnp.concatenate([1.0 - above, ones], axis=-1)

    def step_costs(self, step_bytes) -> tuple[Array, Array]:
        """(overhead s, payload efficiency) of a collective step at each bytes-per-step: the regimes'
        log overheads and inefficiencies (-log efficiency) blended by `regime_weights`."""
        w = self.regime_weights(step_bytes)
        return jnp.exp(w @ self.log_overhead), jnp.exp(-(w @ jnp.exp(self.log_inefficiency)))

    def flow_costs(self, size, collective, staged) -> tuple[Array, Array]:
        """(overhead s, bytes factor) of flows of `size` bytes: a collective's flow (collective = 1)
        pays its step's blended overhead and carries size / efficiency; a copy (collective = 0) pays the
        copy overhead, host-staged (staged True) or direct, and a host-staged one carries size / staged
        efficiency. Arguments broadcast against each other."""
        over, eff = self.step_costs(size)
        copy = jnp.where(staged, jnp.exp(self.log_staged_overhead), jnp.exp(self.log_copy_overhead))
        staged_factor = jnp.where(staged, jnp.exp(jnp.exp(self.log_staged_inefficiency)), 1.0)
        return (
            collective * over + (1.0 - collective) * copy,
            collective / eff + (1.0 - collective) * staged_factor,
        )

    def stage_copies(self, flows: Sequence[Flow], staged: Sequence[bool]) -> list[Flow]:
        """`flows` with the copy costs of `flow_costs` where `staged` is True (host-staged copies: the
        staged overhead added, bytes / staged efficiency); the others unchanged. How a topology with P2P
        off makes its device-to-device flows pay cudaMemcpy's bounce (`netsim.topology.Topology.scenario`)."""
        flows = list(flows)
        pick = [i for i, s in enumerate(staged) if s]
        if not pick:
            return flows
        size = np.array([flows[i].bytes for i in pick], np.float64)
        with jax.enable_x64(True):
            over, factor = jax.device_get(self.flow_costs(size, 0.0, True))
        over, factor = np.broadcast_to(over, size.shape), np.broadcast_to(factor, size.shape)
        for k, i in enumerate(pick):
            f = flows[i]
            flows[i] = dataclasses.replace(
                f, bytes=f.bytes * float(factor[k]), overhead=f.overhead + float(over[k])
            )
        return flows

    @property
    def launch(self) -> float:
        """s, once per collective: 0 where it was given as 0 (kept as 1e-15 s, for its log)."""
        launch = float(np.exp(self.log_launch))
        return 0.0 if launch <= _TINY * (1 + 1e-9) else launch

    def apply(self, scenario: Scenario) -> Scenario:
        """The scenario of one collective with these costs: every flow's overhead plus its step's
        blended overhead (`flow_costs`), its bytes times 1 / efficiency, its start + launch."""
        return self.apply_each([scenario])[0]

    def apply_each(self, scenarios: Sequence[Scenario]) -> list[Scenario]:
        """`apply` to each scenario, in one evaluation of the formula (a ring search's probes, a sweep's
        sizes)."""
        size = np.array([f.bytes for sc in scenarios for f in sc.flows], np.float64)
        padded = np.ones(bucket(len(size), 64))  # powers of two: a few shapes, a few compiles
        padded[: len(size)] = size
        with jax.enable_x64(True):  # float64, as simulated time; scoped: the caller's config stays
            over, factor = jax.device_get(_collective_costs(self, padded))
        launch, out, k = self.launch, [], 0
        for sc in scenarios:
            flows = [
                dataclasses.replace(
                    f,
                    bytes=f.bytes * float(factor[k + i]),
                    overhead=f.overhead + float(over[k + i]),
                    start=f.start + launch,
                )
                for i, f in enumerate(sc.flows)
            ]
            k += len(flows)
            out.append(dataclasses.replace(sc, flows=tuple(flows)))
        return out

    # --- serialisation: the software entries of a calibration file -------------------------------------
    @classmethod
    def from_values(
        cls, values: Mapping[str, Any], regimes: Sequence[str] | None = None, *, where: str = "software"
    ) -> CostModel:
        """From SI values as `to_values` writes them (a calibration file's "regimes", "width", "launch",
        ...; other keys are ignored, missing ones take DEFAULT_COSTS).

        regimes: which of the file's regimes, in order (default: all, as written). The fields are float64
        NumPy arrays (no x64 flag needed here).

        Raises:
            ScenarioError: naming the field of a missing regime or a value out of range.
        """
        given = values.get("regimes")
        if not isinstance(given, Mapping) or not given:
            raise ScenarioError(f"{where}.regimes: expected an object of regimes, got {given!r}")
        names = tuple(given) if regimes is None else tuple(regimes)
        missing = [r for r in names if r not in given]
        if missing:
            raise ScenarioError(f"{where}.regimes: no value for {missing}")
        v = DEFAULT_COSTS | {k: values[k] for k in DEFAULT_COSTS if k in values}
        over, eff, up_to = [], [], []
        for i, name in enumerate(names):
            r, field = given[name], f"{where}.regimes.{name}"
            if not isinstance(r, Mapping):
                raise ScenarioError(f"{field}: expected overhead, efficiency, up_to, got {r!r}")
            over.append(_within(r.get("overhead"), "time", f"{field}.overhead"))
            eff.append(fraction(r.get("efficiency"), f"{field}.efficiency"))
            if i < len(names) - 1:
                up_to.append(_within(r.get("up_to"), "bytes", f"{field}.up_to"))
        times = {
            k: _within(v[k], "time", f"{where}.{k}", positive=False)
            for k in ("launch", "copy_overhead", "staged_overhead")
        }
        log = lambda xs: np.log(np.asarray(xs, dtype=np.float64))
        return cls(
            log_overhead=log(over),
            log_inefficiency=_log_inefficiency(eff),
            log_threshold=log(up_to).reshape(len(names) - 1),
            log_width=log(number(v["width"], f"{where}.width", positive=True)),
            log_launch=log(max(times["launch"], _TINY)),
            log_copy_overhead=log(max(times["copy_overhead"], _TINY)),
            log_staged_overhead=log(max(times["staged_overhead"], _TINY)),
            # a fit from exactly 1 would have no gradient: kept just below
            log_staged_inefficiency=_log_inefficiency(
                min(fraction(v["staged_efficiency"], f"{where}.staged_efficiency"), 1 - 1e-9)
            ),
            regimes=names,
        )

    @classmethod
    def default(cls) -> CostModel:
        """The model of `defaults()`: what a topology without calibrated costs pays."""
        return _default_model()

    @staticmethod
    def defaults(regimes: Sequence[str] = ("LL", "Simple")) -> dict[str, Any]:
        """NCCL-like values (see DEFAULT_COSTS) with `regimes`, as `to_values` writes them."""
        out = {}
        for i, r in enumerate(regimes):
            over, eff = _DEFAULT_REGIMES.get(r, (2e-6 * (i + 1), 0.9))
            up_to = 16384.0 * 4**i if i < len(regimes) - 1 else None
            out[r] = {"overhead": over, "efficiency": eff, "up_to": up_to}
        return {"regimes": out, **DEFAULT_COSTS}

    def to_values(self) -> dict[str, Any]:
        """SI values, JSON-able: regimes (overhead, efficiency, up_to), width, launch, copy overheads."""
        f = lambda x: [float(v) for v in np.exp(np.asarray(x)).ravel()]
        over, eff = f(self.log_overhead), [float(np.exp(-v)) for v in f(self.log_inefficiency)]
        thr = [*f(self.log_threshold), None]
        return {
            "regimes": {
                r: {"overhead": over[i], "efficiency": eff[i], "up_to": thr[i]}
                for i, r in enumerate(self.regimes)
            },
            "width": float(np.exp(self.log_width)),
            "launch": float(np.exp(self.log_launch)),
            "copy_overhead": float(np.exp(self.log_copy_overhead)),
            "staged_overhead": float(np.exp(self.log_staged_overhead)),
            "staged_efficiency": float(np.exp(-np.exp(self.log_staged_inefficiency))),
        }


@jax.jit  # one dispatch per scenario: a ring search applies the costs to thousands of probes
def _collective_costs(model: CostModel, size: Array) -> tuple[Array, Array]:
    return model.flow_costs(size, 1.0, False)


@functools.cache
def _default_model() -> CostModel:
    return CostModel.from_values(CostModel.defaults(), where="defaults")
