"""The `lowbit` command-line contract (issue 2 §6): subcommands, output formats, exit codes, errors.

Expected values come from docs/semantics.md (§1 format table, §2 rounding table, §3 profile tables, §6 peer
test cases) or are worked out by hand from those rules in the comments; none is produced by lowbit.
"""
import json
import os
import re
import struct
import subprocess
from fractions import Fraction

import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")


def run(args, stdin=b"", text=True):
    data = stdin.encode() if text and isinstance(stdin, str) else stdin
    p = subprocess.run([LOWBIT, *args], input=data, capture_output=True, check=False)
    if text:
        return p.returncode, p.stdout.decode(), p.stderr.decode()
    return p.returncode, p.stdout, p.stderr.decode()


def ok(args, stdin=""):
    rc, out, err = run(args, stdin)
    assert rc == 0, f"lowbit {' '.join(args)} exited {rc}: {err}"
    return out


def convert(args, lines):
    return ok(["convert", *args], "".join(l + "\n" for l in lines)).splitlines()


def fails(args, stdin="", names=()):
    """Exit code 2, a message on stderr naming each of `names`; returns stdout."""
    rc, out, err = run(args, stdin)
    assert rc == 2, f"expected exit 2, got {rc}; stderr: {err}"
    assert err.strip(), "an error must say why on stderr"
    for n in names:
        assert n.lower() in err.lower(), f"stderr does not name {n!r}: {err}"
    return out


def dec(q):
    """Exact decimal text of a dyadic rational, as the contract prints values."""
    q = Fraction(q)
    neg = q < 0
    q = abs(q)
    k = 0
    while (q * 10**k).denominator != 1:
        k += 1
    digits = str((q * 10**k).numerator).rjust(k + 1, "0")
    s = digits if k == 0 else digits[:-k] + "." + digits[-k:]
    return ("-" if neg else "") + s


P = Fraction(2)

# ---- --version, --help ----------------------------------------------------------------------------


def test_version():
    out = ok(["--version"])
    assert re.fullmatch(r"lowbit \d+\.\d+\.\d+\n", out)


@pytest.mark.parametrize("sub", ["formats", "profiles", "decode", "table", "convert", "conform"])
def test_help_on_each_subcommand(sub):
    out = ok([sub, "--help"])
    assert sub in out


def test_no_subcommand_is_a_usage_error():
    fails([])
    fails(["frobnicate"], names=["frobnicate"])


# ---- formats --------------------------------------------------------------------------------------

# docs/semantics.md §1: (bits, E, M, bias, max, min normal, min subnormal, NaN codes, Inf codes).
FORMAT_TABLE = {
    "f64": (64, 11, 52, 1023, (2 - P**-52) * P**1023, P**-1022, P**-1074,
            ["0x7ff0000000000001-0x7fffffffffffffff", "0xfff0000000000001-0xffffffffffffffff"],
            ["0x7ff0000000000000", "0xfff0000000000000"]),
    "f32": (32, 8, 23, 127, (2 - P**-23) * P**127, P**-126, P**-149,
            ["0x7f800001-0x7fffffff", "0xff800001-0xffffffff"], ["0x7f800000", "0xff800000"]),
    "bf16": (16, 8, 7, 127, (2 - P**-7) * P**127, P**-126, P**-133, ["0x7f81-0x7fff", "0xff81-0xffff"],
             ["0x7f80", "0xff80"]),
    "f16": (16, 5, 10, 15, 65504, P**-14, P**-24, ["0x7c01-0x7fff", "0xfc01-0xffff"], ["0x7c00", "0xfc00"]),
    "e4m3": (8, 4, 3, 7, 448, P**-6, P**-9, ["0x7f", "0xff"], None),
    "e5m2": (8, 5, 2, 15, 57344, P**-14, P**-16, ["0x7d-0x7f", "0xfd-0xff"], ["0x7c", "0xfc"]),
    "e4m3fnuz": (8, 4, 3, 8, 240, P**-7, P**-10, ["0x80"], None),
    "e5m2fnuz": (8, 5, 2, 16, 57344, P**-15, P**-17, ["0x80"], None),
    "e4m3b11fnuz": (8, 4, 3, 11, 30, P**-10, P**-13, ["0x80"], None),
    "e4m3ieee": (8, 4, 3, 7, 240, P**-6, P**-9, ["0x79-0x7f", "0xf9-0xff"], ["0x78", "0xf8"]),
    "e3m4": (8, 3, 4, 3, Fraction(31, 2), P**-2, P**-6, ["0x71-0x7f", "0xf1-0xff"], ["0x70", "0xf0"]),
    "e2m3": (6, 2, 3, 1, Fraction(15, 2), 1, Fraction(1, 8), None, None),
    "e3m2": (6, 3, 2, 3, 28, Fraction(1, 4), Fraction(1, 16), None, None),
    "e2m1": (4, 2, 1, 1, 6, 1, Fraction(1, 2), None, None),
    "e8m0": (8, 8, 0, 127, P**127, P**-127, None, ["0xff"], None),
    "ue4m3": (8, 4, 3, 7, 448, P**-6, P**-9, ["0x7f"], None),
}


@pytest.fixture(scope="module")
def formats_json():
    return json.loads(ok(["formats", "--json"]))


