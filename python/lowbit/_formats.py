"""Formats, profiles and tensor-core models as Python objects, from the library's own rows."""
from __future__ import annotations

import dataclasses
import difflib
from fractions import Fraction
from typing import Any, Optional

from . import _lowbit
from ._dtypes import dtype_of, format_of

import numpy as np


def _fraction(pair) -> Optional[Fraction]:
    if pair is None:
        return None
    significand, exponent = pair
    return Fraction(significand) * (Fraction(2) ** exponent)


def _exact_float(q: Optional[Fraction]) -> Optional[float]:
    """float(q) where that is q exactly (no rounding, no overflow), else None."""
    if q is None:
        return None
    try:
        f = float(q)
    except OverflowError:
        return None
    return f if Fraction(f) == q else None


@dataclasses.dataclass(frozen=True)
class Format:
    """One number format: its fields and exact constants (``lowbit formats --json``).

    ``max``, ``min_normal`` and ``min_subnormal`` are exact ``fractions.Fraction`` values (None where the
    format has no such value: int8 has no normal binade, e8m0 no subnormals); ``max_float`` and the others
    are the same values as Python floats where a float holds them exactly, else None.  ``dtype`` is the numpy
    or ml_dtypes dtype of the same format, or None (codes are then ``lowbit.Codes``).

    Example:
        >>> import lowbit
        >>> f = lowbit.format("e4m3")
        >>> f.max, f.min_subnormal, f.dtype
        (Fraction(448, 1), Fraction(1, 512), dtype(float8_e4m3fn))
    """

    name: str
    aliases: tuple[str, ...]
    bits: int
    exponent_bits: int
    mantissa_bits: int
    bias: int
    is_signed: bool
    twos_complement: bool
    specials: str
    has_zero: bool
    has_nan: bool
    has_inf: bool
    has_subnormals: bool
    code_bits: int
    code_shift: int
    storage_bits: int
    storage_bytes: int
    max: Fraction
    min_normal: Optional[Fraction]
    min_subnormal: Optional[Fraction]

    @property
    def max_float(self) -> Optional[float]:
        return _exact_float(self.max)

    @property
    def min_normal_float(self) -> Optional[float]:
        return _exact_float(self.min_normal)

    @property
    def min_subnormal_float(self) -> Optional[float]:
        return _exact_float(self.min_subnormal)

    @property
    def dtype(self) -> Optional[np.dtype]:
        return dtype_of(self.name)

    def __str__(self) -> str:
        return self.name


def format_name(fmt: Any, argument: str) -> str:
    """The canonical name of a format given as a name, a Format or a dtype; ValueError / TypeError naming
    the argument otherwise (an unknown name with the closest known ones)."""
    if isinstance(fmt, Format):
        return fmt.name
    if isinstance(fmt, str):
        canonical = _lowbit.canonical_format(fmt)
        if canonical is not None:
            return canonical
        spellings = _lowbit.known_spellings()
        by_lower = {s.lower(): s for s in spellings}
        close = difflib.get_close_matches(fmt.lower(), list(by_lower), n=3, cutoff=0.6)
        hint = f"; closest: {', '.join(by_lower[c] for c in close)}" if close else ""
        raise ValueError(f"{argument}: {fmt!r} is not a format{hint} (see lowbit.formats())")
    try:
        dt = np.dtype(fmt)
    except TypeError:
        dt = None
    if dt is not None and not isinstance(fmt, (int, float)):
        name = format_of(dt)
        if name is not None:
            return name
        raise ValueError(f"{argument}: dtype {dt} holds no lowbit format (name the format instead)")
    raise TypeError(f"{argument}: expected a format name, a lowbit.Format or a dtype, not {type(fmt).__name__}")


def format(name: Any) -> Format:
    """The format a name, alias, lowbit.Format or dtype means.

    Names are case-insensitive and include aliases (``float8_e4m3fn``, ``torch.float8_e5m2``), IEEE P3109
    names (``binary8p3se``) and parametric ones (``e3m4b5-fn``), as on the command line.  An unknown name is
    a ValueError that lists the closest known names.

    Example:
        >>> import lowbit
        >>> lowbit.format("float8_e4m3fn").name
        'e4m3'
        >>> lowbit.format("e2m1").max_float
        6.0
    """
    info = _lowbit.format_info(format_name(name, "name"))
    info["aliases"] = tuple(info["aliases"])
    for key in ("max", "min_normal", "min_subnormal"):
        info[key] = _fraction(info[key])
    return Format(**info)


