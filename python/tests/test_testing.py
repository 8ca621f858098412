"""lowbit.testing.assert_bitexact: passes on equal codes, fails on one flipped bit with `lowbit check`'s
mismatch lines, and fails when nothing was compared."""
import numpy as np
import pytest

import lowbit
from lowbit.testing import assert_bitexact

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")


def test_equal_codes_pass():
    x = np.linspace(-500, 500, 1001, dtype=np.float32)
    assert_bitexact(lowbit.convert(x, "e4m3", profile="cuda"), lowbit.convert(x, "e4m3", overflow="satfinite"))
    nan = np.array([np.nan], np.float32)
    assert_bitexact(nan, nan)  # NaN codes compare as codes


def test_one_flipped_bit_fails_with_the_element_named():
    x = np.array([[0.5, 1.0], [3.0, 448.0]], np.float32)
    expected = lowbit.convert(x, "e4m3")
    actual = expected.view(np.uint8).copy()
    actual[1, 1] ^= 0x01  # 448 (0x7e) becomes NaN (0x7f)
    with pytest.raises(AssertionError) as e:
        assert_bitexact(actual.view(ml_dtypes.float8_e4m3fn), expected, inputs=x)
    assert str(e.value) == ("1 of 4 elements differ (e4m3); the first 1:\n"
                            "  [1, 1]: input 0x43e00000 (448) expected 0x7e (448), actual 0x7f (nan)")


def test_report_is_bounded_and_values_short():
    expected = lowbit.codes(np.zeros(30, np.uint32), "tf32")
    actual = lowbit.codes(np.full(30, 0x00002000, np.uint32), "tf32")
    with pytest.raises(AssertionError) as e:
        assert_bitexact(actual, expected, max_report=3)
    lines = str(e.value).splitlines()
    assert lines[0] == "30 of 30 elements differ (tf32); the first 3:" and len(lines) == 4
    # 2^-136 has a long decimal: shown as a power of two, as `lowbit check` shows it.
    assert lines[1] == "  [0]: expected 0x00000000 (0), actual 0x00002000 (2^-136)"


def test_integer_codes_take_fmt_and_formats_must_agree():
    a = np.array([1, 2, 3], np.uint8)
    assert_bitexact(a, a.copy(), fmt="e2m1")
    with pytest.raises(AssertionError, match="actual holds e5m2 codes, expected e4m3 codes"):
        assert_bitexact(np.zeros(2, ml_dtypes.float8_e5m2), np.zeros(2, ml_dtypes.float8_e4m3fn))
    with pytest.raises(AssertionError, match=r"actual has shape \(2,\), expected \(3,\)"):
        assert_bitexact(np.zeros(2, np.float32), np.zeros(3, np.float32))


def test_nothing_compared_is_a_failure():
    with pytest.raises(AssertionError, match="nothing was compared"):
        assert_bitexact(np.zeros(0, np.float32), np.zeros(0, np.float32))