def test_formats_json_is_an_array_of_every_format(formats_json):
    assert isinstance(formats_json, list)
    names = {f["name"] for f in formats_json}
    for n in ["f64", "f32", "tf32", "bf16", "f16", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e4m3b11fnuz",
              "e4m3ieee", "e3m4", "e2m3", "e3m2", "e2m1", "e8m0", "ue4m3", "int8"]:
        assert n in names
    keys = {"name", "aliases", "bits", "exponent_bits", "mantissa_bits", "bias", "max", "min_normal",
            "min_subnormal", "nan_codes", "inf_codes"}
    for f in formats_json:
        assert keys <= set(f), f["name"]


@pytest.mark.parametrize("name", list(FORMAT_TABLE))
def test_formats_json_matches_the_table(formats_json, name):
    f = next(x for x in formats_json if x["name"] == name)
    bits, e, m, bias, mx, mn, sub, nans, infs = FORMAT_TABLE[name]
    assert (f["bits"], f["exponent_bits"], f["mantissa_bits"], f["bias"]) == (bits, e, m, bias)
    assert f["max"] == dec(mx)
    assert f["min_normal"] == dec(mn)
    assert f["min_subnormal"] == (None if sub is None else dec(sub))
    assert f["nan_codes"] == nans
    assert f["inf_codes"] == infs


def test_formats_aliases(formats_json):
    by = {f["name"]: f["aliases"] for f in formats_json}
    assert "float8_e4m3fn" in by["e4m3"]
    assert "float4_e2m1fn" in by["e2m1"]
    assert "float8_e8m0fnu" in by["e8m0"]
    assert "bfloat16" in by["bf16"]


def test_formats_text_lists_every_format(formats_json):
    out = ok(["formats"])
    first = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert {f["name"] for f in formats_json} <= first


# ---- decode / table -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt,code,line", [
    ("e4m3", "0x7e", "0x7e 448"),
    ("e4m3", "7e", "0x7e 448"),
    ("e4m3", "0x80", "0x80 -0"),
    ("e4m3", "0x7f", "0x7f nan"),
    ("e4m3", "0xff", "0xff nan"),
    ("e4m3", "0x01", "0x01 0.001953125"),  # 2^-9
    ("e4m3", "0x1", "0x01 0.001953125"),
    ("e4m3", "0xb3", "0xb3 -0.6875"),      # -(1 + 3/8) * 2^(6-7)
    ("e5m2", "0x7c", "0x7c inf"),
    ("e5m2", "0xfc", "0xfc -inf"),
    ("e5m2", "0x7b", "0x7b 57344"),
    ("e2m1", "0x7", "0x7 6"),
    ("e2m1", "0xF", "0xf -6"),
    ("e2m3", "0x1f", "0x1f 7.5"),
    ("e2m3", "0x1", "0x01 0.125"),
    ("f16", "3c00", "0x3c00 1"),
    ("f16", "0x1", "0x0001 0.000000059604644775390625"),
    ("bf16", "0x3f80", "0x3f80 1"),
    ("tf32", "0x3f800000", "0x3f800000 1"),
    ("e8m0", "0x7f", "0x7f 1"),
    ("e8m0", "0xff", "0xff nan"),
    ("e8m0", "0x00", "0x00 " + dec(P**-127)),
    ("int8", "0x80", "0x80 -2"),
    ("int8", "0xff", "0xff -0.015625"),
    ("int8", "0x40", "0x40 1"),
    ("float8_e4m3fn", "0x7e", "0x7e 448"),
    ("Float8E4M3FN", "0x7e", "0x7e 448"),
    ("binary8p4se", "0x01", "0x01 " + dec(P**-10)),   # docs/semantics.md §1: min subnormal 2^-10
    ("binary8p4se", "0x80", "0x80 nan"),
])
def test_decode(fmt, code, line):
    assert ok(["decode", "--format", fmt, code]) == line + "\n"


def test_decode_several_codes_and_json():
    assert ok(["decode", "--format", "e2m1", "0x1", "0x2", "0x8"]).splitlines() == ["0x1 0.5", "0x2 1", "0x8 -0"]
    j = json.loads(ok(["decode", "--format", "e4m3", "0x7e", "0x80", "--json"]))
    assert j == [{"code": "0x7e", "value": "448"}, {"code": "0x80", "value": "-0"}]


def test_decode_errors():
    fails(["decode", "--format", "e2m1", "0x10"], names=["0x10", "e2m1"])
    fails(["decode", "--format", "bf16", "0x10000"], names=["0x10000"])
    fails(["decode", "--format", "tf32", "0x3f801000"], names=["0x3f801000"])
    fails(["decode", "--format", "e4m3", "0xzz"], names=["0xzz"])
    fails(["decode", "--format", "e9m9x", "0x1"], names=["e9m9x"])


def test_table_e2m1():
    # docs/semantics.md §1: E2M1 values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
    vals = ["0", "0.5", "1", "1.5", "2", "3", "4", "6"]
    want = [f"0x{c:x} {v}" for c, v in enumerate(vals)] + \
           [f"0x{c + 8:x} -{v}" for c, v in enumerate(vals)]
    assert ok(["table", "--format", "e2m1"]).splitlines() == want


def test_table_e4m3_and_json():
    lines = ok(["table", "--format", "e4m3"]).splitlines()
    assert len(lines) == 256
    assert lines[0x7e] == "0x7e 448" and lines[0x08] == "0x08 0.015625" and lines[0xff] == "0xff nan"
    j = json.loads(ok(["table", "--format", "e3m2", "--json"]))
    assert len(j) == 64 and j[0x1f] == {"code": "0x1f", "value": "28"}


