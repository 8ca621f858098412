"""Bad arguments raise ValueError or TypeError naming the argument and the value; nothing crashes the
interpreter (the extension is called with wrong types too)."""
import numpy as np
import pytest

import lowbit
from lowbit import _lowbit

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")

X = np.array([1.0, 2.0, np.nan], np.float32)


def test_unknown_format_lists_the_closest_names():
    with pytest.raises(ValueError, match=r"^to: 'e4m3f' is not a format; closest: .*e4m3fn") as e:
        lowbit.convert(X, "e4m3f")
    assert "lowbit.formats()" in str(e.value)
    with pytest.raises(ValueError, match=r"^name: 'bfloat61' is not a format; closest: bfloat16"):
        lowbit.format("bfloat61")
    with pytest.raises(ValueError, match=r"^element: 'nvfp5' is not a format"):
        lowbit.quantize(X, "nvfp4", element="nvfp5")
    with pytest.raises(ValueError, match=r"^fmt: 'zz' is not a format"):
        lowbit.decode(np.zeros(2, np.uint8), "zz")


def test_wrong_types_and_dtypes():
    with pytest.raises(TypeError, match=r"^to: expected a format name"):
        lowbit.convert(X, 3)
    with pytest.raises(TypeError, match=r"^x: dtype int64 holds integer codes of no named format"):
        lowbit.convert(np.arange(4), "e4m3")
    with pytest.raises(TypeError, match=r"^x: dtype complex128 holds no lowbit format"):
        lowbit.convert(np.zeros(2, complex), "e4m3")
    with pytest.raises(TypeError, match=r"^x: expected a numpy array or an object with __dlpack__, not dict"):
        lowbit.convert({}, "e4m3")
    with pytest.raises(TypeError, match=r"^codes: dtype uint16 has 2-byte items; e4m3 codes take 1"):
        lowbit.decode(np.zeros(2, np.uint16), "e4m3")
    with pytest.raises(ValueError, match=r"^codes: holds e4m3 values \(dtype float8_e4m3fn\), not e5m2"):
        lowbit.decode(np.zeros(2, ml_dtypes.float8_e4m3fn), "e5m2")
    with pytest.raises(TypeError, match=r"^x: quantize takes f64, f32, bf16 or f16 values, not e4m3"):
        lowbit.quantize(np.zeros(4, ml_dtypes.float8_e4m3fn), "tensor")
    with pytest.raises(TypeError, match=r"^rounding: expected a string or None, not int"):
        lowbit.convert(X, "e4m3", rounding=1)
    with pytest.raises(TypeError, match=r"^with_flags: expected True or False"):
        lowbit.convert(X, "e4m3", with_flags="yes")
    with pytest.raises(ValueError, match=r"^threads: 0 is not a positive integer"):
        lowbit.convert(X, "e4m3", threads=0)
    with pytest.raises(TypeError, match=r"^state: expected a lowbit.DelayedState"):
        lowbit.quantize(X, "delayed", state={"history": []})


def test_bad_option_values_name_the_option_and_value():
    with pytest.raises(ValueError, match=r"^rounding: 'nearest' is not one of rne, rna, rtz, rup, rdn, rto, sr-a"):
        lowbit.convert(X, "e4m3", rounding="nearest")
    with pytest.raises(ValueError, match=r"^overflow: 'clamp' is not one of satfinite, satpropagate, nosat"):
        lowbit.convert(X, "e4m3", overflow="clamp")
    with pytest.raises(ValueError, match=r"^profile: 'nvidia' is not a profile \(ocp, cuda"):
        lowbit.convert(X, "e4m3", profile="nvidia")
    with pytest.raises(ValueError, match=r"^rounding: profile cuda has no default rounding into e8m0; name one of rtz, rup"):
        lowbit.convert(X, "e8m0", profile="cuda")
    with pytest.raises(ValueError, match=r"^to: profile cuda has no conversion into e4m3fnuz"):
        lowbit.convert(X, "e4m3fnuz", profile="cuda")
    with pytest.raises(ValueError, match=r"^scheme: unknown scheme 'block64' \(tensor, delayed"):
        lowbit.quantize(X, "block64")
    with pytest.raises(ValueError, match=r"^scale_rule: unknown 'round' \(floor, ceil, even, rceil, rne\)"):
        lowbit.quantize(X, "mx", scale_rule="round")
    with pytest.raises(ValueError, match=r"^variant: does not apply to the nvfp4-1level scheme \(given fast-math; it applies to tensor, channel, token, block, mx, nvfp4 and nvfp4-2d\)"):
        lowbit.quantize(X, "nvfp4-1level", variant="fast-math")
    with pytest.raises(ValueError, match=r"^block: NVFP4 blocks are 16 columns, not 32"):
        lowbit.quantize(X, "nvfp4", block=32)
    with pytest.raises(ValueError, match=r"^element: MX elements are e4m3, e5m2, e2m3, e3m2, e2m1, int8 or int8sm, not bf16"):
        lowbit.quantize(X, "mx", element="bf16")
    with pytest.raises(ValueError, match=r"^layout: 'swizzled' is not one of row-major, cublaslt"):
        lowbit.quantize(X, "mx").scale_layout("swizzled")
    with pytest.raises(ValueError, match=r"^layout: the cublaslt layout holds 8-bit scales of 1-D blocks"):
        lowbit.quantize(X, "tensor").scale_layout("cublaslt")
    with pytest.raises(ValueError, match=r"^axis: 2 is not -1, 0 or 1"):
        lowbit.quantize(X, "mx", axis=2)
    with pytest.raises(ValueError, match=r"^state: applies to the delayed scheme"):
        lowbit.quantize(X, "tensor", state=lowbit.DelayedState())


