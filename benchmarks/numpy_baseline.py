"""The naive baseline: a plain NumPy event loop with classic progressive filling.

Same model as netsim (release, route latency, max-min sharing, dependencies ignored here: the benchmark
flows are independent), vectorized with NumPy where it is natural, one bottleneck link frozen per round.
"""

from __future__ import annotations

import numpy as np

import netsim


def classic_maxmin(capacity: np.ndarray, route: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Max-min rates, freezing the single most constrained link per round (route pad = len(capacity))."""
    n_res = len(capacity)
    rate = np.zeros(route.shape[0])
    live = active.copy()
    spare = capacity.astype(float).copy()
    while live.any():
        users = np.bincount(route[live].ravel(), minlength=n_res + 1)[:n_res]
        share = np.where(users > 0, spare / np.maximum(users, 1), np.inf)
        link = int(np.argmin(share))
        on = live & np.any(route == link, axis=1)
        rate[on] = share[link]
        np.subtract.at(spare, route[on].ravel()[route[on].ravel() < n_res], share[link])
        live &= ~on
    return rate


def numpy_simulate(compiled: netsim.Compiled) -> np.ndarray:
    """Finish time of every flow of an independent-flow scenario."""
    cap = np.asarray(compiled.network.capacity)
    lat = np.asarray(compiled.network.latency)
    route = np.asarray(compiled.program.route)[: compiled.n_flows]
    size = np.asarray(compiled.program.size)[: compiled.n_flows]
    release = np.asarray(compiled.program.release)[: compiled.n_flows]
    first = (
        release
        + np.where(route < len(cap), np.append(lat, 0.0)[route], 0.0).sum(1)
        + np.asarray(compiled.program.overhead)[: compiled.n_flows]
    )
    left = size.copy()
    finish = np.full(len(size), np.inf)
    t = 0.0
    while np.isinf(finish).any():
        moving = (first <= t) & np.isinf(finish)
        rate = classic_maxmin(cap, route, moving)
        with np.errstate(divide="ignore"):
            t_done = np.where(moving, t + left / np.where(rate > 0, rate, np.nan), np.inf)
        t_next = min(
            np.nanmin(np.where(moving, t_done, np.inf)),
            np.min(np.where(~moving & np.isinf(finish), first, np.inf)),
        )
        left = np.where(moving, left - rate * (t_next - t), left)
        done = moving & (t_done <= t_next * (1 + 1e-12))
        finish[done] = t_next
        left[done] = 0.0
        t = t_next
    return finish