def test_table_f16_size():
    lines = ok(["table", "--format", "f16"]).splitlines()
    assert len(lines) == 65536
    assert lines[0x7bff] == "0x7bff 65504"


def test_table_refuses_wide_formats():
    fails(["table", "--format", "f32"], names=["f32"])
    fails(["table", "--format", "nope"], names=["nope"])


# ---- profiles -------------------------------------------------------------------------------------

PROFILES = ["ocp", "cuda", "ml_dtypes", "llvm", "te", "torchao", "torch", "torch-strided", "torch-default",
            "torch-2.12", "xla", "microxcaling", "p3109"]


def test_profiles_lists_all():
    out = ok(["profiles"])
    for p in PROFILES:
        assert re.search(rf"^{p}\b", out, re.M), p
    j = json.loads(ok(["profiles", "--json"]))
    assert [p["name"] for p in j] == PROFILES
    # Each profile names the version of the implementation it reproduces, in both outputs.
    versions = {p["name"]: p["version"] for p in j}
    assert versions["torch"] == "torch 2.15.0" and versions["xla"] == "jaxlib 0.10.2"
    assert re.search(r"^torch: .*\(reproduces torch 2\.15\.0\)$", out, re.M)
    # Per-target NaN styles (PyTorch's bfloat16 NaN is 0xFFFF from f32, 0x7FC0 from narrower sources).
    bf16 = next(r for r in next(p for p in j if p["name"] == "torch")["targets"] if r["format"] == "bf16")
    assert bf16["nan_style"] == "negative_all_ones" and bf16["narrow_nan_style"] == "positive_quiet"


def test_profiles_json_quirks():
    # docs/semantics.md §3: ml_dtypes' ConvertImpl gives the quiet NaN of the input's sign (quiet_signed), numpy's
    # own half cast keeps the payload (numpy_half_nan), an infinity ignores saturate; CUDA's cvt gives one
    # positive all-ones NaN; TE keeps the CUDA conversion; OCP has none of the quirks.
    j = {p["name"]: p["quirks"] for p in json.loads(ok(["profiles", "--json"]))}
    assert j["ml_dtypes"]["nan_style"] == "quiet_signed"
    assert j["ml_dtypes"]["nan_to_no_nan"] == "flipped_zero"
    assert j["ml_dtypes"]["numpy_half_nan"] is True
    assert j["ml_dtypes"]["infinity_ignores_saturation"] is True
    assert j["cuda"]["nan_style"] == "positive_all_ones"
    assert j["ocp"]["nan_style"] == "preserve"
    assert j["ocp"]["numpy_half_nan"] is False and j["ocp"]["identity_copies"] is False


@pytest.fixture(scope="module")
def diff():
    rows = json.loads(ok(["profiles", "--diff", "--json"]))
    return {(r["target"], r["input"]): r for r in rows}


def code(diff, target, inp, profile):
    cell = diff[(target, inp)]["results"][profile]
    return None if cell is None else cell["code"]


# (target, input, profile, expected code or "unsupported"), from docs/semantics.md §3.
DIFF_FACTS = [
    ("e4m3", "480", "cuda", "0x7e"), ("e4m3", "480", "ocp", "0x7f"), ("e4m3", "480", "ml_dtypes", "0x7f"),
    ("e8m0", "0.75", "ml_dtypes", "0x7f"), ("e8m0", "0.75", "ocp", "0x7e"),
    ("e8m0", "0", "ml_dtypes", "0xff"), ("e8m0", "0", "te", "0x00"),
    ("e8m0", "-1", "ml_dtypes", "0xff"), ("e8m0", "-1", "te", "0x7f"),
    ("e8m0", "inf", "ml_dtypes", "0xff"), ("e8m0", "inf", "te", "0xfe"),
    ("e8m0", "3e38", "ml_dtypes", "0xff"), ("e8m0", "3e38", "te", "0xfe"),
    ("e2m1", "nan", "cuda", "0x7"), ("e2m1", "nan", "ml_dtypes", "0x8"), ("e2m1", "nan", "llvm", "unsupported"),
    ("f16", "f32:0x7f810000", "cuda", "0x7fff"), ("f16", "f32:0x7f810000", "ml_dtypes", "0x7c08"),
    # The peer profiles (reference/src/profile.cpp cites each source line).
    ("e4m3", "480", "torch", "0x7e"), ("e4m3", "480", "torch-2.12", "0x7f"), ("e4m3", "480", "xla", "0x7f"),
    ("e5m2", "61440", "torch", "0x7c"), ("e5m2", "f32:0xffc00000", "torch", "0xff"),
    ("e5m2", "f32:0xffc00000", "xla", "0xfe"), ("e5m2", "f16:0xfe00", "xla", "0x7f"),
    ("bf16", "f32:0x7f810000", "torch", "0xffff"), ("bf16", "f32:0x7f810000", "torch-strided", "0x7fc0"),
    ("f16", "bf16:0xff81", "torch-default", "0xfe00"), ("f16", "e4m3:0xff", "torch", "0xff80"),
    ("e2m1", "-nan", "xla", "0x8"), ("e2m1", "-nan", "ml_dtypes", "0x0"),
    ("e4m3", "e4m3fnuz:0x80", "torch", "0x7f"), ("e4m3", "e4m3fnuz:0x80", "ml_dtypes", "0xff"),
    ("e8m0", "1.5", "torch", "0x80"), ("e8m0", "-1", "torch", "0x7f"), ("e8m0", "f32:0x00400001", "torch", "0x01"),
    ("e2m1", "5", "microxcaling", "0x7"), ("e2m1", "5", "ocp", "0x6"),
    ("int8", "-2", "ocp", "0x80"), ("int8", "-2", "microxcaling", "0xff"),
    ("e4m3", "-nan", "cuda", "0x7f"), ("e4m3", "-nan", "ml_dtypes", "0xff"),
]


