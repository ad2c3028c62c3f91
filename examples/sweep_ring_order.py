"""Placement callback for examples/sweep_ring_order.json: rank r of the ring runs on GPU order[r]."""

import dataclasses

from netsim import Scenario


def place(scenario: Scenario, order: list[int]) -> Scenario:
    """Moves every flow from gpu{i} to gpu{order[i]}; routes are recomputed (shortest path)."""
    if sorted(order) != list(range(len(order))):
        raise ValueError(f"order: expected a permutation of 0..{len(order) - 1}, got {order!r}")
    gpu = {f"gpu{i}": f"gpu{g}" for i, g in enumerate(order)}
    flows = tuple(
        dataclasses.replace(f, src=gpu.get(f.src, f.src), dst=gpu.get(f.dst, f.dst), route=None)
        for f in scenario.flows
    )
    return dataclasses.replace(scenario, flows=flows)
