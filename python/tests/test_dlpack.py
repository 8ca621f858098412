"""Inputs through DLPack: host tensors are read without a copy (bf16 and fp8 too, which numpy's own
from_dlpack refuses); PyTorch tensors when torch is installed."""
import numpy as np
import pytest

import lowbit

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")


class Producer:
    """A DLPack producer that is not a numpy array (numpy's exporter behind it)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_a_dlpack_producer_gives_the_array_bits():
    x = np.random.default_rng(2).standard_normal((16, 24)).astype(np.float32)[:, ::2]  # strided
    got = lowbit.convert(Producer(x), "e4m3")
    np.testing.assert_array_equal(got.view(np.uint8), lowbit.convert(x, "e4m3").view(np.uint8))


def test_read_only_arrays_are_inputs():
    x = np.linspace(-10, 10, 101, dtype=np.float32)
    want = lowbit.convert(x, "e2m1").view(np.uint8)
    x.setflags(write=False)
    np.testing.assert_array_equal(lowbit.convert(x, "e2m1").view(np.uint8), want)
    np.testing.assert_array_equal(lowbit.decode(lowbit.convert(x, "e2m1")), lowbit.decode(want, "e2m1"))


def test_the_extensions_importer_reads_what_numpy_refuses(monkeypatch):
    """numpy.from_dlpack refuses bf16 and fp8 tensors (PyTorch's, JAX's); the package then reads them with the
    extension's importer, as a read-only view typed by the DLPack type code.  Here numpy's importer is made to
    refuse everything, so an f32 producer and a bf16-bits producer take that path."""
    x = np.random.default_rng(4).standard_normal(257).astype(np.float32)
    want = lowbit.convert(x, "e2m1").view(np.uint8)

    def refuse(*args, **kwargs):
        raise BufferError("unsupported dtype")

    monkeypatch.setattr(np, "from_dlpack", refuse)
    np.testing.assert_array_equal(lowbit.convert(Producer(x), "e2m1").view(np.uint8), want)
    np.testing.assert_array_equal(lowbit.convert(Producer(x[::2]), "e2m1").view(np.uint8), want[::2])
    # A uint16 DLPack tensor holds integer codes of no format: refused by name, not misread.
    with pytest.raises(TypeError, match=r"^x: DLPack type code 1 with 16 bits holds no lowbit format"):
        lowbit.convert(Producer(x.astype(ml_dtypes.bfloat16).view(np.uint16)), "e2m1")


def test_host_memory_is_read_in_place():
    from lowbit import _lowbit

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    view, code, bits = _lowbit.dlpack_codes(Producer(x))
    assert (code, bits) == (2, 32) and view.shape == (3, 4) and np.shares_memory(view, x)


try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (the package's CI does not install it)")


@needs_torch
@pytest.mark.parametrize("dtype,fmt", [("float32", "f32"), ("bfloat16", "bf16"), ("float16", "f16"),
                                       ("float8_e4m3fn", "e4m3"), ("float8_e5m2", "e5m2")])
def test_torch_tensors(dtype, fmt):
    t = torch.linspace(-300, 300, 999).to(getattr(torch, dtype))
    bits = t.view(torch.uint8 if t.element_size() == 1 else torch.int16 if t.element_size() == 2 else torch.int32)
    raw = bits.numpy().view(np.uint8 if t.element_size() == 1 else np.uint16 if t.element_size() == 2 else np.uint32)
    want = lowbit.convert(lowbit.codes(raw, fmt), "e2m1")
    np.testing.assert_array_equal(lowbit.convert(t, "e2m1").view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(lowbit.convert(t[::3], "e2m1").view(np.uint8), want.view(np.uint8)[::3])


@needs_torch
def test_torch_float8_casts_are_the_default_policy():
    """torch's float8 casts round to nearest even without saturation (c10/util/Float8_e4m3fn.h)."""
    x = torch.randn(4096) * 100
    for dtype, fmt in ((torch.float8_e4m3fn, "e4m3"), (torch.float8_e5m2, "e5m2")):
        ref = x.to(dtype).view(torch.uint8).numpy()
        np.testing.assert_array_equal(lowbit.convert(x, fmt).view(np.uint8), ref)