@pytest.mark.parametrize("target,inp,profile,want", DIFF_FACTS)
def test_profiles_diff_facts(diff, target, inp, profile, want):
    assert (target, inp) in diff, f"no probe {target} {inp}"
    cell = diff[(target, inp)]["results"][profile]
    if want == "unsupported":
        assert cell["unsupported"] is True
    else:
        assert cell["code"] == want


def test_profiles_diff_keeps_only_disagreements(diff):
    for key, row in diff.items():
        got = {json.dumps(c, sort_keys=True) for c in row["results"].values() if c is not None}
        codes = {(c["target"], c["code"]) for c in row["results"].values() if c is not None}
        assert len(codes) >= 2, f"{key}: every profile agrees: {got}"
    assert set(diff[("e4m3", "480")]["results"]) == set(PROFILES)


def test_profiles_diff_groups(diff):
    """Each row groups the profiles by result: every profile with the conversion in exactly one group, the
    groups' codes distinct, and the rows ordered by format with their input class named."""
    for key, row in diff.items():
        grouped = [p for g in row["groups"] for p in g["profiles"]]
        have = sorted(p for p, c in row["results"].items() if c is not None)
        assert sorted(grouped) == have, key
        assert sorted(row["no_conversion"]) == sorted(p for p, c in row["results"].items() if c is None), key
        assert len({(g["target"], g["code"]) for g in row["groups"]}) == len(row["groups"]) >= 2, key
        for g in row["groups"]:
            for p in g["profiles"]:
                assert row["results"][p]["code"] == g["code"] or (g["code"] is None and row["results"][p].get("unsupported"))
        assert row["class"] in ("NaN", "Inf", "overflow", "tie", "subnormal", "zero", "negative", "encoding"), key
    classes = {(r["target"], r["class"]) for r in diff.values()}
    for want in [("e4m3", "NaN"), ("e4m3", "overflow"), ("e5m2", "Inf"), ("bf16", "NaN"), ("f16", "NaN"),
                 ("e2m1", "tie"), ("e8m0", "zero"), ("e8m0", "subnormal")]:
        assert want in classes, want


def test_profiles_diff_text():
    out = ok(["profiles", "--diff"])
    assert out.splitlines()[0].split() == ["format", "class", "input", "result:", "implementations"]
    line = next(x for x in out.splitlines() if re.match(r"^e4m3\s+overflow\s+480\s", x))
    assert "0x7e=448:" in line and "torch" in line.split(":")[-1].split()
    assert re.search(r"^\s+0x7f=nan: .*\btorch-2\.12\b", out, re.M)


# ---- convert: docs/semantics.md §3 CUDA table (f32 inputs) ------------------------------------------------

CUDA_INPUTS = ["0x7f800000", "0xff800000", "0x7fc00000", "0xffc00000", "0x80000000", "0x3e99999a", "0xc2c80000"]
# +inf, -inf, NaN, -NaN, -0, 0.3, -100 -> column per target/option.
CUDA_TABLE = {
    ("e4m3", "satfinite"): ["0x7e", "0xfe", "0x7f", "0x7f", "0x80", "0x2a", "0xec"],
    ("e4m3", "nosat"): ["0x7f", "0xff", "0x7f", "0x7f", "0x80", "0x2a", "0xec"],
    ("e5m2", "satfinite"): ["0x7b", "0xfb", "0x7f", "0x7f", "0x80", "0x35", "0xd6"],
    ("e5m2", "nosat"): ["0x7c", "0xfc", "0x7f", "0x7f", "0x80", "0x35", "0xd6"],
    ("e2m1", None): ["0x7", "0xf", "0x7", "0x7", "0x8", "0x1", "0xf"],
    ("e2m3", None): ["0x1f", "0x3f", "0x1f", "0x1f", "0x20", "0x02", "0x3f"],
    ("e3m2", None): ["0x1f", "0x3f", "0x1f", "0x1f", "0x20", "0x05", "0x3f"],
    ("e8m0", "rtz"): ["0xfe", "0xfe", "0xff", "0xff", "0x00", "0x7d", "0x85"],
    ("e8m0", "rup"): ["0xfe", "0xfe", "0xff", "0xff", "0x00", "0x7e", "0x86"],
}


@pytest.mark.parametrize("target,opt", list(CUDA_TABLE))
def test_cuda_table(target, opt):
    args = ["--profile", "cuda", "--to", target]
    if opt in ("satfinite", "nosat"):
        args += ["--overflow", opt]
    elif opt:
        args += ["--rounding", opt]
    assert convert(args, CUDA_INPUTS) == CUDA_TABLE[(target, opt)]


