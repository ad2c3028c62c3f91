"""Traces as HDF5 files: every table with its provenance, written atomically.

Layout: root attributes `format`, `source`, `machine`, `header` (the comment lines, joined by newlines);
one group per table, `tables/<index>`, with attribute `type` (the table class) and one dataset or
attribute per field. Arrays are datasets, strings and numbers are attributes, tuples of strings are
string datasets, dicts (NcclTable.env) are (n, 2) string datasets of name and value, and NcclTable.devices
is an (n, 7) string dataset. A field missing from an older file takes its default.
"""

from __future__ import annotations

import dataclasses
import os

import h5py
import numpy as np

from .._checks import atomic_path
from ._core import TraceError
from ._csv import CsvTable
from ._nccl import NcclDevice, NcclTable
from ._nvsmi import TopoTable
from ._p2p import P2PMatrix
from ._rbt import RbtMatrix
from ._rocm import RocmMatrix, RocmNuma
from ._trace import Trace, check_trace

FORMAT = "netsim.trace/1"
_TYPES = {
    cls.__name__: cls for cls in (NcclTable, P2PMatrix, TopoTable, RocmMatrix, RocmNuma, RbtMatrix, CsvTable)
}
_NONE = "__none__"  # P2PMatrix.p2p is None for the connectivity matrix; HDF5 attributes have no None


def save_trace(trace: Trace, path: str | os.PathLike) -> None:
    """Writes `trace` to an HDF5 file at `path` (temporary file + rename: never half a file)."""
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        f.attrs["format"] = FORMAT
        f.attrs["source"] = trace.source
        f.attrs["machine"] = trace.machine
        f.attrs["header"] = "\n".join(trace.header)
        f.attrs["n_header"] = len(trace.header)
        tables = f.create_group("tables")
        for k, table in enumerate(trace.tables):
            g = tables.create_group(f"{k:04d}")
            g.attrs["type"] = type(table).__name__
            for field in dataclasses.fields(table):
                _put(g, field.name, getattr(table, field.name))


def load_trace(path: str | os.PathLike) -> Trace:
    """Reads a trace written by `save_trace`, its values checked as `read_trace` checks them.

    Raises:
        TraceError: naming the file when it is not a netsim trace, a table is unreadable, or a value is
            outside netsim's limits (`check_trace`).
    """
    name = os.fspath(path)
    try:
        with h5py.File(name, "r") as f:
            if f.attrs.get("format") != FORMAT:
                raise TraceError(
                    f"{name}: not a netsim trace file (format {f.attrs.get('format')!r}, expected {FORMAT!r})"
                )
            n_header = int(f.attrs["n_header"])
            header = tuple(str(f.attrs["header"]).split("\n")) if n_header else ()
            tables = []
            for key in sorted(f["tables"]):
                g = f["tables"][key]
                cls = _TYPES.get(str(g.attrs.get("type")))
                if cls is None:
                    raise TraceError(f"{name}: tables/{key}: unknown table type {g.attrs.get('type')!r}")
                values = {
                    fd.name: _get(g, fd.name, fd.type)
                    for fd in dataclasses.fields(cls)
                    if fd.name in g or fd.name in g.attrs or not _has_default(fd)
                }
                tables.append(cls(**values))
            trace = Trace(str(f.attrs["source"]), header, str(f.attrs["machine"]), tuple(tables))
    except TraceError:
        raise
    except KeyError as e:
        raise TraceError(f"{name}: missing {e} in the trace file") from None
    except (OSError, RuntimeError, ValueError, TypeError) as e:  # a damaged file: what h5py raises varies
        raise TraceError(f"{name}: cannot read as HDF5: {e}") from None
    check_trace(trace)
    return trace


def _has_default(fd: dataclasses.Field) -> bool:
    return fd.default is not dataclasses.MISSING or fd.default_factory is not dataclasses.MISSING


def _put(g: h5py.Group, name: str, value) -> None:
    if isinstance(value, dict):
        cells = np.asarray(list(value.items()), dtype=object).reshape(len(value), 2)
        g.create_dataset(name, data=cells, dtype=h5py.string_dtype())
    elif isinstance(value, tuple) and value and isinstance(value[0], NcclDevice):
        cells = np.asarray([[str(x) for x in d] for d in value], dtype=object)
        g.create_dataset(name, data=cells, dtype=h5py.string_dtype())
    elif isinstance(value, np.ndarray):
        g.create_dataset(name, data=value)
    elif isinstance(value, tuple):  # of strings, or (CsvTable.rows) of tuples of strings
        cells = (
            np.asarray(value, dtype=object).reshape(len(value), -1)
            if value and isinstance(value[0], tuple)
            else np.asarray(value, dtype=object).reshape(len(value))
        )
        g.create_dataset(name, data=cells, dtype=h5py.string_dtype())
    else:
        g.attrs[name] = _NONE if value is None else value


def _get(g: h5py.Group, name: str, annotation: str):
    if name in g.attrs:
        value = g.attrs[name]
        if isinstance(value, str) and value == _NONE:
            return None
        return value.item() if isinstance(value, np.generic) else str(value)
    data = g[name]
    if annotation.startswith("dict"):
        return {str(k): str(v) for k, v in data.asstr()[()]}
    if annotation.startswith("tuple[NcclDevice"):
        types = [int if f in ("rank", "group", "pid", "device") else str for f in NcclDevice._fields]
        return tuple(
            NcclDevice(*(f(c) for f, c in zip(types, row, strict=True)))
            for row in data.asstr()[()].reshape(-1, len(types))
        )
    if annotation.startswith("tuple[tuple"):
        return tuple(tuple(str(c) for c in row) for row in data.asstr()[()])
    if annotation.startswith("tuple"):
        return tuple(str(c) for c in data.asstr()[()])
    return np.asarray(data[()])