def test_stochastic_arguments():
    with pytest.raises(ValueError, match=r"^sr_bits: rounding sr-a needs the number of random bits N \(1..32\)"):
        lowbit.convert(X, "e2m1", rounding="sr-a")
    with pytest.raises(ValueError, match=r"^sr_bits: 33 is outside 1..32"):
        lowbit.convert(X, "e2m1", rounding="sr-a", sr_bits=33)
    with pytest.raises(ValueError, match=r"^sr_bits: rounding rne is not stochastic"):
        lowbit.convert(X, "e2m1", sr_bits=8)
    with pytest.raises(ValueError, match=r"^random_bits: rounding sr-b needs one random value per element"):
        lowbit.convert(X, "e2m1", rounding="sr-b", sr_bits=8)
    with pytest.raises(ValueError, match=r"^random_bits: shape \(2,\) is not the input's shape \(3,\)"):
        lowbit.convert(X, "e2m1", rounding="sr-b", sr_bits=8, random_bits=np.zeros(2, np.uint32))
    with pytest.raises(ValueError, match=r"^random_bits\[1\]: 256 is not below 2\^8"):
        lowbit.convert(X, "e2m1", rounding="sr-b", sr_bits=8, random_bits=np.array([0, 256, 0]))
    with pytest.raises(ValueError, match=r"^random_bits: rounding rne is not stochastic"):
        lowbit.convert(X, "e2m1", random_bits=np.zeros(3, np.uint32))
    with pytest.raises(ValueError, match=r"^sr_seed / random_bits: a stochastic rounding needs exactly one of them"):
        lowbit.quantize(X, "mx", element="e2m1", rounding="sr-a", sr_bits=8)
    with pytest.raises(ValueError, match=r"^sr_bits: only with a stochastic rounding"):
        lowbit.quantize(X, "mx", sr_seed=3)


def test_invalid_codes_and_undefined_results_name_the_element():
    with pytest.raises(ValueError, match=r"^codes\[1, 0\]: 0x10 is not a e2m1 code"):
        lowbit.decode(np.array([[1, 2], [16, 3]], np.uint8), "e2m1")
    with pytest.raises(ValueError, match=r"^array\[0\]: 0x1000 is not a tf32 code"):
        lowbit.codes(np.array([0x1000], np.uint32), "tf32")
    with pytest.raises(ValueError, match=r"^x\[2\]: profile llvm has no defined result for nan into e2m1"):
        lowbit.convert(X, "e2m1", profile="llvm")
    with pytest.raises(ValueError, match=r"^fmt: the values of e11m8b100 are not all f64 values"):
        lowbit.decode(np.zeros(2, np.uint32), "e11m8b100")
    with pytest.raises(ValueError, match=r"^x: shape \(0,\) has nothing to quantize"):
        lowbit.quantize(np.zeros(0, np.float32), "tensor")


def test_device_tensors_that_cannot_reach_the_host():
    class OnDevice:
        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA

        def __dlpack__(self, **kwargs):
            raise BufferError("no host copy here")

    with pytest.raises(TypeError, match=r"^x: the tensor is on DLPack device \(2, 0\) and its producer could not copy"):
        lowbit.convert(OnDevice(), "e4m3")


@pytest.mark.parametrize("call", [
    lambda: _lowbit.convert_into(np.zeros(4, np.uint32), "f32", _lowbit.resolve("e4m3", None, None, None, None, None, None),
                                 np.zeros(3, np.uint8), None, None, None, None),
    lambda: _lowbit.convert_into(np.zeros(4, np.uint32), "f32", _lowbit.resolve("e4m3", None, None, None, None, None, None),
                                 np.zeros(4, np.uint16), None, None, None, None),
    lambda: _lowbit.convert_into(np.zeros(4, np.uint32), "e4m3", "not a policy", np.zeros(4, np.uint8), None, None, None, None),
    lambda: _lowbit.convert_into(np.zeros(4, np.uint32), "f32", _lowbit.resolve("e2m1", None, "sr-a", None, None, None, 8),
                                 np.zeros(4, np.uint8), None, None, None, None),
    lambda: _lowbit.decode_into(np.zeros(4, np.uint8), "e4m3", np.zeros(4, np.float32), None),
    lambda: _lowbit.quantize(np.zeros((2, 2), np.float64), None, None, None),
    lambda: _lowbit.format_info("nope"),
    lambda: _lowbit.code_text("e2m1", 99),
    lambda: _lowbit.dlpack_codes(object()),
], ids=["short-out", "wide-out", "bad-policy", "missing-random-bits", "f32-out", "f64-quantize", "unknown-format",
        "invalid-code", "not-dlpack"])
def test_the_extension_refuses_bad_calls_with_an_exception(call):
    with pytest.raises((TypeError, ValueError)):
        call()
