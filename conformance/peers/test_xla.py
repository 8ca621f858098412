"""Differential test: the `xla` profile against XLA's CPU casts (jax, `jax.jit(lambda v: v.astype(t))`).

Every source jax has among lowbit's formats (f32, bf16, f16 and the 8- and 4-bit ml_dtypes types) into every
target XLA's CPU backend converts to, with peerlib's inputs.  XLA's CPU backend has no fp6 conversion
(test_no_fp6 pins the error), so float6_e2m3fn and float6_e3m2fn are neither sources nor targets here.
"""
import numpy as np
import pytest

import peerlib

jax = peerlib.require("jax")
jnp = peerlib.require("jax.numpy")
ml_dtypes = peerlib.require("ml_dtypes")
jax.config.update("jax_platforms", "cpu")

TARGETS = ["e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e4m3b11fnuz", "e4m3ieee", "e3m4", "e8m0", "e2m1", "bf16", "f16"]
SOURCES = ["f32"] + TARGETS


def xla_cast(source, target, codes):
    fn = jax.jit(lambda v: v.astype(peerlib.numpy_dtype(target)))
    y = np.asarray(fn(jnp.asarray(np.ascontiguousarray(codes).view(peerlib.numpy_dtype(source)))))
    return y.view(peerlib.code_dtype(target))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", SOURCES)
def test_cast(source, target):
    inputs = peerlib.cast_inputs(source, target)
    c = peerlib.compare(f"jax {jax.__version__} (XLA CPU) vs --profile xla", source, target, "xla", inputs,
                        xla_cast(source, target, inputs), "xla")
    peerlib.assert_same(c)


def test_no_fp6():
    x = np.zeros(4, dtype=np.float32)
    with pytest.raises(Exception, match="F6E2M3FN|PrimitiveType|not supported|Unsupported"):
        np.asarray(jax.jit(lambda v: v.astype(ml_dtypes.float6_e2m3fn))(jnp.asarray(x)))


def test_peer_facts():
    """The two NaN families where XLA differs from ml_dtypes (issue 18), read from XLA itself."""
    f = np.array([0x7F800001, 0xFF810000], dtype=np.uint32)
    assert [int(c) for c in xla_cast("f32", "f16", f)] == [0x7E00, 0xFE08]  # quiet, top payload bits kept
    assert [int(c) for c in xla_cast("f32", "e2m1", f)] == [0x8, 0x8]  # the -0 code whatever the sign
    h = np.array([0x7C01, 0xFE00], dtype=np.uint16)
    assert [int(c) for c in xla_cast("f16", "e5m2", h)] == [0x7F, 0x7F]  # EmitF16ToF8e5m2's constant
