"""Precision contracts (docs/contract.md): one GEMM-based op — a linear layer's fprop, dgrad or wgrad — run
stage by stage, as ``lowbit contract`` runs it.

``names()`` lists the named contracts (``lowbit contract list``), ``show(contract)`` gives a contract's JSON
document as a dict (``lowbit contract show --json``), ``run(contract, x=, w=, dy=, ...)`` computes every stage
of one pass (the arrays ``lowbit contract run`` writes, the same bytes), and ``check(expected, results)`` /
``assert_matches(expected, results)`` compare a kernel's stages with them bit for bit, naming the first
differing stage and element (``lowbit contract check``).

A contract is a name of ``names()``, a path of a contract file, or a document as a dict; the library's
loader validates it, and a bad one is a ValueError naming the JSON path at fault
(``contract: ...: passes.fprop.epilogue[2].format: ...``).

Example:
    >>> import lowbit, numpy as np
    >>> "te-current@sm90" in lowbit.contract.names()
    True
    >>> x = np.array([[448.0, -224.0, 1.0, 0.0]], np.float32)
    >>> w = np.array([[1.0, 2.0, 4.0, 448.0]], np.float32)
    >>> doc = {"lowbit_contract": 1, "name": "tiny", "storage": {"x": "f32", "w": "f32"},
    ...        "passes": {"fprop": {"x": {"quantize": {"quantization_format": "tensor", "element": "e4m3"}},
    ...                             "w": {"quantize": {"quantization_format": "tensor", "element": "e4m3"}},
    ...                             "procedure": "exact",
    ...                             "epilogue": [{"step": "dequantize"}, {"step": "cast", "format": "bf16"}]}}}
    >>> r = lowbit.contract.run(doc, x=x, w=w)
    >>> r["accumulator"].tolist(), r["output"].astype(np.float32).tolist()
    ([[4.0]], [[4.0]])
    >>> lowbit.contract.check(r, {"output": r["output"]}).ok
    True
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from . import _lowbit
from ._arrays import source, wrap_codes
from ._convert import decode
from ._dtypes import UINT_OF_BYTES

__all__ = ["Comparison", "Difference", "Run", "Stage", "StageComparison", "assert_matches", "check", "names", "run",
           "show"]

PASSES = ("fprop", "dgrad", "wgrad")


def names() -> List[str]:
    """The named contracts, in ``lowbit contract list`` order (``<recipe>@<arch>``).

    Example:
        >>> import lowbit
        >>> lowbit.contract.names()[:3]
        ['te-current@sm90', 'te-current@sm100', 'te-delayed@sm90']
    """
    return [n for n, _ in _lowbit.contract_names()]


def descriptions() -> Dict[str, str]:
    """Each named contract's description with its source, as ``lowbit contract list`` prints it."""
    return dict(_lowbit.contract_names())


def _load(contract: Any) -> Tuple[str, Optional[str]]:
    """(label, document text or None for a named contract) of a name, a file path or a document dict."""
    if isinstance(contract, Mapping):
        try:
            return "the document", json.dumps(contract)
        except (TypeError, ValueError) as e:
            raise TypeError(f"contract: the document is not JSON: {e}") from None
    if isinstance(contract, str) and contract in names():
        return contract, None
    if not isinstance(contract, (str, os.PathLike)):
        raise TypeError(f"contract: expected a contract name, a file path or a document dict, not "
                        f"{type(contract).__name__}")
    path = os.fspath(contract)
    if not os.path.isfile(path):
        raise ValueError(f"contract: '{path}' is neither a named contract (see lowbit.contract.names()) nor a file")
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"contract: '{path}': cannot be read: {e}") from None
    return f"'{path}'", text


def show(contract: Any) -> Dict[str, Any]:
    """The contract's JSON document as a dict (``lowbit contract show NAME|FILE --json``), validated.

    Example:
        >>> import lowbit
        >>> doc = lowbit.contract.show("te-current@sm90")
        >>> doc["name"], sorted(doc["passes"])
        ('te-current@sm90', ['dgrad', 'fprop', 'wgrad'])
    """
    return json.loads(_lowbit.contract_document(*_load(contract)))


