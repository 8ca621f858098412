"""Formats, profiles and models: the module's rows against the command line's JSON, and the dtype table
against ml_dtypes itself (every code decoded both ways)."""
from fractions import Fraction

import numpy as np
import pytest

import lowbit
from conftest import cli, cli_json

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")


def fraction_of(decimal):
    return None if decimal is None else Fraction(decimal)


def test_formats_match_the_command_line():
    rows = cli_json("formats", "--json")
    mine = lowbit.formats()
    assert [f.name for f in mine] == [r["name"] for r in rows]
    for f, r in zip(mine, rows):
        assert list(f.aliases) == r["aliases"]
        assert (f.bits, f.exponent_bits, f.mantissa_bits, f.bias) == (
            r["bits"], r["exponent_bits"], r["mantissa_bits"], r["bias"])
        assert f.max == fraction_of(r["max"]), f.name
        assert f.min_normal == fraction_of(r["min_normal"]), f.name
        assert f.min_subnormal == fraction_of(r["min_subnormal"]), f.name
        assert f.has_nan == (r["nan_codes"] is not None) and f.has_inf == (r["inf_codes"] is not None)


def test_constants_are_fractions_and_floats_where_exact():
    e4m3 = lowbit.format("e4m3")
    assert e4m3.max == Fraction(448) and e4m3.min_normal == Fraction(1, 64) and e4m3.min_subnormal == Fraction(1, 512)
    assert (e4m3.max_float, e4m3.min_subnormal_float) == (448.0, 2.0**-9)
    assert lowbit.format("e8m0").min_subnormal is None and lowbit.format("e8m0").min_normal == Fraction(1, 2**127)
    assert lowbit.format("int8").min_normal is None and lowbit.format("int8").max == Fraction(127, 64)
    f64 = lowbit.format("f64")
    assert f64.max == Fraction((2**53 - 1) * 2**971) and f64.max_float == np.finfo(np.float64).max
    # A parametric format beyond f64's range: exact Fraction, no float.
    wide = lowbit.format("e11m8b100")
    assert wide.max_float is None and wide.max == Fraction(511) * Fraction(2) ** (2046 - 100 - 8)


def test_names_aliases_and_dtypes_resolve():
    assert lowbit.format("Float8E4M3FN").name == "e4m3"
    assert lowbit.format("torch.float8_e5m2").name == "e5m2"
    assert lowbit.format("binary8p3se").name == "binary8p3se"
    assert lowbit.format(ml_dtypes.float4_e2m1fn).name == "e2m1"
    assert lowbit.format(np.float16).name == "f16"
    assert lowbit.format(lowbit.format("bf16")).name == "bf16"


# The table of the docs (README "Python"): lowbit format -> dtype of the same format.
DTYPES = {
    "f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
    "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "e5m2fnuz": ml_dtypes.float8_e5m2fnuz, "e4m3b11fnuz": ml_dtypes.float8_e4m3b11fnuz,
    "e4m3ieee": ml_dtypes.float8_e4m3, "e3m4": ml_dtypes.float8_e3m4, "e8m0": ml_dtypes.float8_e8m0fnu,
    "e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn, "e2m1": ml_dtypes.float4_e2m1fn,
}


def test_dtype_table():
    for f in lowbit.formats():
        want = DTYPES.get(f.name)
        assert f.dtype == (None if want is None else np.dtype(want)), f.name


@pytest.mark.parametrize("name", [n for n in DTYPES if lowbit.format(n).storage_bits <= 16])
def test_dtype_holds_the_same_format(name):
    """Every code of the format means the same value to ml_dtypes (or numpy) as to lowbit: the table's
    claim, checked against the peer (its values by astype(float64), NaN positions and zero signs too)."""
    f = lowbit.format(name)
    raw = np.arange(2**f.code_bits, dtype=np.uint16 if f.storage_bytes == 2 else np.uint8)
    peer = raw.view(DTYPES[name]).astype(np.float64)
    mine = lowbit.decode(raw, name)
    nan = np.isnan(peer)
    np.testing.assert_array_equal(np.isnan(mine), nan)
    np.testing.assert_array_equal(mine[~nan].view(np.uint64), peer[~nan].view(np.uint64))


def test_profiles_match_the_command_line():
    rows = cli_json("profiles", "--json")
    assert [p.as_dict() for p in lowbit.profiles()] == rows


def test_models_match_the_command_line():
    rows = cli_json("gemm", "--list-models", "--json")
    mine = lowbit.models()
    assert [m.as_dict() for m in mine] == rows
    names = cli("gemm", "--list-models").stdout.decode().splitlines()
    assert [m.name for m in mine] == [line.split("\t")[0] for line in names]
