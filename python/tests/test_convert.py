"""lowbit.convert and lowbit.decode give the command line's bits (`lowbit convert`, `lowbit decode`) on
shared inputs: every target of at most 16 bits under every profile, f32, bf16 and f16 sources, flags, the
stochastic roundings, wider and narrower sources, any memory layout, any thread count."""
import numpy as np
import pytest

import lowbit
from conftest import cli

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")

TARGETS = ["f32", "tf32", "bf16", "f16", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e4m3b11fnuz", "e4m3ieee", "e3m4",
           "e2m3", "e3m2", "e2m1", "e8m0", "ue4m3", "int8", "int8sm", "binary8p3se"]
PROFILES = [None] + [p.name for p in lowbit.profiles()]
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
FLAG_BITS = {"inexact": 1, "underflow": 2, "overflow": 4, "invalid": 16}


def source_values(src, patterns):
    if src == "f32":
        return patterns.view(np.float32)
    codes = np.arange(65536, dtype=np.uint16)
    return codes.view(np.float16 if src == "f16" else ml_dtypes.bfloat16)


def cli_raw(src, to, profile, values):
    args = ["convert", "--raw", "--from", src, "--to", to] + (["--profile", profile] if profile else [])
    return cli(*args, input=values.tobytes(), check=False)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("src", ["f32", "bf16", "f16"])
def test_raw_conversion_matches_the_command_line(src, profile, patterns):
    values = source_values(src, patterns)
    compared = 0
    for to in TARGETS:
        x = values
        if profile == "llvm" and not lowbit.format(to).has_nan:
            # LLVM has no result for NaN there: the module says so (test_errors), `--raw` writes a code.
            x = values[~np.isnan(values.astype(np.float32))]
        run = cli_raw(src, to, profile, x)
        if run.returncode != 0:
            # An option the profile does not have: the module refuses it with the same reason.
            why = run.stderr.decode().strip().removeprefix("lowbit: ")
            with pytest.raises(ValueError) as e:
                lowbit.convert(x, to, profile=profile)
            assert why.split(": ", 1)[1] in str(e.value)
            continue
        got = lowbit.convert(x, to, profile=profile)
        want = np.frombuffer(run.stdout, dtype=UINT[got.dtype.itemsize])
        np.testing.assert_array_equal(np.asarray(got).view(want.dtype).reshape(-1), want, err_msg=f"{src} -> {to}")
        compared += want.size
    assert compared > 0


def text_lines(codes, digits, rbits=None):
    if rbits is None:
        return "".join(f"0x{int(c):0{digits}x}\n" for c in codes)
    return "".join(f"0x{int(c):0{digits}x} 0x{int(r):x}\n" for c, r in zip(codes, rbits))


def parse_flags(text):
    codes, flags = [], []
    for line in text.decode().splitlines():
        code, f = line.split()
        codes.append(int(code, 16))
        flags.append(0 if f == "-" else sum(FLAG_BITS[n] for n in f.split(",")))
    return np.array(codes), np.array(flags)


@pytest.mark.parametrize("to,profile,options", [
    ("e4m3", None, {}), ("e4m3", "cuda", {}), ("e5m2", None, {"overflow": "satfinite"}), ("e2m1", "ocp", {}),
    ("bf16", None, {"rounding": "rtz"}), ("f16", None, {"subnormals": "ftz"}), ("e4m3", None, {"tininess": "before"}),
    ("e8m0", "cuda", {"rounding": "rup"}), ("int8", "ocp", {}), ("e3m2", "ml_dtypes", {}),
])
def test_flags_match_the_command_line(to, profile, options, patterns):
    x = patterns[:3000]
    args = ["convert", "--to", to, "--flags"] + (["--profile", profile] if profile else [])
    for k, v in options.items():
        args += [f"--{k}", v]
    want_codes, want_flags = parse_flags(cli(*args, input=text_lines(x, 8)).stdout)
    got = lowbit.convert(x.view(np.float32), to, profile=profile, with_flags=True, **options)
    np.testing.assert_array_equal(np.asarray(got.codes).view(UINT[got.codes.dtype.itemsize]), want_codes)
    np.testing.assert_array_equal(got.flags, want_flags)
    # The ternary value agrees with the flags: zero exactly where the result is exact (or NaN).
    assert ((got.ternary != 0) <= ((got.flags & lowbit.Flag.INEXACT) != 0)).all()


@pytest.mark.parametrize("rounding", ["sr-a", "sr-b", "sr-c"])
def test_stochastic_rounding_matches_the_command_line(rounding, patterns):
    x = patterns[:3000]
    rbits = np.random.default_rng(3).integers(0, 256, size=x.size, dtype=np.uint32)
    out = cli("convert", "--to", "e2m1", "--rounding", rounding, "--sr-bits", 8, input=text_lines(x, 8, rbits)).stdout
    want = np.array([int(line, 16) for line in out.decode().split()])
    got = lowbit.convert(x.view(np.float32), "e2m1", rounding=rounding, sr_bits=8, random_bits=rbits)
    np.testing.assert_array_equal(got.view(np.uint8), want)


