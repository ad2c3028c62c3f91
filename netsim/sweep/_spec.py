"""Sweep specs as JSON (the input of `netsim sweep SPEC`); see docs/sweeps.md for the format."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from collections.abc import Mapping
from typing import Any

from .._checks import quantity, read_text
from .._scenario import Scenario, ScenarioError
from ._axes import FailedLinks, LinkBandwidth, LinkLatency, MessageSize, ScenarioAxis, SweepError
from ._sweep import BusBandwidth, Sweep

_ARRAY = {"bandwidth": LinkBandwidth, "latency": LinkLatency, "bytes": MessageSize}
_UNIT = {"bandwidth": "bandwidth", "latency": "time", "bytes": "bytes"}
_KINDS = [*_ARRAY, "failed_links", "python"]


def load_spec(path: str | os.PathLike) -> Sweep:
    """Reads a sweep spec file; relative paths inside it are relative to the spec's folder."""
    path = os.fspath(path)
    try:
        data = json.loads(read_text(path))
    except ScenarioError as e:  # not UTF-8/16/32 text
        raise SweepError(str(e)) from None
    except json.JSONDecodeError as e:
        raise SweepError(f"{path}: not valid JSON: {e}") from None
    return sweep_from_dict(data, base_dir=os.path.dirname(os.path.abspath(path)))


def sweep_from_dict(data: Mapping[str, Any], *, base_dir: str = ".") -> Sweep:
    """Builds a Sweep from its JSON structure (values may carry units: "25 GB/s", "2 us", "4 MiB")."""
    if not isinstance(data, Mapping):
        raise SweepError(f"sweep spec: expected a JSON object, got {type(data).__name__}")
    unknown = set(data) - {"scenario", "axes", "samples", "seed", "outputs", "name", "description", "busbw"}
    if unknown:
        raise SweepError(f"sweep spec: unknown field(s) {sorted(unknown)}")
    if "scenario" not in data:
        raise SweepError("sweep spec: missing field 'scenario' (a scenario file path or object)")
    sc = data["scenario"]
    try:
        scenario = (
            Scenario.load(os.path.join(base_dir, sc)) if isinstance(sc, str) else Scenario.from_dict(sc)
        )
    except (ScenarioError, OSError) as e:
        raise SweepError(f"scenario: {e}") from None
    axes_data = data.get("axes")
    if not isinstance(axes_data, list) or not axes_data:
        raise SweepError(f"axes: expected a non-empty list of axis objects, got {axes_data!r}")
    axes = [_axis(a, f"axes[{i}]", base_dir) for i, a in enumerate(axes_data)]
    for key in ("name", "description"):
        if not isinstance(data.get(key, ""), str):
            raise SweepError(f"{key}: expected a string, got {data[key]!r}")
    outputs = data.get("outputs")
    if outputs is not None and (
        not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs)
    ):
        raise SweepError(f"outputs: expected a list of output names, got {outputs!r}")
    busbw = data.get("busbw")
    if busbw is not None:
        if not isinstance(busbw, Mapping) or set(busbw) != {"kind", "ranks", "size"}:
            raise SweepError(
                f'busbw: expected {{"kind": "allreduce", "ranks": 8, "size": "64 MiB"}} (the collective of the '
                f"base scenario), got {busbw!r}"
            )
        busbw = BusBandwidth(busbw["kind"], busbw["ranks"], busbw["size"])
    # Sweep checks samples and seed by type (a string seed is refused, not parsed)
    return Sweep(
        scenario,
        axes,
        samples=data.get("samples"),
        seed=data.get("seed", 0),
        outputs=outputs,
        name=data.get("name", ""),
        busbw=busbw,
    )


def _axis(d: Any, where: str, base_dir: str):
    if not isinstance(d, Mapping):
        raise SweepError(f"{where}: expected an object, got {d!r}")
    kind = d.get("kind")
    if kind not in _KINDS:
        raise SweepError(f"{where}.kind: expected one of {_KINDS}, got {kind!r}")
    name = d.get("name", kind)
    if not isinstance(name, str):
        raise SweepError(f"{where}.name: expected a string, got {name!r}")
    if kind in _ARRAY:
        cls = _ARRAY[kind]
        known = {
            "name",
            "kind",
            cls.selects,
            "scale",
            "value",
            "scale_range",
            "value_range",
            "log",
            "independent",
        }
        _known(d, known, where)
        kw: dict[str, Any] = {}
        for key in ("scale", "value", "scale_range", "value_range"):
            if key in d:
                raw = d[key]
                if not isinstance(raw, list):
                    raise SweepError(f"{where}.{key}: expected a list, got {raw!r}")
                unit = "scale" if key.startswith("scale") else _UNIT[kind]
                kw[key] = [_number(v, unit, f"{where}.{key}[{j}]") for j, v in enumerate(raw)]
        for key in ("log", "independent"):
            if not isinstance(d.get(key, False), bool):
                raise SweepError(f"{where}.{key}: expected true or false, got {d[key]!r}")
        return cls(
            name,
            match=d.get(cls.selects, "*"),
            log=d.get("log", False),
            independent=d.get("independent", False),
            **kw,
        )
    if kind == "failed_links":
        _known(d, {"name", "kind", "sets"}, where)
        sets = d.get("sets")
        if not isinstance(sets, list):
            raise SweepError(f"{where}.sets: expected a list of lists of link ids, got {sets!r}")
        return FailedLinks(name, sets=sets)
    _known(d, {"name", "kind", "function", "values"}, where)
    spec = d.get("function")
    if not isinstance(spec, str) or ":" not in spec:
        raise SweepError(f"{where}.function: expected 'module:function' or 'file.py:function', got {spec!r}")
    return ScenarioAxis(
        name, values=d.get("values") or (), build=_import(spec, base_dir, f"{where}.function"), function=spec
    )


def _known(d: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = set(d) - known
    if unknown:
        raise SweepError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")


def _number(v: Any, unit: str, where: str) -> float:
    if unit == "scale":
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise SweepError(f"{where}: a scale is a plain number, got {v!r}")
        return float(v)
    try:
        return quantity(v, unit, where)
    except ValueError as e:
        raise SweepError(str(e)) from None


def _import(spec: str, base_dir: str, where: str):
    module_name, _, attr = spec.rpartition(":")
    try:
        if module_name.endswith(".py"):
            path = os.path.join(base_dir, module_name)
            loader = importlib.util.spec_from_file_location(f"netsim_sweep_{abs(hash(path))}", path)
            if loader is None or loader.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
        fn = getattr(module, attr)
    except (ImportError, AttributeError, OSError) as e:
        raise SweepError(f"{where}: cannot import {spec!r}: {e}") from None
    return fn
