"""Simulated vs measured iteration times on vTrain's single-node table: the picture in docs/training.md.

    netsim train --table netsim/data/traces/vtrain_ground_truth_single.csv --json vtrain.json
    python benchmarks/training_vtrain.py vtrain.json docs/training_vtrain.png

Held-out rows (index % 5 == 0, the fit's split) are drawn apart from the fitted ones.
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np


def main(src: str, out: str) -> None:
    with open(src) as f:
        rows = json.load(f)["rows"]
    measured = np.array([r["measured_s"] for r in rows]) * 1e3
    predicted = np.array([r["predicted_s"] for r in rows]) * 1e3
    held = np.arange(len(rows)) % 5 == 0
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.loglog(measured[~held], predicted[~held], ".", ms=3, alpha=0.5, label="fitted rows")
    ax.loglog(measured[held], predicted[held], ".", ms=4, color="C3", label="held-out rows")
    lo, hi = measured.min() / 1.5, measured.max() * 1.5
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    for f in (0.7, 1.3):
        ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.6)
    rel = np.abs(predicted / measured - 1)
    ax.set_title(
        f"vTrain 8 x A100: held-out MAPE {100 * rel[held].mean():.1f} %, max {100 * rel[held].max():.0f} %",
        fontsize=9,
    )
    ax.set_xlabel("measured iteration time (ms)")
    ax.set_ylabel("netsim simulated (ms)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
