"""A Python subject behind the gate's entry points (python/src/vectors.cpp calls these with the plugin ABI's
arguments): arrays in, the subject's method called, its results checked and turned back into the bytes the
suite's files hold.  Every problem of a call is the unit's error with a message naming it, never an
exception through the gate: a subject that raises has failed that file or case, not the run.
"""
from __future__ import annotations

import inspect
import json
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import _lowbit
from ._arrays import source, wrap_codes
from ._dtypes import UINT_OF_BYTES

OK, UNSUPPORTED, ERROR = 0, 1, 2  # include/lowbit/plugin.h's statuses

_TENSOR_INPUTS = {"quantize": ("x",), "gemm": ("a", "b"), "contract": ()}  # positional; the rest by keyword


def _declined(result: Any) -> bool:
    return result is None or result is NotImplemented


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _array_of(raw: bytes, fmt: str, dtype: str, shape) -> np.ndarray:
    """A suite array's bytes as an array of its format's dtype (codes) or of its float dtype, read-only."""
    arr = np.frombuffer(raw, np.dtype(dtype)).reshape(tuple(int(s) for s in shape))
    if arr.dtype.kind == "u" and fmt and fmt != "uint32":
        arr = wrap_codes(arr.reshape(-1), fmt, arr.shape)
    arr.flags.writeable = False
    return arr


def _bytes_of(value: Any, name: str, fmt: str, dtype: str, shape) -> bytes:
    """The subject's result `name` as the bytes of its suite file; ValueError/TypeError saying what differs."""
    want = tuple(int(s) for s in shape)
    if fmt == "uint32":
        arr = np.asarray(value)
        if arr.dtype != np.uint32:
            raise TypeError(f"{name}: dtype {arr.dtype}, expected uint32")
        flat = np.ascontiguousarray(arr).reshape(-1)
        got = arr.shape
    elif fmt == "ue4m3":
        # NVFP4's block scales are positive E4M3 codes, the same bytes; frameworks hold them as float8_e4m3fn
        # (neither PyTorch nor ml_dtypes has a UE4M3 type), so an e4m3 array is taken as its codes.
        flat, known, got = source(value, name)
        if known not in ("ue4m3", "e4m3"):
            raise ValueError(f"{name}: holds {known} values, not ue4m3 (or e4m3-typed) codes")
    else:
        flat, _, got = source(value, name, fmt)
    size = int(np.prod(want, dtype=np.int64)) if want else 1
    if tuple(got) != want and not (flat.size == size == 1):
        raise ValueError(f"{name}: shape {tuple(got)}, expected {want}")
    want_dtype = np.dtype(dtype)
    if flat.dtype.itemsize != want_dtype.itemsize:
        raise TypeError(f"{name}: {flat.dtype.itemsize}-byte items, the suite's file holds {want_dtype.itemsize}")
    return flat.tobytes()  # the codes' bits, little-endian as the .npy files hold them


