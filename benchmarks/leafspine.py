"""The benchmark scenario: hosts on a leaf-spine, random host pairs, hashed single-path ECMP."""

from __future__ import annotations

import numpy as np

import netsim


def leaf_spine_scenario(
    n_flows: int, *, leaves: int = 32, spines: int = 16, hosts_per_leaf: int = 16, seed: int = 0
) -> netsim.Scenario:
    """2 x leaves x (spines + hosts) directed links (2048 by default); flows of 1-16 MB between hosts
    on different leaves, released over the first millisecond so the event count is ~ the flow count."""
    rng = np.random.default_rng(seed)
    links = []
    for leaf in range(leaves):
        for s in range(spines):
            links += [
                netsim.Link(f"l{leaf}->s{s}", f"l{leaf}", f"s{s}", 50e9, 1e-6),
                netsim.Link(f"s{s}->l{leaf}", f"s{s}", f"l{leaf}", 50e9, 1e-6),
            ]
        for h in range(hosts_per_leaf):
            host = f"h{leaf}.{h}"
            links += [
                netsim.Link(f"{host}->l{leaf}", host, f"l{leaf}", 25e9, 5e-7),
                netsim.Link(f"l{leaf}->{host}", f"l{leaf}", host, 25e9, 5e-7),
            ]
    flows = []
    for i in range(n_flows):
        a, b = rng.choice(leaves, 2, replace=False)
        ha, hb = rng.integers(hosts_per_leaf, size=2)
        spine = int(rng.integers(spines))  # hashed ECMP: one spine per flow
        src, dst = f"h{a}.{ha}", f"h{b}.{hb}"
        route = (f"{src}->l{a}", f"l{a}->s{spine}", f"s{spine}->l{b}", f"l{b}->{dst}")
        flows.append(
            netsim.Flow(
                f"f{i}",
                src,
                dst,
                float(rng.uniform(1e6, 16e6)),
                route=route,
                start=float(rng.uniform(0, 1e-3)),
            )
        )
    return netsim.Scenario(links, flows, name=f"leafspine-{n_flows}")
