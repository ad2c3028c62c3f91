"""netsim latency against BookSim2 (cycle-accurate NoC simulator) on the same points, as whole processes.

Runs BookSim2 once per offered rate (its router: the pipeline of its src/examples/mesh88_lat, the `booksim`
preset netsim is calibrated to), then `python -m netsim.cli latency` with an empty compile cache and
`--repeat` times (3) with it warm (the median counts), and prints both curves side by side, the errors and
the speed ratio.

    python benchmarks/booksim_peer.py --topology mesh:16x16 --traffic uniform --packet-size 4 \\
        --rates 0.005,0.015,0.025,0.035,0.045 [--booksim PATH] [--record OUT.json]

--booksim defaults to $HOME/.cache/booksim/booksim (build it from github.com/booksim/booksim2: `cd src &&
make`). --record writes BookSim's curve in the format of netsim/data/booksim/*.json. --sample-period N
lengthens BookSim's runs (its sample_period, default 1000 cycles): past saturation of a few channels only
their flows are throttled, and a default-length run can end before their queues lift its averages.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: BookSim2's src/examples/mesh88_lat router (what the `booksim` preset models); latency mode, fixed seed
ROUTER = dict(
    routing_function="dor",
    num_vcs=8,
    vc_buf_size=8,
    wait_for_tail_credit=1,
    vc_allocator="islip",
    sw_allocator="islip",
    alloc_iters=1,
    credit_delay=2,
    routing_delay=0,
    vc_alloc_delay=1,
    sw_alloc_delay=1,
    input_speedup=2,
    output_speedup=1,
    internal_speedup=1.0,
    sim_type="latency",
    seed=7,
)
AVERAGES = {  # the last "Overall Traffic Statistics" block of BookSim's output
    "packet_latency": r"Packet latency average = ([0-9.eE+-]+)",
    "network_latency": r"Network latency average = ([0-9.eE+-]+)",
    "accepted_packet_rate": r"Accepted packet rate average = ([0-9.eE+-]+)",
    "hops": r"Hops average = ([0-9.eE+-]+)",
}


def booksim_config(
    topology: str, traffic: str, packet_size: int, vcs: int | None, buffer: int | None
) -> dict:
    kind, sides = topology.split(":")
    k = sides.split("x")
    cfg = dict(ROUTER, topology=kind, k=int(k[0]), n=len(k), traffic=traffic, packet_size=packet_size)
    if kind == "torus":
        cfg["routing_function"] = "dim_order"  # BookSim's name for DOR with dateline VCs on a torus
    if vcs:
        cfg["num_vcs"] = vcs
    if buffer:
        cfg["vc_buf_size"] = buffer
    return cfg


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children: on a shared, loaded machine a
    fairer measure than wall time, which waits for other people's work."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def booksim_point(binary: str, cfg: dict, rate: float, timeout: float) -> dict:
    text = "".join(f"{k} = {v};\n" for k, v in dict(cfg, injection_rate=rate).items())
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as f:
        f.write(text)
    t0 = time.perf_counter()
    try:
        out = subprocess.run([binary, f.name], capture_output=True, text=True, timeout=timeout).stdout
    except subprocess.TimeoutExpired:
        out = ""
    finally:
        os.unlink(f.name)
    point = {"rate": rate, "wall_s": round(time.perf_counter() - t0, 3)}
    block = out.rsplit("Overall Traffic Statistics", 1)[-1]
    point["stable"] = "Overall Traffic Statistics" in out and "unstable" not in out.lower()
    for key, pattern in AVERAGES.items():
        m = re.search(pattern, block)
        point[key] = float(m.group(1)) if m else None
    return point


def netsim_curve(args, cache: str) -> tuple[dict, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "curve.json")
        cmd = [
            sys.executable,
            "-m",
            "netsim.cli",
            "latency",
            "--topology",
            args.topology,
            "--traffic",
            args.traffic,
            "--packet-size",
            str(args.packet_size),
            "--rates",
            args.rates,
            "--json",
            out,
        ]
        cmd += [f"--vcs={args.vcs}"] if args.vcs else []
        cmd += [f"--buffer={args.buffer}"] if args.buffer else []
        t0, c0 = time.perf_counter(), children_cpu()
        subprocess.run(
            cmd, check=True, capture_output=True, cwd=ROOT, env=dict(os.environ, NETSIM_CACHE_DIR=cache)
        )
        wall, cpu = time.perf_counter() - t0, children_cpu() - c0
        with open(out) as f:
            return json.load(f), wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--booksim", default=os.path.join(os.path.expanduser("~"), ".cache", "booksim", "booksim")
    )
    ap.add_argument("--topology", default="mesh:8x8")
    ap.add_argument("--traffic", default="uniform")
    ap.add_argument("--packet-size", type=int, default=4)
    ap.add_argument("--rates", required=True)
    ap.add_argument("--vcs", type=int)
    ap.add_argument("--buffer", type=int)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per BookSim point")
    ap.add_argument("--record", help="write BookSim's curve here (netsim/data/booksim format)")
    ap.add_argument("--sample-period", type=int, help="BookSim's sample_period (cycles; default 1000)")
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="warm netsim runs; the median is reported (a 2 s process "
        "varies by +-0.2 s from run to run, BookSim's tens of seconds far less)",
    )
    args = ap.parse_args()
    if not os.path.exists(args.booksim):
        sys.exit(f"booksim_peer: no BookSim2 binary at {args.booksim} (--booksim PATH)")
    cfg = booksim_config(args.topology, args.traffic, args.packet_size, args.vcs, args.buffer)
    if args.sample_period:
        cfg["sample_period"] = args.sample_period
    rates = [float(r) for r in args.rates.split(",")]
    t0, c0 = time.perf_counter(), children_cpu()
    points = []
    for r in rates:
        points.append(booksim_point(args.booksim, cfg, r, args.timeout))
        if not points[-1]["stable"]:
            break  # past saturation
    booksim_wall, booksim_cpu = time.perf_counter() - t0, children_cpu() - c0
    with tempfile.TemporaryDirectory() as cache:
        _, cold, cold_cpu = netsim_curve(args, cache)
        runs = sorted((netsim_curve(args, cache) for _ in range(max(1, args.repeat))), key=lambda x: x[1])
        ours, warm, warm_cpu = runs[len(runs) // 2]
    print(
        f"{args.topology} {args.traffic}, {args.packet_size}-flit packets; load average {os.getloadavg()[0]:.2f}"
        f" on {os.cpu_count()} cores"
    )
    print(f"{'rate':>9} {'BookSim':>9} {'netsim':>9} {'error %':>8}")
    errors = []
    for p, q in zip(points, ours["points"], strict=False):
        b, n = p["packet_latency"], q["latency"]
        err = (n / b - 1) * 100 if b and n else float("nan")
        errors.append(abs(err))
        print(
            f"{p['rate']:9.4g} {b if b else float('nan'):9.2f} {n if n else float('inf'):9.2f} {err:+8.1f}"
            + ("" if p["stable"] else "  (BookSim unstable)")
        )
    print(
        f"mean |error| {sum(errors) / len(errors):.1f} %, max {max(errors):.1f} %; netsim saturation "
        f"{ours['saturation']:.4g}"
    )
    print(
        f"wall: BookSim {booksim_wall:.2f} s, netsim {cold:.2f} s (cold cache) / {warm:.2f} s (warm, median "
        f"of {len(runs)}): "
        f"{booksim_wall / warm:.1f}x faster warm"
    )
    print(
        f"CPU:  BookSim {booksim_cpu:.2f} s, netsim {cold_cpu:.2f} s (cold cache) / {warm_cpu:.2f} s (warm): "
        f"{booksim_cpu / warm_cpu:.1f}x less warm"
    )
    if args.record:
        commit = None
        src = os.environ.get("BOOKSIM_SRC")
        if src:
            commit = subprocess.run(
                ["git", "-C", src, "log", "-1", "--format=%H"], capture_output=True, text=True
            ).stdout.strip()
        doc = {
            "booksim_commit": commit,
            "command": "booksim CONFIG, once per rate, CONFIG = `config` below plus "
            "`injection_rate = RATE;` (benchmarks/booksim_peer.py --record writes this format)",
            "config": cfg,
            "points": points,
        }
        with open(args.record + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(args.record + ".tmp", args.record)


if __name__ == "__main__":
    main()
