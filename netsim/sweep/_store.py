"""Sweep results on disk (HDF5, written chunk by chunk, resumable) or in memory.

Crash safety: the file is built complete in a temporary file beside its destination
(`.<name>.tmp-<pid>`) and renamed into place, with every dataset at full size and allocated at
creation (contiguous layout, early allocation). After that, writing a chunk writes raw rows only and
never touches HDF5 metadata, so a process killed at any moment leaves the file structure intact. A
chunk's rows are written, flushed and fsynced before its checksum and its entry in `chunk_done` are set
(then flushed and fsynced again): a chunk is either marked done with all its rows on disk, or unmarked
and recomputed on resume. On resume every done chunk is checked against its checksum and for rows
still marked NOT_RUN; a chunk that fails either check is recomputed, never trusted. The datasets written
once at creation (axis values, ids) have a checksum of their own: a file failing it is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .._checks import atomic_path, fsync, remove_stale_temps
from ..kernels import Status
from ._axes import SweepError

FORMAT = "netsim-sweep"
VERSION = 2  # 1: status -1 for rows not run, no chunk_checksum; 2: Status.NOT_RUN, chunk_checksum
SUFFIXES = (".h5", ".hdf5")
COLUMNS = (
    "status",
    "events",
    "makespan",
    "flow_finish",
    "link_bytes",
    "link_utilization",
)  # in checksum order
FILL = {"status": int(Status.NOT_RUN), "events": -1}  # integer columns; float columns fill with NaN


def check_out_path(path: str | os.PathLike) -> str:
    """The results path as a string, refused unless its suffix names a format netsim writes (HDF5)."""
    path = os.fspath(path)
    if not path.lower().endswith(SUFFIXES):
        raise SweepError(
            f"out: {path!r}: sweep results are written as HDF5; give a name ending in {' or '.join(SUFFIXES)}"
        )
    return path


def checksum(rows: Mapping[str, np.ndarray]) -> int:
    """CRC-32 of a chunk's rows: every column present, in COLUMNS order, as the bytes stored."""
    crc = 0
    for name in COLUMNS:
        if name in rows:
            crc = zlib.crc32(np.ascontiguousarray(rows[name]).tobytes(), crc)
    return crc


def _written_once(group, crc: int = 0, *, root: bool = True) -> int:
    """CRC-32 of the datasets written at creation (axes, ids, errors: everything but the result columns and
    the chunk bookkeeping), by sorted name; text as UTF-8, so a value reads back to the same sum."""
    import h5py

    for name in sorted(group):
        if root and name in (*COLUMNS, "chunk_done", "chunk_checksum"):
            continue
        item = group[name]
        crc = zlib.crc32(name.encode(), crc)
        if isinstance(item, h5py.Group):
            crc = _written_once(item, crc, root=False)
            continue
        v = item[...]
        if v.dtype.kind == "O":
            text = "\0".join(x.decode() if isinstance(x, bytes) else str(x) for x in np.ravel(v))
            crc = zlib.crc32(text.encode(), crc)
        else:
            crc = zlib.crc32(np.ascontiguousarray(v).tobytes(), crc)
    return crc


def check_written_once(f, path: str) -> None:
    """SweepError unless the datasets written at creation (axis values, ids) match the checksum stored
    with them (files from before it have none: not checked)."""
    stored = f.attrs.get("written_once_checksum")
    if stored is not None and _written_once(f) != int(stored):
        raise SweepError(
            f"{path}: its axis or id datasets do not match their checksum (the file was changed or damaged); "
            "rerun the sweep with --overwrite (overwrite=True) or another --out"
        )


def chunk_rows(chunk: int, size: int, n: int) -> slice:
    return slice(chunk * size, min(n, (chunk + 1) * size))


class MemoryStore:
    """Holds a sweep's results in NumPy arrays (sweeps run without an output file)."""

    def __init__(
        self, columns: Mapping[str, tuple[tuple[int, ...], np.dtype]], n_chunks: int, meta: Mapping[str, Any]
    ):
        self.columns = {
            k: np.full(shape, FILL.get(k, np.nan), dtype) for k, (shape, dtype) in columns.items()
        }
        self.done = np.zeros(n_chunks, bool)
        self.meta = dict(meta)

    def write(self, chunk: int, rows: slice, values: Mapping[str, np.ndarray]) -> None:
        for k, v in values.items():
            self.columns[k][rows] = v
        self.done[chunk] = True

    def close(self) -> None:
        pass