@dataclass(frozen=True)
class Stage:
    """One stage of a run: its name ("x.quantized", "accumulator", "epilogue[1].bias", "amax", "output"), the
    part ("codes", "scales", "tensor_scale"; "" for a stage of one array), its format and its array (in the
    format's dtype, lowbit.Codes where it has none).  `key` is the file ``lowbit contract run`` writes it to,
    without ".npy"."""

    name: str
    part: str
    description: str
    format: str
    array: np.ndarray
    # From a gelu or silu step on: a kernel's array is compared within this many ulps (docs/contract.md).
    tolerance_ulp: Optional[int] = None

    @property
    def key(self) -> str:
        return f"{self.name}.{self.part}" if self.part else self.name


@dataclass
class Run:
    """The stages of one pass, in the order of ``lowbit contract run``'s manifest; ``run[key]`` is a stage's
    array by its key ("output", "accumulator", "x.quantized.codes")."""

    contract: str
    pass_: str
    stages: List[Stage] = field(default_factory=list)
    # The delayed-scaling state after the step (``next_state.json``'s dict), or None when the pass quantizes
    # nothing with the delayed scheme.
    next_state: Optional[Dict[str, Any]] = None

    def __getitem__(self, key: str) -> np.ndarray:
        for s in self.stages:
            if s.key == key:
                return s.array
        raise KeyError(f"{key!r} is not a stage of this run ({', '.join(s.key for s in self.stages)})")

    def keys(self) -> List[str]:
        return [s.key for s in self.stages]


_RANK = {"x": 2, "w": 2, "dy": 2, "bias": 1, "residual": 2}


def _input(value: Any, argument: str):
    """An input as the extension takes it: (codes, format, shape), or None.  Unsigned 16-bit integers are bf16
    bit patterns, as ``lowbit contract run`` reads '<u2' files."""
    if value is None:
        return None
    fmt = "bf16" if isinstance(value, np.ndarray) and value.dtype == np.uint16 else None
    flat, name, shape = source(value, argument, fmt)
    if len(shape) != _RANK[argument]:
        raise ValueError(f"{argument}: shape {tuple(shape)} is {len(shape)}-D; expected {_RANK[argument]}-D")
    return flat, name, [int(d) for d in shape]


