"""Job traffic models fitted to DeepShare's tables (netsim.calibrate.jobs): the isolated iteration
against its closed form, the loss gradient against finite differences, a short fit lowering the loss,
the shipped models, and clear errors for bad pairs. One small layout (2 servers, 3 configs) for all."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from netsim.calibrate import jobs

from netsim import ScenarioError
from netsim.jobs import (
    MODELS,
    SERVER_COLLECTIVES,
    DeepShareTable,
    Job,
    Model,
    Paces,
    deepshare_cluster,
    job_workload,
    load_models,
)

FABRIC = deepshare_cluster(2, 8, oversubscription=1.0)  # NICs of 100 Gb/s, PCIe faster
CONFIGS = (("FSDP", 2, 2), ("MoE", 2, 2), ("MoE", 4, 2))
NIC = 100e9 / 8
START = {  # 12.5 MB per extra server: 1 ms at the NIC per collective
    "FSDP": Model("fsdp", 0.05, 2e8, "", 12.5e6),
    "MoE": Model("alltoall", 0.03, 1.5e8, "", 12.5e6),
}


@pytest.fixture(scope="module")
def tiny():
    full = DeepShareTable.load()
    idx = [full.configs.index(c) for c in CONFIGS]
    return DeepShareTable(CONFIGS, {c: full.isolated[c] for c in CONFIGS}, full.ratio[np.ix_(idx, idx)])


@pytest.fixture(scope="module")
def pred(tiny):  # every test's simulations share this one layout (one compile per jitted function)
    return jobs.predict_jobs(START, tiny, fabric=FABRIC, max_iterations=3)


@pytest.fixture
def standard():
    with jax.numpy_dtype_promotion("standard"):
        yield


def layout(table):
    patterns = {m: START[m].pattern for m in START}
    return jobs._setup(table, None, START, FABRIC, patterns, 3)


def test_isolated_iteration_is_the_closed_form(pred):
    # alone, a job's iteration is compute + its per-server egress at the NIC (the slowest link), the
    # bytes per extra server included: FSDP 2 GPUs on 2 servers moves 3 (1/2) S in two concurrent flows
    # per NIC, each collective with its 12.5 MB; MoE two all-to-alls of k S (1 - 1/n), 12.5 MB over both
    fsdp = 0.05 + (1.5 * 2e8 + 2 * 12.5e6) / NIC
    moe = lambda k: 0.03 + (2 * k * (1 - 1 / 2) * 1.5e8 + 12.5e6) / NIC
    np.testing.assert_allclose(pred.alone, [fsdp, moe(1), moe(2)], rtol=1e-9)
    # throughput of MoE,4,2 over MoE,2,2: twice the GPUs at the iteration-time ratio
    assert pred.iso_configs == (("MoE", 4, 2),)
    assert pred.iso_simulated[0] == pytest.approx(2 * moe(1) / moe(2), rel=1e-9)
    for (m, g, n), t in zip(CONFIGS, pred.alone, strict=True):
        # the estimate that sizes a pair's iterations
        estimate = Paces(FABRIC, collectives=SERVER_COLLECTIVES).estimate
        gpus = [f"n{s}/gpu{k}" for s in range(n) for k in range(g // n)]
        member = (
            (START[m].pattern, START[m].compute, START[m].comm_bytes, g, START[m].server_bytes),
            tuple(gpus),
        )
        assert t == pytest.approx(estimate(member), rel=1e-12)


def test_colocation_slows_both_and_self_pair_by_the_closed_form(pred):
    r = dict(zip(pred.entries, pred.simulated, strict=True))
    # two identical FSDP jobs in phase share every NIC at half rate while communicating:
    # ratio = (c + a) / (c + 2a), a = the communication time alone (the bytes per extra server shared too)
    a = (1.5 * 2e8 + 2 * 12.5e6) / NIC
    assert r[CONFIGS[0], CONFIGS[0]] == pytest.approx((0.05 + a) / (0.05 + 2 * a), rel=1e-9)
    assert 0.3 < r[CONFIGS[0], CONFIGS[1]] < 1 and 0.3 < r[CONFIGS[1], CONFIGS[0]] < 1


def test_loss_gradient_matches_finite_differences(tiny, standard):
    with jax.enable_x64(True):
        names, _, batch, t = layout(tiny)
        params = jax.tree.map(jnp.asarray, jobs.JobParams.from_models(START, names))
        grad_fn = jax.jit(jobs._value_and_grad)
        _, grads, _ = grad_fn(params, batch, t, jnp.asarray(1.0))
        flat = np.concatenate(
            [np.asarray(g) for g in (grads.log_compute, grads.log_bytes, grads.log_server_bytes)]
        )
        assert np.all(np.isfinite(flat)) and np.any(flat != 0)
        h = 1e-6
        for field in ("log_compute", "log_bytes", "log_server_bytes"):
            for i in range(len(names)):
                bump = lambda d, field=field, i=i: dataclasses.replace(
                    params, **{field: getattr(params, field).at[i].add(d)}
                )
                up = float(grad_fn(bump(h), batch, t, jnp.asarray(1.0))[0])
                down = float(grad_fn(bump(-h), batch, t, jnp.asarray(1.0))[0])
                fd = (up - down) / (2 * h)
                got = float(getattr(grads, field)[i])
                assert got == pytest.approx(fd, rel=1e-4, abs=1e-8), (field, names[i])


def test_a_short_fit_lowers_the_loss(tiny):
    lines = []
    fit = jobs.fit_jobs(
        tiny,
        start=START,
        fabric=FABRIC,
        steps=6,
        rounds=1,
        max_iterations=3,
        progress=lines.append,
        log_every=1,
    )
    assert fit.history[-1] < fit.history[0]
    assert fit.loss <= min(fit.history) + 1e-15
    assert any("round 1/1" in x for x in lines)
    assert set(fit.models) == {"FSDP", "MoE"} and fit.models["MoE"].pattern == "alltoall"
    assert '"models"' in fit.to_json("cmd")


def test_shipped_models_are_fitted_and_run_as_jobs():
    assert set(MODELS) == {m for m, _, _ in DeepShareTable.load().configs}
    assert load_models() == MODELS
    for m in MODELS.values():
        assert m.compute > 0 and m.comm_bytes > 0 and m.server_bytes >= 0
    # Job.of carries the bytes per extra server; job_workload sends them out of each server, split over
    # the communication phases (MoE: two all-to-alls), on the phases' first flows that leave it
    job = Job.of("j", "MoE", arrival=0.0, gpus=4, iterations=1)
    assert job.server_bytes == MODELS["MoE"].server_bytes
    gpus = ["n0/gpu0", "n0/gpu1", "n1/gpu0", "n1/gpu1"]
    w, _ = job_workload(job, gpus)
    w0, _ = job_workload(dataclasses.replace(job, server_bytes=0.0), gpus)
    leaving = lambda w, s: sum(f.bytes for f in w.flows if f.src.startswith(s) and not f.dst.startswith(s))
    for s in ("n0/", "n1/"):
        assert leaving(w, s) - leaving(w0, s) == pytest.approx(2 * MODELS["MoE"].server_bytes * (2 - 1) / 2)
    assert sum(f.bytes for f in w.flows if f.src[:3] == f.dst[:3]) == sum(
        f.bytes for f in w0.flows if f.src[:3] == f.dst[:3]
    )  # nothing more inside a server


def test_models_of_the_latency_era_are_refused_by_name(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(
        json.dumps(
            {"models": {"MoE": {"pattern": "alltoall", "compute": 0.03, "comm_bytes": 1e8, "sync": 0.015}}}
        )
    )
    with pytest.raises(ScenarioError, match=r"MoE\.sync = 0\.015: .*\(server_bytes is\)"):
        load_models(path)


def test_bad_pairs_are_clear_errors(tiny):
    with pytest.raises(ScenarioError, match="pairs: expected"):
        jobs.predict_jobs(START, tiny, pairs=[(1, 0)], fabric=FABRIC)
    with pytest.raises(ScenarioError, match="MoE"):
        jobs.predict_jobs({"FSDP": START["FSDP"]}, tiny, fabric=FABRIC)
    with pytest.raises(ScenarioError, match="MoE,4,2: no 2 free GPUs left on server 'n0' for the pair"):
        jobs.predict_jobs(START, tiny, fabric=deepshare_cluster(2, 2))
