"""The training scale state a checkpoint must carry for exact continuation, as ``lowbit state`` and
``lowbit verify-checkpoint --state`` handle it: Transformer Engine's delayed scaling per layer (amax history,
scale, algorithm, margin) and PyTorch's GradScaler (scale, growth tracker, factors, interval), stepped exactly.

A state is a dict of the documented JSON form (lowbit/training_state.hpp, README "Training state")::

    {"layers": {"fc1": {"history": ["0x...", ...], "scale": "0x...", "algorithm": "max", "margin": 0,
                        "element": "e4m3"}},
     "grad_scaler": {"scale": "0x...", "growth_tracker": 0, "growth_factor": 2.0, "backoff_factor": 0.5,
                     "growth_interval": 2000}}

with every f32 value as its bit pattern.  ``load`` and ``save`` read and write it as JSON or as safetensors
(by the file name), ``step`` advances it by one step's amaxes and found-inf flag (or a list of steps),
``compare`` runs a saved and a restored state through the same steps and names where they part, and
``from_grad_scaler`` takes ``torch.amp.GradScaler.state_dict()``.

Example:
    >>> import lowbit
    >>> s = {"layers": {"fc1": {"history": ["0x00000000"] * 4, "scale": "0x3f800000", "algorithm": "max",
    ...                         "margin": 0, "element": "e4m3"}}}
    >>> s = lowbit.state.step(s, amax={"fc1": 2.0})  # 448 / 2, then the history rolls
    >>> s["layers"]["fc1"]["history"], s["layers"]["fc1"]["scale"]
    (['0x00000000', '0x00000000', '0x00000000', '0x40000000'], '0x43600000')
    >>> lowbit.state.step(s, amax={"fc1": 1.0})["layers"]["fc1"]["scale"]  # the 2.0 is still in the history
    '0x43600000'
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _lowbit

__all__ = ["Divergence", "Comparison", "load", "save", "step", "compare", "from_grad_scaler"]

PathLike = Union[str, "os.PathLike[str]"]


def _path(path: Any, argument: str = "path") -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{argument}: expected a file name, not {type(path).__name__}")
    p = os.fspath(path)
    if p in ("", "-"):
        raise ValueError(f"{argument}: {p!r} is not a file name")
    return p


def _text(state: Any, argument: str = "state") -> str:
    if not isinstance(state, Mapping):
        raise TypeError(f"{argument}: expected a state dict (lowbit.state.load), not {type(state).__name__}")
    return json.dumps(state)


def _normal(text: str, element: str = "e4m3") -> Dict[str, Any]:
    return json.loads(_lowbit.state_normal(text, element))


def load(path: PathLike, *, element: str = "e4m3") -> Dict[str, Any]:
    """The state in `path` (safetensors when the name ends in .safetensors, JSON otherwise), validated, as a
    dict.  `element` is the format of a layer whose JSON names none.  A malformed file is a ValueError naming
    the file and the key.

    Example:
        >>> import lowbit, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "scaler.safetensors")
        >>> lowbit.state.save(lowbit.state.from_grad_scaler({"scale": 1024.0, "growth_factor": 2.0,
        ...     "backoff_factor": 0.5, "growth_interval": 100, "_growth_tracker": 3}), path)
        >>> lowbit.state.load(path)["grad_scaler"]["scale"]
        '0x44800000'
    """
    p = _path(path)
    if p.endswith(".safetensors"):
        return json.loads(_lowbit.state_read_safetensors(p))
    try:
        with open(p, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ValueError(f"path: '{p}': {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
        json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"path: '{p}': malformed JSON: {e}") from None
    try:
        return json.loads(_lowbit.state_normal(text, element))
    except ValueError as e:
        raise ValueError(f"path: '{p}': {str(e).removeprefix('state: ')}") from None


def save(state: Mapping[str, Any], path: PathLike) -> None:
    """Write `state` to `path` as safetensors (a name ending in .safetensors) or JSON, the same content as
    ``lowbit state convert`` writes: a new file renamed over the old, so an existing file is replaced whole
    or not at all.  A state that does not validate is a ValueError naming its key; nothing is written.

    Example:
        >>> import lowbit, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "state.json")
        >>> lowbit.state.save({"layers": {"fc1": {"history": ["0x3f800000"], "scale": "0x43e00000"}}}, path)
        >>> lowbit.state.load(path)["layers"]["fc1"]["algorithm"]  # TE's default, written out
        'max'
    """
    _lowbit.state_write(_text(state), _path(path), [])


def _f32_text(value: Any, where: str) -> str:
    """An amax as its f32 bit pattern: a "0x..." string as it is, a number only when it is an f32 value."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{where}: expected an f32 value or its bit pattern '0x...', not {type(value).__name__}")
    f = np.float32(value)
    if not (math.isnan(float(value)) and math.isnan(float(f))) and float(f) != float(value):
        raise ValueError(f"{where}: {value!r} is not an f32 value (pass np.float32, or the bit pattern)")
    return f"0x{int(np.array(f).view(np.uint32)):08x}"


