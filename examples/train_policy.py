"""Trains a tiny scheduling policy with REINFORCE (JAX + Optax) in netsim's job environment, then compares
its JCT with the placement heuristics and simulation-in-the-loop on a held-out DeepShare-like trace.

    python examples/train_policy.py              # 16 updates of 8 episodes: minutes on a CPU
    python examples/train_policy.py --updates 2  # a quick look
    python examples/train_policy.py --eval-seeds 0:20 --eval-jobs 10  # judged on 20 held-out traces

The policy scores each action of the head job (the candidate placements of netsim.jobs.CANDIDATES and
"wait") from the job's and the candidate's features and from the contention-aware lookahead's prediction
for that action (`JobEnvs.lookahead_costs`: job-seconds of the known jobs, relative to packed's): a learned
residual on top of the lookahead, which sees only the jobs that have arrived. The residual starts at zero
(the untrained policy is the "contention" policy); the action is a masked softmax sample. Its forward and
backward passes run under jax.vmap over the environments of a step and over the steps of an episode; the
environments step together (`netsim.jobs.JobEnvs`), their simulations batched. Seeded: the same command
prints the same numbers.
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from netsim import enable_compilation_cache
from netsim.jobs import (
    CANDIDATE_FEATURES,
    CANDIDATES,
    JOB_FEATURES,
    JOB_POLICIES,
    JobEnvs,
    Observation,
    Paces,
    deepshare_cluster,
    deepshare_trace,
    evaluate,
    schedule,
)

HIDDEN = 16
SHARPNESS = 100.0  # initial logits per unit of relative job-seconds: 1 % fewer is worth +1
UNSEEN = 1.0  # the lookahead row of an action it has no figure for: as if it doubled the job-seconds


def lookahead(envs: JobEnvs) -> np.ndarray:
    """[B, K + 1]: each action's predicted job-seconds over packed's, minus 1 (`JobEnvs.lookahead_costs`);
    UNSEEN for an action the lookahead has no figure for (a repeated placement, a wait with nothing
    running)."""
    packed = CANDIDATES.index("packed")
    out = np.full((envs.size, len(CANDIDATES) + 1), UNSEEN)
    for b, cost in enumerate(envs.lookahead_costs()):
        for a, c in cost.items():
            out[b, a] = c / max(cost[packed], 1e-12) - 1
    return out


class Policy(eqx.Module):
    """Logits over CANDIDATES + wait from one Observation and its lookahead row (no batch axis)."""

    score: eqx.nn.MLP  # (job features, candidate features, cluster summary) -> a candidate's residual
    wait: eqx.nn.Linear  # (job features, cluster summary) -> the wait residual
    sharpness: jax.Array  # logits per unit of relative job-seconds

    def __init__(self, job_features: int, candidate_features: int, key):
        k1, k2 = jax.random.split(key)
        summary = 3
        zero = lambda layer: eqx.tree_at(lambda m: (m.weight, m.bias), layer, replace_fn=jnp.zeros_like)
        # residuals start at zero: the untrained policy ranks actions by the lookahead alone
        mlp = eqx.nn.MLP(job_features + candidate_features + summary, 1, HIDDEN, 1, key=k1)
        self.score = eqx.tree_at(lambda m: m.layers[-1], mlp, zero(mlp.layers[-1]))
        self.wait = zero(eqx.nn.Linear(job_features + summary, 1, key=k2))
        self.sharpness = jnp.asarray(SHARPNESS)

    def __call__(self, obs: Observation, ahead: jax.Array) -> jax.Array:
        summary = jnp.stack([jnp.mean(obs.free), jnp.mean(obs.load), jnp.max(obs.load)])
        k = obs.candidates.shape[0]
        ctx = jnp.concatenate([obs.job, summary])
        per = jnp.concatenate([jnp.broadcast_to(ctx, (k, ctx.size)), obs.candidates], axis=1)
        residual = jnp.concatenate([jax.vmap(self.score)(per)[:, 0], self.wait(ctx)])
        return jnp.where(obs.mask, residual - self.sharpness * ahead, -1e9)


@eqx.filter_jit
def act(policy: Policy, obs: Observation, ahead, key) -> jax.Array:
    """One sampled action per environment (obs and ahead stacked along the first axis)."""
    logits = jax.vmap(policy)(obs, ahead)
    return jax.random.categorical(key, logits)


@eqx.filter_jit
def greedy(policy: Policy, obs: Observation, ahead) -> jax.Array:
    return jnp.argmax(jax.vmap(policy)(obs, ahead), axis=-1)


@eqx.filter_jit
def update(policy, opt_state, obs, ahead, actions, advantages, valid, optim):
    """One REINFORCE step: minus the mean of advantage x log pi(action) over the valid steps."""

    def loss(p):
        logp = jax.nn.log_softmax(jax.vmap(p)(obs, ahead))
        chosen = jnp.take_along_axis(logp, actions[:, None], axis=1)[:, 0]
        return -jnp.sum(jnp.where(valid, advantages * chosen, 0.0)) / jnp.maximum(jnp.sum(valid), 1)

    value, grads = eqx.filter_value_and_grad(loss)(policy)
    updates, opt_state = optim.update(grads, opt_state, policy)
    return eqx.apply_updates(policy, updates), opt_state, value


def episodes(envs: JobEnvs, policy: Policy, seeds, key):
    """Runs one episode per environment; returns the stacked decisions, lookahead rows, actions, returns
    and mask."""
    obs, _ = envs.reset(seeds)
    seen, aheads, acts, rewards, alive = [], [], [], [], []
    done = np.zeros(envs.size, bool)
    while not done.all():
        key, sub = jax.random.split(key)
        ahead = lookahead(envs)
        a = np.asarray(act(policy, obs, ahead, sub))
        seen.append(obs)
        aheads.append(ahead)
        acts.append(a)
        alive.append(~done)
        obs, r, done, _ = envs.step(a)
        rewards.append(r)
    rewards = np.array(rewards)  # [T, B]
    to_go = np.cumsum(rewards[::-1], axis=0)[::-1]  # return from each decision on
    return seen, np.array(aheads), np.array(acts), to_go, np.array(alive)


def train(
    *,
    updates: int = 16,
    envs: int = 8,
    jobs: int = 12,
    pool: int = 8,
    seed: int = 0,
    lr: float = 3e-3,
    arrival_rate: float = 0.5,
    verbose: bool = True,
):
    """REINFORCE on DeepShare-like traces of seeds 1000 .. 1000 + pool - 1 (`arrival_rate` jobs per s), one
    per update, each run `envs` times with sampled actions; returns the trained Policy and the Paces used
    (their cache warm)."""
    topo = deepshare_cluster()
    paces = Paces(topo)
    trace = lambda s: deepshare_trace(jobs, seed=s, arrival_rate=arrival_rate)
    batch = JobEnvs(topo, [trace] * envs, paces=paces)
    key = jax.random.PRNGKey(seed)
    key, sub = jax.random.split(key)
    policy = Policy(len(JOB_FEATURES), len(CANDIDATE_FEATURES), sub)
    optim = optax.adam(lr)
    opt_state = optim.init(eqx.filter(policy, eqx.is_inexact_array))
    t0 = time.perf_counter()
    for u in range(updates):
        seeds = [1000 + u % pool] * envs  # one trace per update, sampled envs times: the baseline compares
        # actions on the same jobs
        key, sub = jax.random.split(key)
        seen, ahead, acts, to_go, alive = episodes(batch, policy, seeds, sub)
        scale = max(1.0, float(np.abs(to_go[0]).mean()))
        adv = (to_go - to_go.mean(axis=1, keepdims=True)) / scale  # baseline: the mean over the samples
        flat = lambda x: x.reshape(-1, *x.shape[2:])
        obs = Observation(*(flat(np.stack(f)) for f in zip(*seen, strict=True)))
        policy, opt_state, _ = update(
            policy,
            opt_state,
            obs,
            jnp.asarray(flat(ahead)),
            jnp.asarray(flat(acts)),
            jnp.asarray(flat(adv)),
            jnp.asarray(flat(alive)),
            optim,
        )
        if verbose:
            print(
                f"update {u + 1:>2}/{updates}: mean episode JCT sum {-to_go[0].mean():9.1f} s, "
                f"{paces.simulations} simulations, {time.perf_counter() - t0:5.0f} s",
                flush=True,
            )
    return policy, paces


def trained_policy(policy: Policy):
    """`netsim.jobs.schedule`'s policy function for a trained Policy (greedy)."""

    def trained(obs, envs):
        return np.asarray(greedy(policy, obs, lookahead(envs)))

    return trained


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=16)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=12, help="jobs per training episode")
    parser.add_argument("--eval-jobs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--lr", type=float, default=3e-3, help="Adam's learning rate (3e-2 overfits the 8 training traces)"
    )
    parser.add_argument(
        "--rate", type=float, default=0.5, help="Poisson job arrivals per s, training and test"
    )
    parser.add_argument(
        "--eval-seeds",
        metavar="A:B",
        help="judge the trained policy beside every heuristic over the held-out seeded traces A..B-1 (as "
        "`netsim jobs --policy all --seeds A:B`, with bootstrap intervals) instead of one trace",
    )
    args = parser.parse_args(argv)
    if not args.rate > 0:  # before training starts, not at its first trace
        parser.error(f"--rate: expected job arrivals per s > 0, got {args.rate!r}")
    if args.eval_seeds is not None:  # held out: training draws its traces from seeds 1000 and up
        first, _, stop = args.eval_seeds.partition(":")
        if not (first.isdigit() and stop.isdigit() and int(first) < int(stop) <= 1000):
            parser.error(
                f"--eval-seeds: expected A:B with 0 <= A < B <= 1000 (held out), got {args.eval_seeds!r}"
            )
        first, stop = int(first), int(stop)
    jax.config.update("jax_enable_x64", True)  # simulated time is float64
    enable_compilation_cache()
    with jax.numpy_dtype_promotion("standard"):
        policy, paces = train(
            updates=args.updates,
            envs=args.envs,
            jobs=args.jobs,
            seed=args.seed,
            lr=args.lr,
            arrival_rate=args.rate,
        )
        topo = deepshare_cluster()
        if args.eval_seeds is not None:
            t0 = time.perf_counter()
            ev = evaluate(
                topo,
                range(first, stop),
                policies=JOB_POLICIES,
                extra={"trained": trained_policy(policy)},
                jobs=args.eval_jobs,
                arrival_rate=args.rate,
                paces=paces,
                progress=lambda name, seed: print(f"  evaluating {name} on seed {seed}", flush=True),
            )
            print(
                f"\nheld-out seeds {args.eval_seeds}, {args.eval_jobs} jobs each ({time.perf_counter() - t0:.0f} s)"
            )
            print(ev.table())
            best = min(JOB_POLICIES, key=lambda p: np.mean(ev.mean_jct[p]))
            for tail in (False, True):
                m, lo, hi = ev.change("trained", best, tail=tail)
                print(
                    f"trained vs {best} (the best heuristic here), {'p90' if tail else 'mean'} JCT: {m:+.1%} [{lo:+.1%}, {hi:+.1%}]"
                )
            return
        trace = deepshare_trace(
            args.eval_jobs, seed=args.seed, arrival_rate=args.rate
        )  # held out: training used seeds >= 1000
        print(f"\nheld-out trace: {args.eval_jobs} jobs, seed {args.seed}")
        for name in (*CANDIDATES, "simloop", "trained"):
            policy_fn = trained_policy(policy) if name == "trained" else name
            s = schedule(topo, trace, policy=policy_fn, paces=paces)
            print(
                f"{name:<12} mean JCT {s.mean_jct:8.2f} s  p90 {s.jct_percentile(90):8.2f} s  "
                f"max {s.jct_percentile(100):8.2f} s  GPU utilization {s.gpu_utilization:.1%}"
            )


if __name__ == "__main__":
    main()
