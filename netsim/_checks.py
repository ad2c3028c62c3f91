"""Input checks and safe output: the one place scenarios, builders and readers check values.

Every check raises `ScenarioError` naming the field and the value (shown short: a 5000-element list or a
400-digit integer is abbreviated, never printed whole), and returns the value converted to what netsim
stores (an int, an SI float, a tuple of ids).

Limits (see docs/scenario-format.md, "Limits"): simulated time is float64, and these bounds keep every
sum, product and quotient the engine forms finite.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import numbers
import os
import re
import reprlib
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from ._errors import ScenarioError
from ._units import parse_quantity

#: exclusive upper bound of every time (latency, start, overhead, duration), s: 1e15 s is 3e7 years
MAX_TIME = 1e15
#: exclusive upper bound of a size, bytes (1 EB)
MAX_BYTES = 1e18
#: bandwidths lie in [MIN_BANDWIDTH, MAX_BANDWIDTH] bytes/s; 1e30 leaves room for "ideal" links (transfers
#: far below time resolution) while capacity x time stays finite (< 1e45)
MIN_BANDWIDTH, MAX_BANDWIDTH = 1e-6, 1e30

_RANGE = {"time": (0.0, MAX_TIME), "bytes": (0.0, MAX_BYTES), "bandwidth": (MIN_BANDWIDTH, MAX_BANDWIDTH)}
_UNIT = {"time": "s", "bytes": "B", "bandwidth": "B/s"}

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict = 3, 60, 60, 6, 6


def show(value: Any) -> str:
    """A short repr for error messages: deep, long or huge values are abbreviated."""
    if type(value) is str and len(value) <= _SHORT.maxstring:  # the common case (an id): reprlib's own answer
        text = repr(value)
        if len(text) <= _SHORT.maxstring:
            return text
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"  # log10(2) digits per bit
    try:
        return _SHORT.repr(value)
    except (ValueError, RecursionError):  # a huge int inside a container, a self-referencing object
        return f"<{type(value).__name__}>"


def _real(value: Any) -> bool:
    """A real number (Python or NumPy scalar), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__name__ != "bool_"


def number(value: Any, field: str, *, positive: bool = False) -> float:
    """`value` as a finite float >= 0 (> 0 with positive=True); ScenarioError naming `field` otherwise."""
    if type(value) is float and 0.0 <= value < math.inf and (value > 0 or not positive):
        return value  # the common case, checked without the numbers ABC
    if not _real(value):
        raise ScenarioError(f"{field}: must be a finite number, got {show(value)}")
    try:
        out = float(value)
    except OverflowError:
        raise ScenarioError(f"{field}: must be a finite number, got {show(value)}") from None
    if not math.isfinite(out):
        raise ScenarioError(f"{field}: must be a finite number, got {show(value)}")
    if positive and out <= 0:
        raise ScenarioError(f"{field}: must be > 0, got {show(value)}")
    if out < 0:
        raise ScenarioError(f"{field}: must be >= 0, got {show(value)}")
    return out


def quantity(value: Any, kind: str, field: str, *, positive: bool = False) -> float:
    """`value` in SI units: a number, or a string with a unit ("25 GB/s", "2 us", "4 MiB").

    kind: "time" (s), "bytes" or "bandwidth" (bytes/s). The result is finite, >= 0 (> 0 with positive=True;
    a bandwidth is always > 0) and within the kind's limits: times < MAX_TIME, bytes < MAX_BYTES,
    bandwidths in [MIN_BANDWIDTH, MAX_BANDWIDTH].
    """
    if type(value) is float:  # the common case, from builders: skip the parser
        out = value
    else:
        try:
            out = parse_quantity(value, kind, field)
        except ValueError as e:  # includes ScenarioError
            raise ScenarioError(str(e)) from None
    low, high = _RANGE[kind]
    if low <= out < high and (out > 0 or not positive):  # in range, hence finite: the common case
        return out
    if not math.isfinite(out):
        raise ScenarioError(f"{field}: must be a finite number, got {show(value)}")
    if (positive or kind == "bandwidth") and out <= 0:
        raise ScenarioError(f"{field}: must be > 0, got {show(value)}")
    if out < 0:
        raise ScenarioError(f"{field}: must be >= 0, got {show(value)}")
    unit = _UNIT[kind]
    if kind == "bandwidth" and not low <= out <= high:
        raise ScenarioError(f"{field}: must lie in [{low:g}, {high:g}] {unit}, got {show(value)}")
    if kind != "bandwidth" and not out < high:
        raise ScenarioError(f"{field}: must be < {high:g} {unit} (netsim's limit), got {show(value)}")
    return out