def _steps(amax: Optional[Mapping[str, Any]], found_inf: Optional[bool], steps: Optional[Sequence[Mapping]]) -> str:
    if steps is not None:
        if amax is not None or found_inf is not None:
            raise ValueError("steps: not with amax= or found_inf=")
        if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence):
            raise TypeError(f"steps: expected a list of steps ({{'amax': ..., 'found_inf': ...}}), not {type(steps).__name__}")
        items = list(steps)
    else:
        if amax is None and found_inf is None:
            raise ValueError("amax / found_inf: give this step's inputs (or steps=)")
        items = [{**({"amax": amax} if amax is not None else {}),
                  **({"found_inf": found_inf} if found_inf is not None else {})}]
    out = []
    for i, s in enumerate(items):
        if not isinstance(s, Mapping):
            raise TypeError(f"steps[{i}]: expected a dict with amax and/or found_inf, not {type(s).__name__}")
        e = dict(s)
        if "amax" in e:
            if not isinstance(e["amax"], Mapping):
                raise TypeError(f"steps[{i}].amax: expected a dict of layer amaxes")
            e["amax"] = {str(k): _f32_text(v, f"steps[{i}].amax.{k}") for k, v in e["amax"].items()}
        if "found_inf" in e and not isinstance(e["found_inf"], (bool, np.bool_)):
            raise TypeError(f"steps[{i}].found_inf: expected True or False")
        if "found_inf" in e:
            e["found_inf"] = bool(e["found_inf"])
        out.append(e)
    return json.dumps({"steps": out})


def step(state: Mapping[str, Any], *, amax: Optional[Mapping[str, Any]] = None, found_inf: Optional[bool] = None,
         steps: Optional[Sequence[Mapping]] = None) -> Dict[str, Any]:
    """The state after one step (`amax`: {layer: f32 amax}, `found_inf`: the loss scaler's unscale found an
    Inf or NaN) or after each of `steps` in turn, as ``lowbit state step`` computes it: TE's delayed-scaling
    update (the amax recorded, the scale from the history before the roll, then the roll) and torch's
    ``_amp_update_scale``.  `state` is left as it is.  A layer without its amax, an amax for no layer, or
    found_inf without a loss scaler is a ValueError naming the step.

    Example:
        >>> import lowbit
        >>> s = lowbit.state.from_grad_scaler({"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
        ...                                    "growth_interval": 2000, "_growth_tracker": 5})
        >>> lowbit.state.step(s, found_inf=True)["grad_scaler"]  # backoff: the scale halves, the tracker resets
        {'scale': '0x47000000', 'growth_tracker': 0, 'growth_factor': 2.0, 'backoff_factor': 0.5, 'growth_interval': 2000}
    """
    return json.loads(_lowbit.state_step(_text(state), _steps(amax, found_inf, steps)))


@dataclass(frozen=True)
class Divergence:
    """Where a restored run's scale first leaves the saved run's: after `step` (0: as restored), for `layer`
    (a layer's name, or "grad_scaler"), both scales' f32 bits and values."""

    step: int
    layer: str
    expected: int
    actual: int

    @property
    def expected_value(self) -> float:
        return float(np.array(self.expected, np.uint32).view(np.float32))

    @property
    def actual_value(self) -> float:
        return float(np.array(self.actual, np.uint32).view(np.float32))


@dataclass
class Comparison:
    """A restored state against the saved one over `steps` steps: `identical` when every scale agrees after
    every step; `divergences` the first one per layer, earliest first; `notes` where the states differ other
    than in a scale (history length, algorithm, ...)."""

    steps: int
    divergences: List[Divergence] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.divergences


def compare(saved: Mapping[str, Any], restored: Mapping[str, Any], steps: Sequence[Mapping]) -> Comparison:
    """Run `saved` and `restored` through `steps` (as ``step(steps=...)`` takes them) and compare every scale
    after each step, as ``lowbit verify-checkpoint --state --restored --steps`` does.

    Example:
        >>> import lowbit
        >>> saved = {"layers": {"fc1": {"history": ["0x00000000", "0x40800000"], "scale": "0x3f800000"}}}
        >>> restored = {"layers": {"fc1": {"history": ["0x00000000", "0x00000000"], "scale": "0x3f800000"}}}
        >>> c = lowbit.state.compare(saved, restored, [{"amax": {"fc1": 1.0}}])
        >>> c.identical, [(d.step, d.layer, d.expected_value, d.actual_value) for d in c.divergences]
        (False, [(1, 'fc1', 112.0, 448.0)])
    """
    n, found, notes = _lowbit.state_compare(_text(saved, "saved"), _text(restored, "restored"),
                                            _steps(None, None, steps))
    return Comparison(int(n), [Divergence(int(s), str(l), int(e), int(a)) for s, l, e, a in found], list(notes))


def from_grad_scaler(state_dict: Mapping[str, Any]) -> Dict[str, Any]:
    """The loss-scaler part of a state from ``torch.amp.GradScaler.state_dict()`` ({"scale", "growth_factor",
    "backoff_factor", "growth_interval", "_growth_tracker"}): the scale as its f32 bits (torch keeps it in
    an f32 tensor, so the float is an f32 value), the factors as the doubles torch multiplies in.

    Example:
        >>> import lowbit
        >>> lowbit.state.from_grad_scaler({"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
        ...                                "growth_interval": 2000, "_growth_tracker": 0})["grad_scaler"]["scale"]
        '0x47800000'
    """
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"state_dict: expected GradScaler.state_dict(), not {type(state_dict).__name__}")
    missing = [k for k in ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")
               if k not in state_dict]
    if missing:
        raise ValueError(f"state_dict: no {missing[0]!r} (GradScaler.state_dict() of an enabled scaler has it)")
    gs = {"scale": _f32_text(float(state_dict["scale"]), "state_dict.scale"),
          "growth_tracker": int(state_dict["_growth_tracker"]),
          "growth_factor": float(state_dict["growth_factor"]),
          "backoff_factor": float(state_dict["backoff_factor"]),
          "growth_interval": int(state_dict["growth_interval"])}
    return _normal(json.dumps({"grad_scaler": gs}))