def run(contract: Any, *, x: Any = None, w: Any = None, dy: Any = None, bias: Any = None, residual: Any = None,
        stored: Optional[Mapping[str, Any]] = None, state: Optional[Mapping[str, Any]] = None, pass_: str = "fprop",
        sr_seed: Optional[int] = None) -> Run:
    """Every stage of one pass of `contract`, as ``lowbit contract run --contract C --pass PASS --x X.npy ...``
    computes them (the same library code, the same bytes).

    `x` is [M, K] activations, `w` [N, K] weights, `dy` [M, N] the output gradient, each in the contract's
    storage format (float32, float16, or ml_dtypes.bfloat16 / bf16 bit patterns as uint16); `bias` and
    `residual` in their epilogue steps' formats.  fprop reads x and w, dgrad dy and w, wgrad dy and x.
    An operand the contract stores already quantized (``storage.w.quantized``) is given by its parts in
    `stored`, keyed as ``contract run``'s inputs: ``{"w.codes": ..., "w.scales": ..., "w.tensor_scale": ...}``
    (``--w-codes`` ...); unsigned integer arrays are read as the codes of the part's format (the element, or
    e8m0 / e4m3 scales).  `state` is the delayed-scaling state (``--state``: lowbit state's JSON as a dict,
    layers "x", "w", "dy"); the state after the step is ``Run.next_state``.  `sr_seed` seeds a stochastic rounding's random bits (``--sr-seed``).  A missing input the pass needs, an
    input the pass does not read, another format than the storage or mismatched shapes are a ValueError naming
    the argument.

    Example:
        >>> import lowbit, numpy as np
        >>> doc = {"lowbit_contract": 1, "name": "f32-exact", "storage": {"x": "f32", "w": "f32"},
        ...        "passes": {"fprop": {"x": {"quantize": None}, "w": {"quantize": None}, "procedure": "exact",
        ...                             "epilogue": [{"step": "cast", "format": "bf16"}]}}}
        >>> x = np.array([[1.0, 2.0]], np.float32)
        >>> w = np.array([[3.0, 4.0], [0.5, 0.25]], np.float32)
        >>> r = lowbit.contract.run(doc, x=x, w=w)
        >>> r.keys(), r["output"].dtype.name, r["output"].astype(np.float32).tolist()
        (['accumulator', 'output'], 'bfloat16', [[11.0, 1.0]])
    """
    if not isinstance(pass_, str):
        raise TypeError(f"pass_: expected one of {', '.join(PASSES)}, not {type(pass_).__name__}")
    if sr_seed is not None and (isinstance(sr_seed, bool) or not isinstance(sr_seed, (int, np.integer))
                                or not 0 <= int(sr_seed) < 2**63):
        raise ValueError(f"sr_seed: {sr_seed!r} is not a non-negative 63-bit integer")
    label, text = _load(contract)
    inputs = {k: _input(v, k) for k, v in (("x", x), ("w", w), ("dy", dy), ("bias", bias), ("residual", residual))}
    parts = {}
    if stored:
        formats = dict(_lowbit.contract_stored_parts(label, text))
        for key, value in stored.items():
            if key not in formats:
                raise ValueError(f"stored: {key!r} is not a stored part of this contract "
                                 f"({', '.join(formats) or 'it stores no operand quantized'})")
            fmt = formats[key] if isinstance(value, np.ndarray) and value.dtype.kind == "u" else None
            flat, fmt_name, shape = source(value, f"stored[{key!r}]", fmt)
            parts[key] = (flat, fmt_name, [int(d) for d in shape])
    if state is not None and not isinstance(state, Mapping):
        raise TypeError(f"state: expected a dict (lowbit state's JSON), not {type(state).__name__}")
    name, stages, next_state = _lowbit.contract_run(
        label, text, pass_, inputs["x"], inputs["w"], inputs["dy"], inputs["bias"], inputs["residual"], parts,
        None if state is None else json.dumps(state), None if sr_seed is None else int(sr_seed))
    out = Run(name, pass_, next_state=None if next_state is None else json.loads(next_state))
    for stage, part, description, fmt, shape, codes, tolerance in stages:
        width = _lowbit.format_info(fmt)["storage_bytes"]
        array = wrap_codes(codes.astype(UINT_OF_BYTES[width]), fmt, tuple(shape))
        array.flags.writeable = False
        out.stages.append(Stage(stage, part, description, fmt, array, tolerance))
    return out


@dataclass(frozen=True)
class Difference:
    """One element whose codes differ: its index, both codes and both decoded values."""

    index: Tuple[int, ...]
    expected: int
    actual: int
    expected_value: float
    actual_value: float
    ulps: Optional[int] = None  # with a tolerance: the distance (None: NaN against a number)


@dataclass
class StageComparison:
    """One stage against the kernel's array of it: `supplied` False when the results hold none; `error` when
    the arrays cannot be compared (format, shape); otherwise the elements compared and the first that differ."""

    key: str
    format: str
    supplied: bool = True
    compared: int = 0
    differing: int = 0
    first: List[Difference] = field(default_factory=list)
    error: str = ""
    tolerance_ulp: Optional[int] = None
    within: int = 0  # with a tolerance: elements that differ but lie within it


@dataclass
class Comparison:
    """A kernel's stages against a run: `ok` when the output was compared and nothing differs; `first_stage`
    is the key of the first stage (in the run's order) that differs or could not be compared."""

    stages: List[StageComparison]
    ok: bool
    first_stage: Optional[str]
    text: str