def fraction(value: Any, field: str) -> float:
    """`value` as a float in (0, 1] (an efficiency), else a ScenarioError naming `field`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ScenarioError(f"{field}: must be in (0, 1], got {value!r}")
    return float(value)


def samples(values: Any, field: str, *, positive: bool = False):
    """`values` as a 1-D float64 NumPy array of finite numbers (> 0 with positive=True), else a
    ScenarioError naming `field` and the first bad element by its index."""
    import numpy as np  # here only: the other checks serve processes that never load NumPy

    try:
        out = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ScenarioError(f"{field}: expected a list of numbers, got {show(values)}") from None
    if out.ndim != 1:
        raise ScenarioError(f"{field}: expected a 1-D list of numbers, got shape {out.shape}")
    bad = np.flatnonzero(~np.isfinite(out) | (out <= 0 if positive else False))
    if bad.size:
        must = "a finite number > 0" if positive else "a finite number"
        raise ScenarioError(f"{field}[{bad[0]}]: must be {must}, got {float(out[bad[0]])!r}")
    return out


def count(value: Any, field: str, *, minimum: int = 1) -> int:
    """`value` as an int >= minimum: bools, floats (even 2.0) and strings are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ScenarioError(f"{field}: expected an integer >= {minimum}, got {show(value)}")
    if value < minimum:
        raise ScenarioError(f"{field}: expected an integer >= {minimum}, got {show(value)}")
    return int(value)


def choice(value: Any, field: str, options: Collection[str]) -> str:
    """`value` if it is one of `options`."""
    if not isinstance(value, str) or value not in options:
        raise ScenarioError(f"{field}: unknown value {show(value)}; expected one of {sorted(options)}")
    return value


def identifier(value: Any, field: str) -> str:
    """A non-empty printable string: an id or a node name (no NUL, newline or other control characters)."""
    if not isinstance(value, str) or not value:
        raise ScenarioError(f"{field}: must be a non-empty string, got {show(value)}")
    if not value.isprintable():
        raise ScenarioError(
            f"{field}: must be printable (no control characters such as NUL), got {show(value)}"
        )
    return value


def identifiers(value: Any, field: str) -> tuple[str, ...]:
    """A list or tuple of ids (`identifier`), as a tuple. A lone string is refused: ["ab"], not "ab"."""
    # one pass for the common case (a route of a 1e4-flow scenario file is read in ~1 us); anything else
    # goes element by element, for the message naming the element
    if type(value) in (list, tuple) and all(type(v) is str and v and v.isprintable() for v in value):
        return tuple(value)
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ScenarioError(f"{field}: expected a list of id strings, got {show(value)}")
    return tuple(identifier(v, f"{field}[{i}]") for i, v in enumerate(value))


def text(value: Any, field: str) -> str:
    """A string (possibly empty), never coerced from another type."""
    if not isinstance(value, str):
        raise ScenarioError(f"{field}: expected a string, got {show(value)}")
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in JSON): no file or terminal can show it
        raise ScenarioError(f"{field}: not valid Unicode text, got {show(value)}") from None
    return value


def read_text(path: str | os.PathLike, *, errors: str = "strict") -> str:
    """The text of the file at `path`: UTF-8, UTF-16 or UTF-32, with or without a byte-order mark (the one
    decoding path of every netsim reader; the encoding is told as `json` tells it, from the first bytes).

    errors: "strict" raises ScenarioError naming the file and the first undecodable byte; "replace" reads
    such bytes as U+FFFD (logs that carry other tools' binary output).
    """
    with open(path, "rb") as f:
        raw = f.read()
    encoding = json.detect_encoding(raw)
    try:
        return raw.decode(encoding, errors)
    except UnicodeDecodeError as e:
        name = encoding.removesuffix("-sig").upper()
        raise ScenarioError(f"{os.fspath(path)}: not {name} text (byte {e.start}: {e.reason})") from None