def test_cuda_480_and_quarter():
    assert convert(["--profile", "cuda", "--to", "e4m3"], ["0x43f00000"]) == ["0x7e"]
    assert convert(["--profile", "cuda", "--to", "e4m3", "--overflow", "nosat"], ["0x43f00000"]) == ["0x7f"]
    assert convert(["--profile", "cuda", "--to", "e2m1"], ["0x3e800000"]) == ["0x0"]
    assert convert(["--profile", "cuda", "--to", "e8m0", "--rounding", "rtz"], ["0x3e800000"]) == ["0x7d"]


# ---- convert: docs/semantics.md §6 peer cases -------------------------------------------------------------


def text_convert(args, inputs):
    return convert(["--from", "text", *args], inputs)


def test_e4m3_from_decimal():
    assert text_convert(["--to", "e4m3"], ["448", "464", "465", "480", "inf"]) == \
        ["0x7e", "0x7e", "0x7f", "0x7f", "0x7f"]
    assert text_convert(["--to", "e4m3", "--overflow", "satfinite"], ["500", "-inf"]) == ["0x7e", "0xfe"]
    assert text_convert(["--to", "e4m3"], ["-inf"]) == ["0xff"]


def test_e5m2_from_decimal():
    assert text_convert(["--to", "e5m2"], ["61439.9", "61440", "61439.99"]) == ["0x7b", "0x7c", "0x7b"]
    assert text_convert(["--to", "e5m2", "--overflow", "satfinite"], ["61440", "inf"]) == ["0x7b", "0x7b"]


def test_e5m2_to_e4m3_with_flags():
    # 2^-10 (e5m2 0x14), 1.5*2^-10 (0x16), 1.5*2^-9 (0x1a), 512 (0x60), inf (0x7c).
    assert convert(["--from", "e5m2", "--to", "e4m3", "--flags"], ["0x14", "0x16", "0x1a", "0x60", "0x7c"]) == [
        "0x00 inexact,underflow", "0x01 inexact,underflow", "0x02 inexact,underflow", "0x7f inexact,overflow",
        "0x7f inexact,overflow"]


def test_e5m2_to_e4m3_rne_and_truncate():
    assert convert(["--from", "e5m2", "--to", "e4m3"], ["0x1f"]) == ["0x04"]
    assert convert(["--from", "e5m2", "--to", "e4m3", "--rounding", "rtz"], ["0x1f"]) == ["0x03"]


def test_f16_to_e5m2():
    assert convert(["--from", "f16", "--to", "e5m2"], ["0x7c00", "0x7c01", "0xfc01", "0x3fff"]) == \
        ["0x7c", "0x7e", "0xfe", "0x40"]
    assert convert(["--from", "f16", "--to", "e5m2", "--rounding", "rtz"], ["0x3fff"]) == ["0x3f"]


def test_e5m2fnuz_from_decimal():
    assert text_convert(["--to", "e5m2fnuz"], ["59392", "61440", "-0"]) == ["0x7f", "0x80", "0x00"]


def test_e2m1_ties():
    assert text_convert(["--to", "e2m1"], ["0.25", "0.75", "1.25", "1.75", "2.5", "3.5", "5", "6.1"]) == \
        ["0x0", "0x2", "0x2", "0x4", "0x4", "0x6", "0x6", "0x7"]


def test_e3m2_cases():
    assert text_convert(["--to", "e3m2"], ["29", "26", "0.1251", "0.0314", "0.03"]) == \
        ["0x1f", "0x1e", "0x02", "0x01", "0x00"]


def test_e8m0_round_up():
    bits = ["0x00400000", "0x00400001", "0x007fffff", "0x3f7fffff", "0x3f800000", "0x3f800001", "0x7f000000",
            "0x7f000001", "0x7f800000"]
    assert convert(["--to", "e8m0", "--rounding", "rup"], bits) == \
        ["0x00", "0x01", "0x01", "0x7f", "0x7f", "0x80", "0xfe", "0xff", "0xff"]
    assert convert(["--to", "e8m0", "--rounding", "rup", "--overflow", "satfinite"], ["0x7f000001", "0x7f800000"]) == \
        ["0xfe", "0xfe"]


def test_rne_tie_in_e8m0_goes_to_even_exponent():
    # 0.75 lies halfway between 2^-1 (biased exponent 126, even) and 2^0 (127); 3 between 2 (128) and 4 (129).
    assert text_convert(["--to", "e8m0"], ["0.75", "3"]) == ["0x7e", "0x80"]


# ---- convert: ml_dtypes and microxcaling profiles (docs/semantics.md §3) ----------------------------------


def test_ml_dtypes_e8m0():
    assert text_convert(["--profile", "ml_dtypes", "--to", "e8m0"],
                        ["1.5", "3", "6", "0.75", "-1", "0", "-0", "nan", "inf", "1e-40", "3e38"]) == \
        ["0x80", "0x81", "0x82", "0x7f", "0xff", "0xff", "0xff", "0xff", "0xff", "0x00", "0xff"]
    assert text_convert(["--profile", "ml_dtypes", "--to", "e8m0", "--overflow", "satfinite"],
                        ["-1", "0", "-0", "nan", "1e-40", "3e38"]) == ["0x00", "0x00", "0x00", "0xff", "0x00", "0xfe"]