class H5Store:
    """An HDF5 results file, opened for writing chunks; see the module docstring for crash safety.

    `done` marks the chunks to keep: marked done in the file, matching their checksum and holding no
    row still NOT_RUN (the others are reported on stderr and rerun).
    """

    def __init__(self, path: str):
        self.path = path
        self.file = open_h5(path, "r+")
        try:
            with readable(path):
                self.meta = {k: _attr(v) for k, v in self.file.attrs.items()}
                self.names = [k for k in COLUMNS if k in self.file]
                check_written_once(self.file, path)
                self.done = self.file["chunk_done"][...].astype(bool)
                for chunk, why in damaged_chunks(self.file, self.meta):
                    rows = chunk_rows(chunk, int(self.meta["chunk_size"]), int(self.meta["n_points"]))
                    print(
                        f"netsim sweep: {path}: chunk {chunk} (rows {rows.start}-{rows.stop - 1}) {why}: "
                        "recomputing it",
                        file=sys.stderr,
                    )
                    self.done[chunk] = False
        except BaseException:
            self.file.close()
            raise

    @classmethod
    def create(
        cls,
        path: str,
        columns: Mapping[str, tuple[tuple[int, ...], np.dtype]],
        n_chunks: int,
        meta: Mapping[str, Any],
        extra: Mapping[str, Any],
    ) -> H5Store:
        """Writes a new, fully allocated results file (atomically) and opens it.

        Args:
            columns: result datasets, name -> (shape, dtype), filled until written.
            meta: root attributes (fingerprint, spec, chunk size...).
            extra: datasets written once now: name -> array, or group -> {name -> array}.
        """
        import h5py

        with atomic_path(path, durable=True) as tmp, h5py.File(tmp, "w") as f:
            f.attrs.update({k: (json.dumps(v) if isinstance(v, dict | list) else v) for k, v in meta.items()})
            for name, (shape, dtype) in columns.items():
                _allocated(f, name, shape, dtype, FILL.get(name, np.nan))
            _allocated(f, "chunk_done", (n_chunks,), np.uint8, 0)
            _allocated(f, "chunk_checksum", (n_chunks,), np.uint32, 0)
            _write_tree(f, extra)
            f.attrs["written_once_checksum"] = np.uint32(_written_once(f))
        return cls(path)

    def write(self, chunk: int, rows: slice, values: Mapping[str, np.ndarray]) -> None:
        stored = {k: np.asarray(values[k], self.file[k].dtype) for k in self.names}
        for k, v in stored.items():
            self.file[k][rows] = v
        self.file.flush()
        fsync(self.path)
        self.file["chunk_checksum"][chunk] = checksum(stored)  # only once the rows are on disk
        self.file["chunk_done"][chunk] = 1
        self.file.flush()
        fsync(self.path)
        self.done[chunk] = True

    def close(self) -> None:
        self.file.close()


def open_store(
    path: str | os.PathLike | None,
    fingerprint: str,
    *,
    columns,
    n_points: int,
    meta,
    extra,
    chunk_size: int,
    overwrite: bool,
):
    """Opens the results file at `path` to resume it, or creates it (or a MemoryStore without a path).

    A resumed file keeps the chunk size it was created with. Raises SweepError if the file holds a
    different sweep (and overwrite is False), was written by another file version, or is in use.
    """
    meta = {**meta, "chunk_size": chunk_size}
    n_chunks = -(-n_points // chunk_size)
    if path is None:
        return MemoryStore(columns, n_chunks, meta)
    path = check_out_path(path)
    for tmp in remove_stale_temps(path):
        print(f"netsim sweep: removed {tmp} (left by a killed run)", file=sys.stderr)
    if os.path.exists(path) and not overwrite:
        found = read_meta(path)
        if found.get("fingerprint") != fingerprint:
            raise SweepError(
                f"{path}: holds a different sweep (fingerprint {found.get('fingerprint')!r}, "
                f"this sweep's is {fingerprint!r}); choose another --out or pass overwrite"
            )
        if found.get("version") != VERSION:
            raise SweepError(
                f"{path}: written by another netsim (sweep file version {found.get('version')}, "
                f"this one writes {VERSION}); netsim.sweep.load_result() reads it, but to resume the "
                "sweep rerun it with --overwrite (overwrite=True) or another --out"
            )
        size = found.get("chunk_size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise SweepError(f"{path}: damaged (chunk_size attribute {size!r}); rerun with --overwrite")
        return H5Store(path)
    return H5Store.create(path, columns, n_chunks, meta, extra)


def open_h5(path: str, mode: str):
    """h5py.File(path, mode), with a SweepError saying why it cannot be opened."""
    import h5py

    try:
        return h5py.File(path, mode)
    except BlockingIOError:
        raise SweepError(
            f"{path}: in use by another sweep (another process holds its HDF5 file lock); "
            "wait for it to finish or choose another --out"
        ) from None
    except OSError as e:
        if "unable to lock file" in str(e):
            raise SweepError(
                f"{path}: in use by another sweep (another process holds its HDF5 file lock); "
                "wait for it to finish or choose another --out"
            ) from None
        raise SweepError(f"{path}: not a readable HDF5 file ({e})") from None


@contextlib.contextmanager
def readable(path: str) -> Iterator[None]:
    """Turns what h5py raises for a damaged file (a flipped header byte: OSError, KeyError, RuntimeError,
    ...) into one SweepError naming the file."""
    try:
        yield
    except SweepError:
        raise
    except (OSError, KeyError, RuntimeError, ValueError, TypeError) as e:
        raise SweepError(
            f"{path}: damaged HDF5 file ({e}); rerun the sweep with --overwrite (overwrite=True) or another --out"
        ) from None


def read_meta(path: str) -> dict[str, Any]:
    with open_h5(path, "r") as f, readable(path):
        meta = {k: _attr(v) for k, v in f.attrs.items()}
    if meta.get("format") != FORMAT:
        raise SweepError(f"{path}: not a netsim sweep results file (format attribute {meta.get('format')!r})")
    return meta


def damaged_chunks(f, meta: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(chunk, why) for every chunk marked done whose rows fail their checksum or hold NOT_RUN rows.

    Reads the file one chunk at a time (version 2 files; older ones have no checksums).
    """
    if meta.get("version") != VERSION:
        return []
    size, n = int(meta["chunk_size"]), int(meta["n_points"])
    done, sums = f["chunk_done"][...], f["chunk_checksum"][...]
    names = [k for k in COLUMNS if k in f]
    out = []
    for c in np.flatnonzero(done):
        rows = chunk_rows(int(c), size, n)
        values = {k: f[k][rows] for k in names}
        if checksum(values) != int(sums[c]):
            out.append((int(c), "does not match its checksum (the file was changed or damaged)"))
        elif np.any(values["status"] & int(Status.NOT_RUN)):
            out.append((int(c), "is marked done but has points not run"))
    return out


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