def read_json(path: str | os.PathLike, what: str) -> Any:
    """The JSON value in the file at `path` (`read_text`'s encodings); ScenarioError naming the file when it
    is not JSON, saying it is not `what` ("a scenario") when it nests too deeply to read."""
    source = read_text(path)
    try:
        return json.loads(source)
    except RecursionError:
        raise ScenarioError(f"{os.fspath(path)}: not {what}: JSON nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, or an integer of more than 4300 digits
        raise ScenarioError(f"{os.fspath(path)}: not valid JSON: {e}") from None


# --- output -------------------------------------------------------------------------------------------


def to_json(obj: Any, *, indent: int | None = None, rows: bool = False) -> str:
    """Standard JSON (RFC 8259): non-finite floats (inf, nan) are written as null.

    rows: an object's members one per line and its lists one element per line (a result: one line per flow
    and per link), written by json's C encoder: faster than `indent`, which takes its Python one.
    """

    def clean(x):
        if isinstance(x, float):
            return x if math.isfinite(x) else None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        return x

    def dump(x, indent=None) -> str:
        try:
            return json.dumps(x, indent=indent, allow_nan=False)
        except ValueError:  # a non-finite number in x: rare, so only then is x copied without them
            return json.dumps(clean(x), indent=indent, allow_nan=False)

    if not (rows and isinstance(obj, dict)):
        return dump(obj, indent)

    def member(key: str, value: Any) -> str:
        if isinstance(value, list) and value:
            return f"{json.dumps(key)}: [\n  " + ",\n  ".join(map(dump, value)) + "\n ]"
        return f"{json.dumps(key)}: {dump(value)}"

    return "{\n " + ",\n ".join(member(k, v) for k, v in obj.items()) + "\n}"


_TMP = re.compile(r"\.tmp-(\d+)$")


def _temp_name(path: str) -> str:
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.tmp-{os.getpid()}")


def remove_stale_temps(path: str | os.PathLike) -> list[str]:
    """Removes `.NAME.tmp-PID` files of this target left by processes that no longer run (a killed write);
    returns the paths removed."""
    folder, name = os.path.split(os.path.abspath(path))
    prefix = f".{name}.tmp-"
    removed: list[str] = []
    try:
        entries = os.listdir(folder)
    except OSError:
        return removed
    for entry in entries:
        m = _TMP.search(entry)
        if not entry.startswith(prefix) or m is None or len(entry) != len(prefix) + len(m.group(1)):
            continue
        pid = int(m.group(1))
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # still running: perhaps writing right now
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):  # PermissionError: the process runs as another user
            continue
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(folder, entry))
            removed.append(os.path.join(folder, entry))
    return removed


def fsync(path: str | os.PathLike) -> None:
    """Flushes a file's written pages to disk (through a second descriptor: Linux and macOS semantics)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def folder_problem(path: str | os.PathLike) -> str | None:
    """Why no file can be made at `path`: a part of its folder is a file, or the folder is missing (None:
    the folder exists)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(folder):
        return None
    part = folder
    while not os.path.exists(part) and os.path.dirname(part) != part:
        part = os.path.dirname(part)  # the nearest part of the path that exists
    if os.path.exists(part) and not os.path.isdir(part):
        return f"folder {part!r} is a file, not a folder"
    return f"folder {folder!r} does not exist"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, durable: bool = False) -> Iterator[str]:
    """Yields a temporary name beside `path` (`.NAME.tmp-PID`) to write to; renames it onto `path` when the
    block succeeds and removes it when it fails. Readers never see half a file. durable: fsync the file
    before the rename, so a crash right after cannot leave a renamed but empty file."""
    path = os.fspath(path)
    problem = folder_problem(path)
    if problem:  # said of the user's path, not of the temporary name beside it
        raise FileNotFoundError(errno.ENOENT, problem, path)
    remove_stale_temps(path)
    tmp = _temp_name(path)
    try:
        yield tmp
        if durable:
            fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Writes `data` (text as UTF-8) to `path` through `atomic_path`; the file gets the usual permissions."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        with atomic_path(path) as tmp:
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666
            )  # 0o666 less the umask, like open()
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
    except OSError as e:  # a full disk, a quota: one message naming the file (the old one is kept)
        raise OSError(e.errno, f"cannot write {os.fspath(path)!r}: {e.strerror or e}") from None


def check_writable(path: str | os.PathLike, field: str) -> None:
    """Raises OSError naming `field` unless a file can be written at `path` (its folder exists and takes a
    new file): found before a long run rather than after it. Creates and removes the temporary name."""
    path = os.fspath(path)
    problem = folder_problem(path)
    if problem:
        raise OSError(f"{field}: {problem}")
    if os.path.isdir(path):
        raise OSError(f"{field}: {path!r} is a folder")
    tmp = _temp_name(path)
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o666))
    except OSError as e:
        raise OSError(
            f"{field}: cannot write in folder {os.path.dirname(os.path.abspath(path))!r}: {e.strerror}"
        ) from None
    os.unlink(tmp)
