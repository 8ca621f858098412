"""Differential test: the `torch` profiles against PyTorch's own casts (`x.to(dtype)` on the CPU).

Every source torch casts from (f32, bf16, f16 and its 8-bit formats) into every dtype it casts to
(float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu, bfloat16, float16), on a
contiguous tensor and on a strided view, with peerlib's inputs.  Which profile reproduces which run:

  torch 2.15, AVX2 / AVX-512 dispatch   contiguous: torch           strided: torch-strided
  torch 2.15, ATEN_CPU_CAPABILITY=default  contiguous: torch-default  strided: torch-default, except
                                         that an f32 NaN into float16 is sign | 0x7E00 there (the scalar
                                         fp16_ieee_from_fp32_value); test_default_strided_f16_nan pins it
  torch 2.12                             contiguous: torch-2.12      strided: not compared (no profile)

float4_e2m1fn_x2 is not compared: torch has no cast into or out of it (its `.to()` raises), which
test_float4_has_no_cast pins.
"""
import numpy as np
import pytest

import peerlib

torch = peerlib.require("torch")

DTYPES = {
    "f32": torch.float32,
    "bf16": torch.bfloat16,
    "f16": torch.float16,
    "e4m3": torch.float8_e4m3fn,
    "e5m2": torch.float8_e5m2,
    "e4m3fnuz": torch.float8_e4m3fnuz,
    "e5m2fnuz": torch.float8_e5m2fnuz,
    "e8m0": torch.float8_e8m0fnu,
}
SOURCES = list(DTYPES)
TARGETS = [t for t in DTYPES if t != "f32"]
INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32}
NP_INT = {1: np.uint8, 2: np.int16, 4: np.int32}


def version():
    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


def capability():
    return torch.backends.cpu.get_cpu_capability()


def profile_for(layout):
    """The profile that reproduces this torch, dispatch and layout, or None."""
    v = version()
    if v == "2.15":
        if capability() == "DEFAULT":
            return "torch-default"
        return "torch-strided" if layout == "strided" else "torch"
    if v == "2.12" and layout == "contiguous" and capability() != "DEFAULT":
        return "torch-2.12"
    return None


def torch_cast(source, target, codes, layout):
    w = peerlib.width(source)
    t = torch.from_numpy(np.ascontiguousarray(codes).view(NP_INT[w]).copy()).view(DTYPES[source])
    if layout == "strided":
        t = torch.stack([t, t], dim=1).reshape(-1)[::2]
        assert not t.is_contiguous()
    y = t.to(DTYPES[target]).contiguous()
    wt = peerlib.width(target)
    return y.view(INT[wt]).numpy().view(peerlib.code_dtype(target))


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", SOURCES)
def test_cast(source, target, layout):
    profile = profile_for(layout)
    if profile is None:
        pytest.skip(f"no profile reproduces torch {torch.__version__} ({capability()}) on {layout} tensors")
    inputs = peerlib.cast_inputs(source, target)
    if capability() == "DEFAULT" and layout == "strided" and (source, target) == ("f32", "f16"):
        inputs = inputs[~peerlib.is_nan(source, inputs)]  # test_default_strided_f16_nan
    c = peerlib.compare(f"torch {torch.__version__} {capability()} {layout} vs --profile {profile}", source,
                        target, profile, inputs, torch_cast(source, target, inputs, layout), "torch")
    peerlib.assert_same(c)


def test_float4_has_no_cast():
    x = torch.zeros(4, dtype=torch.float32)
    with pytest.raises((RuntimeError, TypeError)):
        x.to(torch.float4_e2m1fn_x2)


def test_peer_facts():
    """The rules the profiles cite, read from torch itself (guards the comparison above)."""
    x = torch.tensor([480.0, 1e6, float("inf"), -float("inf"), 61440.0, 65536.0])
    e4 = x.to(torch.float8_e4m3fn).view(torch.uint8).tolist()
    e5 = x.to(torch.float8_e5m2).view(torch.uint8).tolist()
    if version() == "2.15":
        assert e4 == [0x7E, 0x7E, 0x7E, 0xFE, 0x7E, 0x7E]  # saturates (Float8_e4m3fn.h:206-213)
    if version() == "2.12":
        assert e4 == [0x7F, 0x7F, 0x7F, 0xFF, 0x7F, 0x7F]  # NaN for every |x| >= 480
    assert e5 == [0x60, 0x7C, 0x7C, 0xFC, 0x7C, 0x7C]  # 480 ties to 512; 61440 -> Inf: no saturation
    e8 = torch.tensor([0.0, -0.0, -4.0, 1.5, 3.0, 6.0]).to(torch.float8_e8m0fnu).view(torch.uint8).tolist()
    assert e8 == [0x00, 0x00, 0x81, 0x80, 0x81, 0x82]  # |x|, ties up, zero -> 2^-127


def test_default_strided_f16_nan():
    """Under ATEN_CPU_CAPABILITY=default a strided f32 NaN into float16 takes the scalar
    fp16_ieee_from_fp32_value (torch/headeronly/util/Half.h:295-297): sign | 0x7E00, payload dropped, where
    every profile of torch keeps the payload (no profile reproduces this one layout)."""
    if capability() != "DEFAULT" or version() != "2.15":
        pytest.skip(f"only under ATEN_CPU_CAPABILITY=default (this run: {capability()}, torch {torch.__version__})")
    nans = peerlib.f32_nans()
    got = torch_cast("f32", "f16", nans, "strided")
    want = np.where(nans >> 31 == 1, 0xFE00, 0x7E00).astype(np.uint16)
    assert np.array_equal(got, want)
