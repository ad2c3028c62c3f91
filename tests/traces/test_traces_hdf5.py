"""Traces as HDF5: every table round-trips, writes are atomic, other files are refused, values are checked."""

import dataclasses
import os

import numpy as np
import pytest
from test_traces_nccl import RCCL_TESTS
from test_traces_rocm import ROCM_NODESBW, ROCM_SHOWTOPO
from trace_helpers import ALLREDUCE, write

from netsim.data import TRACES as SHIPPED
from netsim.data import trace_path
from netsim.traces import TraceError, load_trace, read_trace, save_trace


def _assert_same(a, b):
    assert (a.source, a.header, a.machine) == (b.source, b.header, b.machine)
    assert len(a.tables) == len(b.tables)
    for x, y in zip(a.tables, b.tables, strict=True):
        assert type(x) is type(y)
        for field in dataclasses.fields(x):
            u, v = getattr(x, field.name), getattr(y, field.name)
            if isinstance(u, np.ndarray):
                assert u.dtype == v.dtype and np.array_equal(u, v, equal_nan=True), field.name
            else:
                assert type(u) is type(v) and (u == v or (u != u and v != v)), (field.name, u, v)


def test_hdf5_round_trip_every_file(tmp_path):
    for path in map(trace_path, SHIPPED):
        original = read_trace(path)
        save_trace(original, tmp_path / "t.h5")
        _assert_same(original, load_trace(tmp_path / "t.h5"))
    assert os.listdir(tmp_path) == ["t.h5"]  # no temporary files left behind


def test_hdf5_write_is_atomic(tmp_path):
    good = read_trace(trace_path(ALLREDUCE))
    save_trace(good, tmp_path / "t.h5")
    broken = dataclasses.replace(
        good, tables=(*good.tables, dataclasses.replace(good.tables[0], title=object()))
    )
    with pytest.raises(TypeError):
        save_trace(broken, tmp_path / "t.h5")
    _assert_same(good, load_trace(tmp_path / "t.h5"))  # the old file survives a failed write
    assert os.listdir(tmp_path) == ["t.h5"]


def test_load_rejects_other_hdf5(tmp_path):
    import h5py

    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = 1
    with pytest.raises(TraceError, match=r"other\.h5: not a netsim trace file"):
        load_trace(tmp_path / "other.h5")
    with pytest.raises(TraceError, match="cannot read as HDF5"):
        load_trace(tmp_path / "missing.h5")


def test_hdf5_round_trip_new_tables(tmp_path):
    for name, text in [("rccl.log", RCCL_TESTS), ("topo.txt", ROCM_SHOWTOPO), ("bw.txt", ROCM_NODESBW)]:
        original = read_trace(write(tmp_path, name, text))
        save_trace(original, tmp_path / "t.h5")
        _assert_same(original, load_trace(tmp_path / "t.h5"))


def test_load_checks_values_as_read_does(tmp_path):
    good = read_trace(trace_path(ALLREDUCE))
    (table,) = good.tables
    bad = dataclasses.replace(good, tables=(dataclasses.replace(table, time=table.time * 1e30),))
    save_trace(bad, tmp_path / "t.h5")  # the writer keeps what it is given
    with pytest.raises(
        TraceError, match=rf"^{ALLREDUCE}:19: all_reduce table, row 0, out-of-place time: must be <"
    ):
        load_trace(tmp_path / "t.h5")