def test_ml_dtypes_e8m0_saturating_inf():
    # docs/semantics.md §3: ml_dtypes' saturating e8m0 cast of +Inf is 0xff (its ConvertImpl returns infinity(),
    # NaN for e8m0, before it looks at the saturate flag); the same holds for e4m3 (NaN, 0x7f) and e5m2
    # keeps its infinity (0x7c).
    assert text_convert(["--profile", "ml_dtypes", "--to", "e8m0", "--overflow", "satfinite"], ["inf"]) == ["0xff"]
    assert text_convert(["--profile", "ml_dtypes", "--to", "e4m3", "--overflow", "satfinite"], ["inf", "500"]) == \
        ["0x7f", "0x7e"]
    assert text_convert(["--profile", "ml_dtypes", "--to", "e5m2", "--overflow", "satfinite"], ["-inf"]) == ["0xfc"]


def test_ml_dtypes_small_formats():
    p = ["--profile", "ml_dtypes"]
    assert text_convert([*p, "--to", "e2m1"], ["nan", "-nan", "inf"]) == ["0x8", "0x0", "0x7"]
    assert text_convert([*p, "--to", "e2m3"], ["nan", "-nan", "inf"]) == ["0x20", "0x00", "0x1f"]
    assert text_convert([*p, "--to", "e3m2"], ["nan", "-nan", "inf"]) == ["0x20", "0x00", "0x1f"]
    assert text_convert([*p, "--to", "e4m3fnuz"], ["inf", "448", "-0"]) == ["0x80", "0x80", "0x00"]
    assert text_convert([*p, "--to", "e5m2fnuz"], ["inf", "448", "-0"]) == ["0x80", "0x63", "0x00"]
    # ml_dtypes issue 400: [1000, 448, 464, 465, -1000] -> [nan, 448, 448, nan, nan].
    assert text_convert([*p, "--to", "e4m3"], ["1000", "448", "464", "465", "-1000"]) == \
        ["0x7f", "0x7e", "0x7e", "0x7f", "0xff"]


def test_microxcaling_block():
    # docs/semantics.md §3: [485, 475, 400, -485, -475, -450, 2^-6, -2^-6] in MX-E4M3 with scale 1 gives
    # [448, 448, 416, -448, -448, -448, 2^-6, -2^-6] under half-away rounding; rne takes 400 to 384.
    block = ["485", "475", "400", "-485", "-475", "-450", "0.015625", "-0.015625"]
    assert text_convert(["--profile", "microxcaling", "--to", "e4m3"], block) == \
        ["0x7e", "0x7e", "0x7d", "0xfe", "0xfe", "0xfe", "0x08", "0x88"]
    assert text_convert(["--profile", "microxcaling", "--to", "e4m3", "--rounding", "rne"], ["400"]) == ["0x7c"]


def test_int8_encodings():
    # Two's complement with scale 2^-6 (0x80 = -2); microxcaling: sign-magnitude, max 127/64.
    assert text_convert(["--to", "int8"], ["-2", "-0.015625", "1.984375"]) == ["0x80", "0xff", "0x7f"]
    assert text_convert(["--profile", "microxcaling", "--to", "int8"], ["-2", "-0.015625", "1.984375"]) == \
        ["0xff", "0x81", "0x7f"]


def test_llvm_nan_into_fp4_is_an_input_error():
    out = fails(["convert", "--profile", "llvm", "--from", "text", "--to", "e2m1"], "1\nnan\n2\n", names=["line 2"])
    assert out == "0x2\n"


def test_profile_combination_errors():
    fails(["convert", "--profile", "cuda", "--to", "e8m0"], "0x3f800000\n", names=["--rounding"])
    fails(["convert", "--profile", "cuda", "--to", "e8m0", "--rounding", "rne"], "0x3f800000\n", names=["--rounding"])
    fails(["convert", "--profile", "te", "--to", "e4m3", "--overflow", "nosat"], "", names=["--overflow"])
    fails(["convert", "--profile", "cuda", "--to", "e4m3fnuz"], "", names=["e4m3fnuz"])


# ---- convert: output format, flags, text syntax, policies -----------------------------------------


def test_code_padding():
    one = ["0x3f800000"]
    assert convert(["--to", "bf16"], one) == ["0x3f80"]
    assert convert(["--to", "f16"], one) == ["0x3c00"]
    assert convert(["--to", "tf32"], one) == ["0x3f800000"]
    assert convert(["--to", "f64"], one) == ["0x3ff0000000000000"]
    assert convert(["--to", "e2m1"], one) == ["0x2"]
    assert convert(["--to", "e2m3"], one) == ["0x08"]
    assert convert(["--to", "E4M3"], ["0x00000000"]) == ["0x00"]


def test_flags_order_and_dash():
    # 0x1.8p-10 -> e4m3: tiny and inexact; 480: overflow; f32 sNaN: invalid; NaN into e2m1: invalid; 1: exact.
    assert convert(["--to", "e4m3", "--flags"], ["0x3ac00000", "0x43f00000", "0x7f800001", "0x3f800000"]) == [
        "0x01 inexact,underflow", "0x7f inexact,overflow", "0x7f invalid", "0x38 -"]
    assert convert(["--to", "e2m1", "--flags"], ["0x7fc00000"]) == ["0x7 invalid"]


def test_text_literal_syntax():
    assert text_convert(["--to", "f16"], ["0x1.8p-10", "1e2", "+1.5", ".5", "5.", "1E0", "0X1P0"]) == \
        ["0x1600", "0x5640", "0x3e00", "0x3800", "0x4500", "0x3c00", "0x3c00"]
    assert text_convert(["--to", "f16"], ["INF", "-Infinity", "infinity", "NaN", "-nan", "-0"]) == \
        ["0x7c00", "0xfc00", "0x7c00", "0x7e00", "0xfe00", "0x8000"]


