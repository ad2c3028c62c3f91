#!/usr/bin/env bash
# netsim on an accelerator in a few minutes: the test suite, the peer benchmark's netsim side, and a
# throughput table (flows x links x batch, events/s, flow-link updates/s, fraction of the memory
# bandwidth bound).
#
# Usage (repository root, environment with jax[cuda12] and netsim installed):
#     bash benchmarks/gpu_check.sh            # ~5 min on one GPU
#     GPU_CHECK_QUICK=1 bash benchmarks/gpu_check.sh   # small shapes: checks the script itself on a CPU
# Limits (s): TEST_TIMEOUT (default 300), BENCH_TIMEOUT (240), TABLE_TIMEOUT (240).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
QUICK="${GPU_CHECK_QUICK:-0}"
status=0

echo "== device"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" -c "import jax; print('jax', jax.__version__, jax.default_backend(), jax.devices())"

echo "== tests"
if [ "$QUICK" = 1 ]; then tests=(tests/sweep); else tests=(tests); fi
timeout "${TEST_TIMEOUT:-300}" "$PY" -P -m pytest -q -x -p no:cacheprovider "${tests[@]}" || { echo "TESTS FAILED (rc $?)"; status=1; }

echo "== peer benchmark, netsim side (SimGrid is not needed here)"
if [ "$QUICK" = 1 ]; then bench=(--batch 64 --fat-tree 1000); else bench=(--batch 1024 --fat-tree 1000,10000); fi
timeout "${BENCH_TIMEOUT:-240}" "$PY" benchmarks/vs_simgrid.py --no-simgrid "${bench[@]}" || { echo "BENCHMARK FAILED (rc $?)"; status=1; }

echo "== throughput"
GPU_CHECK_QUICK="$QUICK" timeout "${TABLE_TIMEOUT:-240}" "$PY" - <<'EOF' || { echo "THROUGHPUT FAILED (rc $?)"; status=1; }
import os, sys, time
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
import netsim
from netsim import kernels
sys.path.insert(0, "benchmarks")
from vs_simgrid import fat_tree_random, leaf_spine_permutation, pcie_ring

quick = os.environ.get("GPU_CHECK_QUICK") == "1"
dev = jax.devices()[0]
# A max-min round must at least read each flow-hop lane's resource index (4 B) and that resource's
# share (8 B) and scatter the lane's take (8 B): 20 B per flow-link update. The bound below is the
# measured device copy bandwidth / 20 B (nominal HBM bandwidth shown for reference).
BYTES_PER_UPDATE = 20
NOMINAL = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.0e12, "L40S": 0.864e12, "V100": 0.9e12}

def copy_bandwidth() -> float:
    n = (1 << 24) if quick else (1 << 28)  # float32 elements: 64 MiB or 1 GiB
    x = jnp.ones(n, jnp.float32)
    f = jax.jit(lambda a: a * 1.0001)
    f(x).block_until_ready()
    best = min(_t(lambda: f(x).block_until_ready()) for _ in range(5))
    return 2 * 4 * n / best  # read + write

def _t(fn):
    t0 = time.perf_counter(); fn(); return time.perf_counter() - t0

def measure(name, scenario, batch, seed=0):
    c = netsim.compile_scenario(scenario)
    rng = np.random.default_rng(seed)
    cap = c.network.capacity[None, :] * rng.uniform(0.5, 2.0, (batch, c.network.capacity.shape[0]))
    lat = np.broadcast_to(c.network.latency, cap.shape).copy()
    fn = jax.jit(lambda cap, lat, prog: netsim.vmap_run(kernels.Network(cap, lat), prog, max_events=c.max_events))
    args = jax.device_put((cap, lat, c.program))
    t0 = time.perf_counter(); jax.block_until_ready(fn(*args)); first = time.perf_counter() - t0
    best, s = float("inf"), None
    for _ in range(1 if first > 20 else 3):
        t0 = time.perf_counter(); s = jax.block_until_ready(fn(*args)); best = min(best, time.perf_counter() - t0)
    s = jax.device_get(s)
    assert np.all(s.status == kernels.OK), f"{name}: status {np.unique(s.status)}"
    n, h = c.program.route.shape
    events, rounds = int(np.sum(s.events)), int(np.sum(s.rounds))
    return dict(name=name, flows=len(scenario.flows), links=len(scenario.links), batch=batch, lanes=n * h,
                compile=first - best, seconds=best, events=events / best, updates=rounds * n * h / best)

bw = copy_bandwidth()
nominal = next((v for k, v in NOMINAL.items() if k in dev.device_kind), None)
print(f"device {dev.device_kind} ({jax.default_backend()}): copy bandwidth {bw / 1e9:.0f} GB/s"
      + (f", nominal {nominal / 1e9:.0f} GB/s" if nominal else ""))
ring, perm = pcie_ring(), leaf_spine_permutation()
cases = [("pcie8 ring", ring, 1), ("pcie8 ring", ring, 64 if quick else 8192),
         ("leafspine64 perm", perm, 64 if quick else 8192),
         ("fattree16 1e3 flows", fat_tree_random(1000), 1), ("fattree16 1e3 flows", fat_tree_random(1000), 4 if quick else 64)]
if not quick:
    cases.append(("fattree16 1e4 flows", fat_tree_random(10000), 1))
head = f"{'case':<22}{'flows':>7}{'links':>7}{'batch':>7}{'jit s':>8}{'run s':>9}{'events/s':>11}{'updates/s':>11}{'of bound':>9}"
rows = [head, "-" * len(head)]
print(head, flush=True)
for name, sc, batch in cases:
    r = measure(name, sc, batch)
    frac = r["updates"] * BYTES_PER_UPDATE / bw
    line = (f"{name:<22}{r['flows']:>7}{r['links']:>7}{batch:>7}{r['compile']:>8.2f}{r['seconds']:>9.4f}"
            f"{r['events']:>11.3g}{r['updates']:>11.3g}{frac:>9.2%}")
    rows.append(line)
    print(line, flush=True)
print("\n".join(["", f"updates/s: max-min rounds x padded flow-hop lanes per second; bound: {BYTES_PER_UPDATE} B "
                 "per update at the measured copy bandwidth", *rows]))
EOF
exit "$status"