def formats() -> list[Format]:
    """Every built-in format, in the order of ``lowbit formats``.

    Example:
        >>> import lowbit
        >>> [f.name for f in lowbit.formats()][:5]
        ['f64', 'f32', 'tf32', 'bf16', 'f16']
    """
    return [format(n) for n in _lowbit.builtin_formats()]


@dataclasses.dataclass(frozen=True)
class TargetRule:
    """What a profile's implementation offers for one target format."""

    format: Optional[str]
    roundings: tuple[str, ...]
    default_rounding: Optional[str]
    overflows: tuple[str, ...]
    default_overflow: str
    note: str


@dataclasses.dataclass(frozen=True)
class Profile:
    """A named policy bundle reproducing one implementation (``lowbit profiles --json``)."""

    name: str
    description: str
    quirks: dict
    int8_sign_magnitude: bool
    targets: tuple[TargetRule, ...]
    other_targets: Optional[TargetRule]

    def as_dict(self) -> dict:
        """The profile as ``lowbit profiles --json`` prints it."""
        return dataclasses.asdict(self) | {
            "targets": [_rule_dict(r) for r in self.targets],
            "other_targets": _rule_dict(self.other_targets) if self.other_targets else None,
        }


def _rule(d: dict) -> TargetRule:
    return TargetRule(**(d | {"roundings": tuple(d["roundings"]), "overflows": tuple(d["overflows"])}))


def _rule_dict(r: TargetRule) -> dict:
    return dataclasses.asdict(r) | {"roundings": list(r.roundings), "overflows": list(r.overflows)}


def profiles() -> list[Profile]:
    """Every profile: ocp, cuda, ml_dtypes, llvm, te, torchao, microxcaling, p3109.

    Example:
        >>> import lowbit
        >>> [p.name for p in lowbit.profiles()]
        ['ocp', 'cuda', 'ml_dtypes', 'llvm', 'te', 'torchao', 'microxcaling', 'p3109']
    """
    out = []
    for d in _lowbit.profiles():
        out.append(Profile(
            name=d["name"], description=d["description"], quirks=dict(d["quirks"]),
            int8_sign_magnitude=d["int8_sign_magnitude"], targets=tuple(_rule(r) for r in d["targets"]),
            other_targets=_rule(d["other_targets"]) if d["other_targets"] is not None else None))
    return out


@dataclasses.dataclass(frozen=True)
class Model:
    """A GEMM procedure of ``lowbit gemm --model`` (``lowbit gemm --list-models --json``): ``kind`` is exact,
    f32-order, model (a bit-accurate tensor-core model, its parameters in ``model``), promoted or
    block-scaled; ``operands`` the formats it takes (empty: every format ``operand_rule`` describes);
    ``scales`` the block scales it reads; ``golden`` the operand formats of its golden suite."""

    name: str
    kind: str
    description: str
    scales: str
    operands: tuple[str, ...]
    converts_exactly: bool
    operand_rule: str
    model: Optional[dict]
    interval: Optional[int]
    golden: tuple[dict, ...]

    def as_dict(self) -> dict:
        """The row as ``lowbit gemm --list-models --json`` prints it."""
        d = dataclasses.asdict(self) | {"operands": list(self.operands), "golden": [dict(g) for g in self.golden]}
        return {k: v for k, v in d.items() if not (k in ("model", "interval") and v is None)}


def models() -> list[Model]:
    """Every GEMM procedure, in the order of ``lowbit gemm --list-models``: the exact reference, the f32
    accumulation orders, the composites (promotion, DeepGEMM's block scaling) and one per tensor-core model.

    Example:
        >>> import lowbit
        >>> m = {m.name: m for m in lowbit.models()}["hopper-fp8"]
        >>> m.kind, m.model["group"], m.model["fraction_bits"]
        ('model', 32, 13)
    """
    return [Model(**(d | {"operands": tuple(d["operands"]), "model": None if d["model"] is None else dict(d["model"]),
                          "golden": tuple(dict(g) for g in d["golden"])}))
            for d in _lowbit.procedures()]