def test_text_is_exact_no_double_rounding():
    # 1 + 2^-11 + 2^-40 is above the f16 tie 1 + 2^-11 by 2^-40: rne goes up to 1 + 2^-10 (0x3c01).
    # A double-rounding path (to f32 first, 24 bits) would land on the tie and go down to 0x3c00.
    assert text_convert(["--to", "f16"], ["0x1.00200001p0"]) == ["0x3c01"]


def test_tininess_before_and_after():
    # (1 - 2^-5) * 2^-6 into e4m3: rounds to 2^-6 (0x08) inexactly; with an unbounded exponent it
    # would round to 2^-6 too, so it is tiny only before rounding.
    x = ["0.0151367187500"]
    assert text_convert(["--to", "e4m3", "--flags"], x) == ["0x08 inexact"]
    assert text_convert(["--to", "e4m3", "--flags", "--tininess", "before"], x) == ["0x08 inexact,underflow"]


def test_subnormal_modes():
    assert text_convert(["--to", "e4m3", "--flags", "--subnormals", "ftz"], ["0.001953125"]) == ["0x00 inexact,underflow"]
    assert text_convert(["--to", "e4m3", "--flags"], ["0.001953125"]) == ["0x01 -"]
    assert convert(["--from", "f16", "--to", "f32", "--subnormals", "daz"], ["0x0001", "0x8001"]) == \
        ["0x00000000", "0x80000000"]
    assert convert(["--from", "f16", "--to", "f32"], ["0x0001"]) == ["0x33800000"]


def test_directed_and_odd_rounding():
    # 0.3 in e4m3: between 0.28125 (0x29) and 0.3125 (0x2a), remainder 3/5 of an ulp.
    assert text_convert(["--to", "e4m3", "--rounding", "rtz"], ["0.3", "-0.3"]) == ["0x29", "0xa9"]
    assert text_convert(["--to", "e4m3", "--rounding", "rup"], ["0.3", "-0.3"]) == ["0x2a", "0xa9"]
    assert text_convert(["--to", "e4m3", "--rounding", "rdn"], ["0.3", "-0.3"]) == ["0x29", "0xaa"]
    assert text_convert(["--to", "e4m3", "--rounding", "rto"], ["0.3", "0.28125"]) == ["0x29", "0x29"]
    assert text_convert(["--to", "e4m3", "--rounding", "rto"], ["0.3125", "0.32"]) == ["0x2a", "0x2b"]


def test_stochastic_modes():
    # 0.3 into e4m3, remainder 3/5, N = 4: sr-a floor(9.6) + R >= 16; sr-b floor(19.2) + 2R + 1 >= 32;
    # sr-c rne(9.6) + R >= 16.
    base = ["--from", "text", "--to", "e4m3", "--sr-bits", "4", "--rounding"]
    assert convert([*base, "sr-a"], ["0.3 0x6", "0.3 0x7"]) == ["0x29", "0x2a"]
    assert convert([*base, "sr-b"], ["0.3 0x5", "0.3 0x6"]) == ["0x29", "0x2a"]
    assert convert([*base, "sr-c"], ["0.3 0x5", "0.3 0x6"]) == ["0x29", "0x2a"]
    assert convert(["--to", "e4m3", "--rounding", "sr-a", "--sr-bits", "32"], ["0x3e99999a 0xffffffff"]) == ["0x2a"]


def test_trace():
    out = ok(["convert", "--from", "text", "--to", "e4m3", "--trace"], "0.3\n").splitlines()
    assert out[0] == "0x2a"
    body = "\n".join(out[1:])
    assert "0.3" in body and "0.28125" in body and "0.3125" in body and "3/5" in body
    assert re.search(r"flags:\s+inexact$", body, re.M)
    assert re.search(r"ternary:\s+1$", body, re.M)
    out = ok(["convert", "--to", "e4m3", "--trace", "--flags"], "0x43f00000\n").splitlines()
    assert out[0] == "0x7f inexact,overflow"
    assert any("overflow" in line for line in out[1:])


# ---- convert: errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("args,name", [
    (["--to", "e9m99q"], "e9m99q"),
    (["--to", "e4m3", "--from", "f33"], "f33"),
    (["--to", "e4m3", "--rounding", "nearest"], "nearest"),
    (["--to", "e4m3", "--overflow", "clamp"], "clamp"),
    (["--to", "e4m3", "--profile", "nvidia"], "nvidia"),
    (["--to", "e4m3", "--subnormals", "flush"], "flush"),
    (["--to", "e4m3", "--tininess", "never"], "never"),
    (["--to", "e4m3", "--rounding", "sr-a"], "--sr-bits"),
    (["--to", "e4m3", "--rounding", "sr-a", "--sr-bits", "0"], "--sr-bits"),
    (["--to", "e4m3", "--rounding", "sr-b", "--sr-bits", "33"], "--sr-bits"),
    (["--to", "e4m3", "--sr-bits", "4"], "--sr-bits"),
    (["--from", "f32"], "--to"),
])
def test_option_errors(args, name):
    fails(["convert", *args], "0x3f800000\n", names=[name])