@pytest.mark.parametrize("src,to", [("f64", "e4m3"), ("f64", "bf16"), ("e4m3", "bf16"), ("e5m2", "e4m3"),
                                    ("e2m1", "f32"), ("bf16", "e2m1")])
def test_other_sources_match_the_command_line(src, to, patterns):
    f = lowbit.format(src)
    if src == "f64":
        x = np.concatenate([patterns.view(np.float32).astype(np.float64),
                            np.random.default_rng(5).standard_normal(2000) * 300])
        raw = x.view(np.uint64)
    else:
        raw = np.arange(2**f.code_bits, dtype=UINT[f.storage_bytes])
        x = raw.view(f.dtype)
    out = cli("convert", "--from", src, "--to", to, input=text_lines(raw, (f.storage_bits + 3) // 4)).stdout
    want = np.array([int(line, 16) for line in out.decode().split()], dtype=np.uint64)
    got = lowbit.convert(x, to)
    np.testing.assert_array_equal(np.asarray(got).view(UINT[got.dtype.itemsize]).astype(np.uint64), want)


def test_output_dtypes():
    x = np.array([1.0, -0.5], np.float32)
    assert lowbit.convert(x, "e4m3").dtype == ml_dtypes.float8_e4m3fn
    assert lowbit.convert(x, "e2m1").dtype == ml_dtypes.float4_e2m1fn
    assert lowbit.convert(x, "e8m0").dtype == ml_dtypes.float8_e8m0fnu
    assert lowbit.convert(x, "bf16").dtype == ml_dtypes.bfloat16
    assert lowbit.convert(x, "f16").dtype == np.float16
    # MXINT8 is two's complement scaled by 2^-6, not numpy's int8: unsigned codes with the format's name.
    c = lowbit.convert(x, "int8")
    assert isinstance(c, lowbit.Codes) and c.format == "int8" and c.dtype == np.uint8
    assert c.view(np.ndarray).tolist() == [0x40, 0xE0]
    t = lowbit.convert(x, "tf32")
    assert t.format == "tf32" and t.dtype == np.uint32 and t.view(np.ndarray).tolist() == [0x3F800000, 0xBF000000]
    # Codes of a format without a dtype go back in as they came out.
    np.testing.assert_array_equal(lowbit.decode(c), [1.0, -0.5])


def test_decode_matches_the_command_line():
    codes = ["0x7e", "0x01", "0xff", "0x80", "0x08", "0x77"]
    out = cli("decode", "--format", "e4m3", *codes).stdout.decode().splitlines()
    want = [float(line.split()[1]) for line in out]
    got = lowbit.decode(np.array([int(c, 16) for c in codes], np.uint8), "e4m3")
    assert [repr(float(v)) for v in got] == [repr(v) for v in want]
    assert np.signbit(got[3]) and np.isnan(got[2])


def test_layouts_and_shapes(patterns):
    x = patterns[:4096].view(np.float32).reshape(64, 64)
    flat = lowbit.convert(x.reshape(-1), "e4m3").view(np.uint8)
    np.testing.assert_array_equal(lowbit.convert(x, "e4m3").view(np.uint8).reshape(-1), flat)
    fortran = np.asfortranarray(x)
    np.testing.assert_array_equal(lowbit.convert(fortran, "e4m3").view(np.uint8), flat.reshape(64, 64))
    np.testing.assert_array_equal(lowbit.convert(x[:, ::3], "e4m3").view(np.uint8), flat.reshape(64, 64)[:, ::3])
    np.testing.assert_array_equal(lowbit.convert(x.T, "e4m3").view(np.uint8), flat.reshape(64, 64).T)
    assert lowbit.convert(np.float32(1.5), "e2m1").shape == ()
    assert lowbit.convert(np.zeros((0, 3), np.float32), "e2m1").shape == (0, 3)
    assert lowbit.convert([1.0, 2.0], "e4m3").view(np.uint8).tolist() == [0x38, 0x40]  # a list is f64 values


def test_thread_count_does_not_change_the_bits():
    x = np.random.default_rng(11).integers(0, 2**32, size=3 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32)
    one = lowbit.convert(x, "e4m3", with_flags=True, threads=1)
    two = lowbit.convert(x, "e4m3", with_flags=True, threads=2)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
    np.testing.assert_array_equal(lowbit.decode(one.codes, threads=2).view(np.uint64),
                                  lowbit.decode(one.codes, threads=1).view(np.uint64))