class Adapter:
    """The gate's view of a Python subject (any object with some of convert, quantize, gemm, contract)."""

    def __init__(self, subject: Any):
        self.subject = subject
        self.entries = [e for e in ("convert", "quantize", "gemm", "contract") if callable(getattr(subject, e, None))]
        self._keywords = {e: self._accepted(getattr(subject, e)) for e in self.entries}

    @staticmethod
    def _accepted(method) -> Optional[set]:
        """The keyword names `method` takes; None when it takes any (**kwargs) or cannot be inspected."""
        try:
            params = inspect.signature(method).parameters.values()
        except (TypeError, ValueError):
            return None
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return None
        return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

    def convert(self, src: str, dst: str, policy: Dict[str, str], raw: bytes, n: int) -> Tuple:
        try:
            width = len(raw) // n if n else 1
            batch = wrap_codes(np.frombuffer(raw, UINT_OF_BYTES[width]), src, (n,))
            batch.flags.writeable = False
            recipe = {"from": src, "to": dst, **policy}
            result = self.subject.convert(batch, recipe)
            if _declined(result):
                return UNSUPPORTED, None, None, ""
            flags = None
            if isinstance(result, tuple):
                if len(result) != 2:
                    raise TypeError(f"convert returned a tuple of {len(result)}; expected codes or (codes, flags)")
                result, flags = result
            width_out = _lowbit.format_info(dst)["storage_bytes"]
            codes = _bytes_of(result, "codes", dst, UINT_OF_BYTES[width_out].str, (n,))
            if flags is not None:
                f = np.asarray(flags)
                if f.shape != (n,) or f.dtype.kind not in "ui" or (f.size and (f.min() < 0 or f.max() > 31)):
                    raise ValueError(f"flags: expected {n} masks of plugin.h's five flag bits (uint8), "
                                     f"got shape {f.shape} dtype {f.dtype}")
                flags = f.astype(np.uint8).tobytes()
            return OK, codes, flags, ""
        except Exception as e:  # the file's error, with the subject's message
            return ERROR, None, None, _error(e)

    def tensor(self, kind: str, recipe_json: str, inputs: List, outputs: List) -> Tuple:
        try:
            recipe = json.loads(recipe_json)
            arrays = {d[0]: _array_of(raw, d[1], d[2], d[3]) for d, raw in inputs}
            positional = [arrays.pop(n) for n in _TENSOR_INPUTS[kind]]
            accepted = self._keywords[kind]
            if accepted is not None:
                missing = [k for k in arrays if k not in accepted]
                if missing:  # a subject without rbits=, history_in=, ... declines those cases
                    return UNSUPPORTED, None, ""
            result = getattr(self.subject, kind)(*positional, recipe, **arrays)
            if _declined(result):
                return UNSUPPORTED, None, ""
            if kind == "contract":
                return OK, self._stages(result, outputs), ""
            out: Dict[str, bytes] = {}
            for name, fmt, dtype, shape in outputs:
                if len(outputs) == 1 and not isinstance(result, dict) and not hasattr(result, name):
                    value = result  # a lone output (gemm's d) may come as the array itself
                elif isinstance(result, dict):
                    if name not in result:
                        raise KeyError(f"the result has no {name!r} (it has {', '.join(map(str, result))})")
                    value = result[name]
                elif hasattr(result, name):
                    value = getattr(result, name)
                else:
                    raise TypeError(f"the result ({type(result).__name__}) has no {name}")
                out[name] = _bytes_of(value, name, fmt, dtype, shape)
            return OK, out, ""
        except Exception as e:
            return ERROR, None, _error(e)

    @staticmethod
    def _stages(result: Any, outputs: List) -> Dict[str, bytes]:
        """A contract subject's stages (a dict, or a lowbit.contract.Run, keyed as the stage files without
        ".npy") as the bytes of the suite's files: "output" required, every other stage where it is given
        (the rest are not supplied, as plugin.h's count 0)."""
        if isinstance(result, dict):
            stages = dict(result)
        elif callable(getattr(result, "keys", None)):
            stages = {k: result[k] for k in result.keys()}
        else:
            raise TypeError(f"the result ({type(result).__name__}) is not a dict of stages or a lowbit.contract.Run")
        stages = {(k[:-4] if isinstance(k, str) and k.endswith(".npy") else k): v for k, v in stages.items()}
        known = {o[0] for o in outputs}
        unknown = sorted(str(k) for k in stages if k not in known)
        if unknown:
            raise KeyError(f"{unknown[0]!r} is not a stage of this case ({', '.join(o[0] for o in outputs)})")
        if "output" not in stages:
            raise KeyError(f"the result has no 'output' (it has {', '.join(map(str, stages)) or 'nothing'})")
        return {name: _bytes_of(stages[name], name, fmt, dtype, shape)
                for name, fmt, dtype, shape in outputs if name in stages}
