"""lowbit: bit-exact low-precision number formats and scaling schemes for numpy, ml_dtypes and DLPack arrays.

The element level: ``formats``, ``format``, ``profiles``, ``convert``, ``decode``, ``codes``; the scheme
level: ``quantize`` (a ``Quantized``), ``DelayedState``; GEMMs: ``models``, ``gemm``; a whole linear layer,
stage by stage: ``lowbit.contract``; training scale state: ``lowbit.state``; tests: ``lowbit.testing``.
Every function has the command line's option names and defaults (``lowbit convert --help``, ``lowbit
quantize --help``, ``lowbit gemm``) and gives the command line's bits.

Example:
    >>> import lowbit, numpy as np
    >>> codes = lowbit.convert(np.array([1.0, 500.0], np.float32), "e4m3", profile="cuda")
    >>> codes.dtype.name, codes.view(np.uint8).tolist(), codes.astype(np.float32).tolist()
    ('float8_e4m3fn', [56, 126], [1.0, 448.0])
"""
from . import _lowbit
from ._arrays import Codes
from ._convert import Converted, Flag, codes, convert, decode
from ._formats import Format, Model, Profile, TargetRule, format, formats, models, profiles
from ._gemm import gemm
from ._quantize import DelayedState, Quantized, quantize
from . import contract, state, testing, vectors

__version__ = _lowbit.__version__

__all__ = [
    "Codes", "Converted", "DelayedState", "Flag", "Format", "Model", "Profile", "Quantized", "TargetRule",
    "codes", "contract", "convert", "decode", "format", "formats", "gemm", "models", "profiles", "quantize", "state",
    "testing", "vectors",
]