def _value_text(v: float) -> str:
    if np.isfinite(v) and v == int(v) and abs(v) < 2**53:
        return "-0" if v == 0 and np.signbit(v) else str(int(v))
    return repr(float(v))


def _compare(stage: Stage, actual: Any, max_details: int) -> StageComparison:
    c = StageComparison(stage.key, stage.format)
    try:
        got, _, shape = source(actual, f"results[{stage.key!r}]", stage.format)
    except (TypeError, ValueError) as e:
        c.error = str(e)
        return c
    if tuple(shape) != stage.array.shape:
        c.error = f"shape {tuple(shape)}, expected {stage.array.shape}"
        return c
    want = np.ascontiguousarray(stage.array).reshape(-1).view(got.dtype)
    c.compared = int(want.size)
    bad = np.flatnonzero(want != got)
    ulps = None
    if stage.tolerance_ulp is not None:
        # lowbit's ulp_distance (contract.hpp): sign-magnitude codes in order, ±0 no distance apart, NaN only
        # near NaN.
        c.tolerance_ulp = stage.tolerance_ulp
        bits = _lowbit.format_info(stage.format)["storage_bits"]
        top = np.uint64(bits - 1)

        def ordered(codes):
            v = codes.astype(np.uint64)
            m = (v & ((np.uint64(1) << top) - np.uint64(1))).astype(np.int64)
            return np.where((v >> top) & np.uint64(1), -m, m)

        nan_w, nan_g = np.isnan(decode(want[bad], stage.format)), np.isnan(decode(got[bad], stage.format))
        dist = np.abs(ordered(want[bad]) - ordered(got[bad]))
        dist = np.where(nan_w & nan_g, 0, np.where(nan_w | nan_g, -1, dist))
        inside = (dist >= 0) & (dist <= stage.tolerance_ulp)
        c.within = int(inside.sum())
        ulps = dist[~inside]
        bad = bad[~inside]
    c.differing = int(bad.size)
    for n, i in enumerate(bad[:max_details]):
        e, a = int(want[i]), int(got[i])
        ev, av = decode(np.array([e], got.dtype), stage.format)[0], decode(np.array([a], got.dtype), stage.format)[0]
        u = None if ulps is None or ulps[n] < 0 else int(ulps[n])
        c.first.append(Difference(tuple(int(j) for j in np.unravel_index(i, shape)), e, a, float(ev), float(av), u))
    return c


