"""The one pace rule (netsim.jobs.iteration_paces) against a loop over its definition."""

import numpy as np
import pytest

from netsim.jobs import iteration_paces


def reference(ends, counts):
    """Per job, mean s per iteration over its iterations that ended by the first job's last end."""
    live = [e[:n] for e, n in zip(ends, counts, strict=True) if n]
    until = min(e[-1] for e in live)
    out = []
    for e, n in zip(ends, counts, strict=True):
        done = max(1, sum(x <= until * (1 + 1e-9) for x in e[:n])) if n else 1
        out.append(e[done - 1] / done)
    return out


def test_hand_case():
    # A ends iterations at 1, 2, 3, 4; B at 1.5, 3.5: while both ran, A did 3 iterations in 3 s,
    # B all of its own; alone, a job's pace is its mean iteration time
    ends = np.array([[1.0, 2.0, 3.0, 4.0], [1.5, 3.5, 0.0, 0.0]])
    got = np.asarray(iteration_paces(ends, np.array([4, 2])))
    np.testing.assert_allclose(got, [1.0, 1.75])
    assert float(iteration_paces(ends[:1], np.array([4]))[0]) == pytest.approx(1.0)
    # an empty slot does not cut the others short
    assert float(iteration_paces(ends, np.array([4, 0]))[0]) == pytest.approx(1.0)


def test_batches_match_the_definition():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 6, size=(20, 3))
    counts[:, 0] = np.maximum(counts[:, 0], 1)
    ends = np.cumsum(rng.uniform(0.1, 1.0, size=(20, 3, 5)), axis=-1)
    got = np.asarray(iteration_paces(ends, counts))
    for b in range(20):
        want = reference(ends[b], counts[b])
        live = counts[b] > 0
        np.testing.assert_allclose(got[b][live], np.array(want)[live], rtol=1e-12)
