"""The README's picture: a 1F1B pipeline on a 4-GPU PCIe server, simulated, as a timeline.

Each row is a GPU (compute tasks) or a GPU pair (activation and gradient transfers); outlined in red is
the critical path, the chain of tasks and transfers that sets the iteration time.

    python examples/make_readme_figure.py [--out docs/img/pp_1f1b_timeline.png]
"""

from __future__ import annotations

import argparse
import pathlib

import netsim
from netsim.plots import plot_timeline

HERE = pathlib.Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE.parent / "docs" / "img" / "pp_1f1b_timeline.png"))
    args = ap.parse_args()
    result = netsim.simulate(netsim.Scenario.load(HERE / "pp_1f1b.json"))
    title = (
        f"1F1B pipeline, 4 GPUs on PCIe: {result.makespan * 1e3:.1f} ms per iteration (critical path in red)"
    )
    plot_timeline(result, args.out, title=title)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