def check(expected: Run, results: Mapping[str, Any], *, max_details: int = 10) -> Comparison:
    """Compare a kernel's stages with `expected` (a Run) bit for bit, as ``lowbit contract check`` does.

    `results` maps stage keys ("output", "accumulator", "x.quantized.codes"; a trailing ".npy" is allowed) to
    arrays in the stage's format (its dtype, or unsigned codes of its width).  NaN is compared by its code.
    The comparison passes only when the output was supplied and nothing differs; its text names each stage,
    and for each differing element the stage, index, both codes and both decoded values.

    Example:
        >>> import lowbit, numpy as np
        >>> doc = {"lowbit_contract": 1, "name": "f32-exact", "storage": {"x": "f32", "w": "f32"},
        ...        "passes": {"fprop": {"x": {"quantize": None}, "w": {"quantize": None}, "procedure": "exact",
        ...                             "epilogue": [{"step": "cast", "format": "bf16"}]}}}
        >>> r = lowbit.contract.run(doc, x=np.array([[1.0, 2.0]], np.float32), w=np.array([[3.0, 4.0]], np.float32))
        >>> c = lowbit.contract.check(r, {"output": np.array([[0x4130]], np.uint16)})
        >>> c.ok, c.first_stage
        (True, None)
        >>> print(lowbit.contract.check(r, {"output": np.array([[0x4131]], np.uint16)}).text, end="")
        accumulator: not supplied
        output: 1 of 1 elements differ
          output[0, 0]: expected 0x4130 (11), actual 0x4131 (11.0625)
        FAILED: first differing stage output
    """
    if not isinstance(expected, Run):
        raise TypeError(f"expected: a lowbit.contract.Run, not {type(expected).__name__}")
    if not isinstance(results, Mapping):
        raise TypeError(f"results: expected a mapping of stage names to arrays, not {type(results).__name__}")
    given = {(k[:-4] if isinstance(k, str) and k.endswith(".npy") else k): v for k, v in results.items()}
    unknown = sorted(str(k) for k in given if k not in expected.keys())
    if unknown:
        raise ValueError(f"results: {unknown[0]!r} is not a stage of this run ({', '.join(expected.keys())})")
    stages, lines, first, output_compared = [], [], None, False
    digits = {}
    for s in expected.stages:
        if s.key not in given:
            stages.append(StageComparison(s.key, s.format, supplied=False))
            lines.append(f"{s.key}: not supplied")
            continue
        c = _compare(s, given[s.key], max_details)
        stages.append(c)
        if c.error:
            lines.append(f"{s.key}: error: {c.error}")
        elif c.differing == 0:
            tol = "" if c.tolerance_ulp is None else f" ({c.within} within {c.tolerance_ulp} ulp)"
            lines.append(f"{s.key}: {c.compared} elements {'equal' if c.tolerance_ulp is None else 'within tolerance'}"
                         f"{tol}")
            output_compared = output_compared or s.name == "output"
        else:
            output_compared = output_compared or s.name == "output"
            what = "differ" if c.tolerance_ulp is None else f"beyond {c.tolerance_ulp} ulp"
            lines.append(f"{s.key}: {c.differing} of {c.compared} elements {what}")
            width = digits.setdefault(s.format, (_lowbit.format_info(s.format)["storage_bits"] + 3) // 4)
            for d in c.first:
                dist = "" if c.tolerance_ulp is None else (f", {d.ulps} ulp" if d.ulps is not None
                                                           else ", NaN against a number")
                lines.append(f"  {s.key}[{', '.join(map(str, d.index))}]: expected 0x{d.expected:0{width}x} "
                             f"({_value_text(d.expected_value)}), actual 0x{d.actual:0{width}x} "
                             f"({_value_text(d.actual_value)}){dist}")
        if first is None and (c.error or c.differing):
            first = s.key
    if first is not None:
        lines.append(f"FAILED: first differing stage {first}")
    elif not output_compared:
        lines.append("FAILED: the kernel's output was not compared")
    else:
        lines.append(f"ok: {sum(c.compared for c in stages)} elements equal")
    return Comparison(stages, first is None and output_compared, first, "\n".join(lines) + "\n")


def assert_matches(expected: Run, results: Mapping[str, Any], *, max_details: int = 10) -> None:
    """``check``, raising AssertionError with its text (the first differing stage and element named) unless
    it passes; for pytest.

    Example:
        >>> import lowbit, numpy as np
        >>> doc = {"lowbit_contract": 1, "name": "f32-exact", "storage": {"x": "f32", "w": "f32"},
        ...        "passes": {"fprop": {"x": {"quantize": None}, "w": {"quantize": None}, "procedure": "exact",
        ...                             "epilogue": [{"step": "cast", "format": "bf16"}]}}}
        >>> r = lowbit.contract.run(doc, x=np.ones((1, 32), np.float32), w=np.ones((1, 32), np.float32))
        >>> bad = r["output"].copy(); bad[0, 0] = 0.0
        >>> lowbit.contract.assert_matches(r, {"output": bad})
        Traceback (most recent call last):
        ...
        AssertionError: accumulator: not supplied
        output: 1 of 1 elements differ
          output[0, 0]: expected 0x4200 (32), actual 0x0000 (0)
        FAILED: first differing stage output
    """
    c = check(expected, results, max_details=max_details)
    if not c.ok:
        raise AssertionError(c.text)
