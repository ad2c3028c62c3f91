"""Sweep results on disk (HDF5, written chunk by chunk, resumable) or in memory.

Crash safety: the file is built complete in a temporary file beside its destination and renamed
into place, with every dataset at full size and allocated at creation (contiguous layout, early
allocation). After that, writing a chunk writes raw rows only and never touches HDF5 metadata, so a
process killed at any moment leaves the file structure intact. A chunk's rows are written, flushed
and fsynced before its entry in `chunk_done` is set (then flushed and fsynced again): a chunk is
either marked done with all its rows on disk, or unmarked and recomputed on resume.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._axes import SweepError

FORMAT = "netsim-sweep"
VERSION = 1
FILL = {"status": -1, "events": -1}  # integer columns; float columns fill with NaN


class MemoryStore:
    """Holds a sweep's results in NumPy arrays (sweeps run without an output file)."""

    def __init__(self, columns: Mapping[str, tuple[tuple[int, ...], np.dtype]], n_chunks: int,
                 meta: Mapping[str, Any]):
        self.columns = {k: np.full(shape, FILL.get(k, np.nan), dtype) for k, (shape, dtype) in columns.items()}
        self.done = np.zeros(n_chunks, bool)
        self.meta = dict(meta)

    def write(self, chunk: int, rows: slice, values: Mapping[str, np.ndarray]) -> None:
        for k, v in values.items():
            self.columns[k][rows] = v
        self.done[chunk] = True

    def close(self) -> None:
        pass


class H5Store:
    """An HDF5 results file, opened for writing chunks; see the module docstring for crash safety."""

    def __init__(self, path: str):
        import h5py

        self.path = path
        self.file = h5py.File(path, "r+")
        self.done = self.file["chunk_done"][...].astype(bool)
        self.meta = {k: _attr(v) for k, v in self.file.attrs.items()}

    @classmethod
    def create(cls, path: str, columns: Mapping[str, tuple[tuple[int, ...], np.dtype]], n_chunks: int,
               meta: Mapping[str, Any], extra: Mapping[str, Any]) -> H5Store:
        """Writes a new, fully allocated results file (atomically) and opens it.

        Args:
            columns: result datasets, name -> (shape, dtype), filled until written.
            meta: root attributes (fingerprint, spec, chunk size...).
            extra: datasets written once now: name -> array, or group -> {name -> array}.
        """
        import h5py

        tmp = os.path.join(os.path.dirname(os.path.abspath(path)), f".tmp-{os.path.basename(path)}")
        try:
            with h5py.File(tmp, "w") as f:
                f.attrs.update({k: (json.dumps(v) if isinstance(v, dict | list) else v) for k, v in meta.items()})
                for name, (shape, dtype) in columns.items():
                    _allocated(f, name, shape, dtype, FILL.get(name, np.nan))
                _allocated(f, "chunk_done", (n_chunks,), np.uint8, 0)
                _write_tree(f, extra)
            _fsync(tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return cls(path)

    def write(self, chunk: int, rows: slice, values: Mapping[str, np.ndarray]) -> None:
        for k, v in values.items():
            self.file[k][rows] = v
        self.file.flush()
        _fsync(self.path)
        self.file["chunk_done"][chunk] = 1  # only once the rows are on disk
        self.file.flush()
        _fsync(self.path)
        self.done[chunk] = True

    def close(self) -> None:
        self.file.close()


def open_store(path: str | os.PathLike | None, fingerprint: str, *, columns, n_chunks_for, meta, extra,
               chunk_size: int, overwrite: bool):
    """Opens the results file at `path` to resume it, or creates it (or a MemoryStore without a path).

    `n_chunks_for(chunk_size)` gives the chunk count; a resumed file keeps the chunk size it was
    created with. Raises SweepError if the file holds a different sweep (and overwrite is False).
    """
    if path is None:
        return MemoryStore(columns, n_chunks_for(chunk_size), {**meta, "chunk_size": chunk_size})
    path = os.fspath(path)
    if os.path.exists(path) and not overwrite:
        found = read_meta(path)
        if found.get("fingerprint") != fingerprint:
            raise SweepError(f"{path}: holds a different sweep (fingerprint {found.get('fingerprint')!r}, "
                             f"this sweep's is {fingerprint!r}); choose another --out or pass overwrite")
        return H5Store(path)
    return H5Store.create(path, columns, n_chunks_for(chunk_size), {**meta, "chunk_size": chunk_size}, extra)


def read_meta(path: str) -> dict[str, Any]:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            meta = {k: _attr(v) for k, v in f.attrs.items()}
    except OSError as e:
        raise SweepError(f"{path}: not a readable HDF5 file ({e})") from None
    if meta.get("format") != FORMAT:
        raise SweepError(f"{path}: not a netsim sweep results file (format attribute {meta.get('format')!r})")
    return meta


def _attr(v: Any) -> Any:
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, np.generic):
        v = v.item()
    return v


def _allocated(group, name: str, shape: Sequence[int], dtype, fill) -> None:
    import h5py

    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)  # all space now: later writes change no metadata
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_ALLOC)
    group.create_dataset(name, tuple(shape), dtype, fillvalue=fill, dcpl=dcpl)


def _write_tree(group, tree: Mapping[str, Any]) -> None:
    import h5py

    for name, value in tree.items():
        if isinstance(value, Mapping):
            sub = group.create_group(name)
            _write_tree(sub, value)
        elif isinstance(value, np.ndarray) and value.dtype.kind in "US":
            group.create_dataset(name, data=value.astype(object), dtype=h5py.string_dtype())
        else:
            group.create_dataset(name, data=value)


def _fsync(path: str) -> None:
    # fsync through a second descriptor flushes the file's dirty pages (Linux and macOS semantics)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
