"""Inputs as the extension takes them: contiguous unsigned-integer codes of a named format.

numpy arrays of any layout, numpy's and ml_dtypes' float dtypes, lowbit.Codes, and any object with
``__dlpack__``: host memory is read without a copy; a tensor on another device is copied to the host first.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _lowbit
from ._dtypes import DLPACK_FORMATS, UINT_OF_BYTES, dtype_of, format_of

_KDL_CPU, _KDL_CUDA_HOST = 1, 3


class Codes(np.ndarray):
    """Unsigned-integer codes of a format that has no numpy or ml_dtypes dtype (tf32, ue4m3, int8, P3109 and
    parametric formats), with the format's name in ``.format``.

    Example:
        >>> import lowbit, numpy as np
        >>> c = lowbit.convert(np.array([1.0, -2.0], np.float32), "int8")
        >>> c.format, c.view(np.ndarray)
        ('int8', array([ 64, 128], dtype=uint8))
    """

    format: Optional[str]

    def __new__(cls, array, fmt: str):
        obj = np.asarray(array).view(cls)
        obj.format = fmt
        return obj

    def __array_finalize__(self, obj):
        self.format = getattr(obj, "format", None)

    def __repr__(self) -> str:
        return f"Codes({np.asarray(self).view(np.ndarray)!r}, format={self.format!r})"

    def __reduce__(self):
        return (Codes, (np.asarray(self).view(np.ndarray), self.format))


def wrap_codes(raw: np.ndarray, fmt: str, shape) -> np.ndarray:
    """Codes of `fmt` (unsigned integers) in the dtype of the same format, or as Codes."""
    raw = raw.reshape(shape)
    dt = dtype_of(fmt)
    return raw.view(dt) if dt is not None else Codes(raw, fmt)


def _from_dlpack(x: Any, argument: str) -> tuple[np.ndarray, Optional[str]]:
    """A DLPack producer's tensor as a numpy array (float dtypes numpy knows) or as unsigned codes with
    their format (bf16, fp8, fp6 and the other types numpy does not know)."""
    device = None
    if hasattr(x, "__dlpack_device__"):
        device = tuple(int(v) for v in x.__dlpack_device__())
    if device is not None and device[0] not in (_KDL_CPU, _KDL_CUDA_HOST):
        try:  # DLPack 1.0: ask the producer for a host copy
            return np.from_dlpack(x, device="cpu", copy=True), None
        except Exception as e:
            raise TypeError(f"{argument}: the tensor is on DLPack device {device} and its producer could not copy "
                            f"it to host memory ({e}); copy it to the host first (for example x.cpu())") from None
    try:
        return np.from_dlpack(x), None
    except (BufferError, TypeError, RuntimeError, ValueError):
        pass
    view, code, bits = _lowbit.dlpack_codes(x)
    fmt = DLPACK_FORMATS.get((code, bits))
    if fmt is None:
        raise TypeError(f"{argument}: DLPack type code {code} with {bits} bits holds no lowbit format")
    return view, fmt


def source(x: Any, argument: str, fmt: Optional[str] = None) -> tuple[np.ndarray, str, tuple]:
    """(contiguous 1-D unsigned codes, format, shape) of an input.  `fmt`, when given, names the format of
    integer codes (and must agree with a dtype that already says it)."""
    known = None
    if isinstance(x, Codes):
        known = x.format
        arr = np.asarray(x).view(np.ndarray)
    elif isinstance(x, np.ndarray):
        arr = x
    elif hasattr(x, "__dlpack__") and not isinstance(x, (list, tuple)):
        arr, known = _from_dlpack(x, argument)
    elif isinstance(x, (list, tuple, float, int, np.generic)):
        arr = np.asarray(x)
    else:
        raise TypeError(f"{argument}: expected a numpy array or an object with __dlpack__, not {type(x).__name__}")
    if known is None:
        known = format_of(arr.dtype)
    if known is not None and fmt is not None and known != fmt:
        raise ValueError(f"{argument}: holds {known} values (dtype {arr.dtype}), not {fmt}")
    name = known or fmt
    if name is None:
        if arr.dtype.kind in "ui":
            raise TypeError(f"{argument}: dtype {arr.dtype} holds integer codes of no named format; say which with "
                            f"lowbit.codes(array, 'e2m1') or the fmt argument")
        raise TypeError(f"{argument}: dtype {arr.dtype} holds no lowbit format (numpy's float16/32/64 and the "
                        f"ml_dtypes float types do)")
    width = _lowbit.format_info(name)["storage_bytes"]
    if arr.dtype.itemsize != width:
        raise TypeError(f"{argument}: dtype {arr.dtype} has {arr.dtype.itemsize}-byte items; {name} codes take {width}")
    if arr.dtype.kind not in "uif" and format_of(arr.dtype) is None:
        raise TypeError(f"{argument}: dtype {arr.dtype} cannot hold codes")
    if arr.dtype.kind == "i":
        raise TypeError(f"{argument}: dtype {arr.dtype} is signed; codes are unsigned integers")
    shape = arr.shape
    flat = np.ascontiguousarray(arr).reshape(-1).view(UINT_OF_BYTES[width])
    bad = _lowbit.first_invalid(flat, name)
    if bad >= 0:
        index = np.unravel_index(bad, shape) if shape else ()
        raise ValueError(f"{argument}[{', '.join(str(int(i)) for i in index)}]: {int(flat[bad]):#x} is not a {name} code")
    return flat, name, shape