def test_malformed_line_keeps_earlier_output():
    out = fails(["convert", "--to", "f16"], "0x3f800000\n0x40000000\n0xzz\n0x40400000\n", names=["line 3"])
    assert out == "0x3c00\n0x4000\n"
    out = fails(["convert", "--from", "text", "--to", "f16"], "1\n1.5x\n2\n", names=["line 2", "1.5x"])
    assert out == "0x3c00\n"
    out = fails(["convert", "--to", "f16"], "3f800000\n", names=["line 1"])
    assert out == ""
    out = fails(["convert", "--to", "f16"], "0x3f800000\n\n0x3f800000\n", names=["line 2"])
    assert out == "0x3c00\n"


def test_too_wide_input():
    out = fails(["convert", "--from", "e2m1", "--to", "f16"], "0x1\n0x10\n0x2\n", names=["line 2", "0x10"])
    assert out == "0x3800\n"
    fails(["convert", "--to", "f16"], "0x100000000\n", names=["line 1"])
    fails(["convert", "--from", "tf32", "--to", "f16"], "0x3f801000\n", names=["line 1"])


def test_random_bits_errors():
    sr = ["convert", "--from", "text", "--to", "e4m3", "--rounding", "sr-a", "--sr-bits", "4"]
    out = fails(sr, "0.3 0x1\n0.3\n0.3 0x1\n", names=["line 2", "random"])
    assert out == "0x29\n"
    out = fails(sr, "0.3 0xf\n0.3 0x10\n", names=["line 2", "0x10"])
    assert out == "0x2a\n"
    out = fails(["convert", "--from", "text", "--to", "e4m3"], "0.3\n0.3 0x1\n", names=["line 2"])
    assert out == "0x2a\n"


# ---- convert --raw --------------------------------------------------------------------------------


def raw(args, data):
    rc, out, err = run(["convert", "--raw", *args], data, text=False)
    assert rc == 0, err
    return out


def f32_bytes(*xs):
    return struct.pack(f"<{len(xs)}f", *xs)


def test_raw_widths():
    # 1.0, 448, -0.3 as f32 -> e4m3 0x38, 0x7e, 0xaa (one byte each).
    assert raw(["--to", "e4m3"], f32_bytes(1.0, 448.0, -0.3)) == bytes([0x38, 0x7E, 0xAA])
    # e2m1: sub-byte codes unpacked, one per byte.
    assert raw(["--to", "e2m1"], f32_bytes(1.0, -6.0, 0.5)) == bytes([0x2, 0xF, 0x1])
    assert raw(["--to", "bf16"], f32_bytes(1.0, -2.0)) == struct.pack("<2H", 0x3F80, 0xC000)
    assert raw(["--to", "f64"], f32_bytes(1.0)) == struct.pack("<Q", 0x3FF0000000000000)
    assert raw(["--from", "f16", "--to", "f32"], struct.pack("<2H", 0x3C00, 0xFC00)) == \
        struct.pack("<2I", 0x3F800000, 0xFF800000)
    assert raw(["--from", "e2m1", "--to", "f16"], bytes([0x7, 0x9])) == struct.pack("<2H", 0x4600, 0xB800)
    assert raw(["--from", "f64", "--to", "e4m3"], struct.pack("<d", 480.0)) == bytes([0x7F])
    assert raw(["--from", "f64", "--to", "tf32"], struct.pack("<d", 1.0)) == struct.pack("<I", 0x3F800000)
    assert raw(["--to", "e4m3"], b"") == b""


def test_raw_profile():
    assert raw(["--profile", "cuda", "--to", "e4m3"], f32_bytes(480.0)) == bytes([0x7E])


def test_raw_large_input():
    # 2^20 copies of 1.0 and 3.0 (f32) -> e4m3 0x38, 0x44.
    data = f32_bytes(1.0, 3.0) * (1 << 19)
    assert raw(["--to", "e4m3"], data) == bytes([0x38, 0x44]) * (1 << 19)


def test_raw_errors():
    rc, out, err = run(["convert", "--raw", "--to", "e4m3"], f32_bytes(1.0) + b"\x00", text=False)
    assert rc == 2 and out == bytes([0x38]) and "partial" in err
    rc, out, err = run(["convert", "--raw", "--from", "e2m1", "--to", "f16"], bytes([0x1, 0x10]), text=False)
    assert rc == 2 and out == struct.pack("<H", 0x3800) and "0x10" in err
    for extra, name in [(["--flags"], "--flags"), (["--trace"], "--trace"), (["--from", "text"], "text"),
                        (["--rounding", "sr-a", "--sr-bits", "4"], "sr-a")]:
        fails(["convert", "--raw", "--to", "e4m3", *extra], "", names=[name])


# ---- conform is registered ------------------------------------------------------------------------


def test_conform_subcommand_exists():
    assert "conform" in ok(["--help"])


def test_trace_prints_decimal_inputs_exactly():
    # A decimal literal is a rational with a 2^a 5^b denominator: its exact decimal is the literal itself
    # (normalised), never a rounded binary value.
    for literal, shown in [("1.0000001", "1.0000001"), ("0.1", "0.1"), ("-2.5e-3", "-0.0025"),
                           ("0x1.8p-10", "0.00146484375"), ("1e-30", "0." + "0" * 29 + "1")]:
        out = ok(["convert", "--from", "text", "--to", "bf16", "--trace"], literal + "\n")
        assert f"  input:     {shown}\n" in out, out
