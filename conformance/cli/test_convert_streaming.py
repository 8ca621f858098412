"""`lowbit convert` streams (tools/lowbit/convert_cmd.cpp, README "A tour of the command line"): a bad line
stops it with exit 2 naming the line, after it wrote the complete results of every line before it, and
nothing after it.  The inputs are long enough to cross the command's 1 MiB input and output buffers."""
import os
import subprocess

LOWBIT = os.environ.get("LOWBIT", "lowbit")


def convert(args, data):
    p = subprocess.run([LOWBIT, "convert", *args], input=data, capture_output=True, timeout=300)
    return p.returncode, p.stdout, p.stderr.decode()


def test_text_lines_before_a_bad_one_are_written_and_none_after():
    n = 300_000  # 1.5 MB of output: written in more than one flush before the bad line is read
    data = b"1.5\n" * n + b"abc\n" + b"2\n" * 1000
    rc, out, err = convert(["--from", "text", "--to", "e4m3"], data)
    assert rc == 2
    # 1.5 = 1.1b x 2^0 is 0 0111 100 in e4m3 (bias 7, OCP FP8 v1.0).
    assert out == b"0x3c\n" * n
    assert err == f"lowbit: line {n + 1}: 'abc' is not a number (decimal, hex-float, nan, inf)\n"


def test_bits_mode_names_the_line_of_a_bad_code():
    rc, out, err = convert(["--from", "e2m1", "--to", "f32"], b"0x1\n0x2\n0x17\n0x3\n")
    assert rc == 2
    # e2m1 0x1 is 0.5 and 0x2 is 1 (OCP MX v1.0, FP4 E2M1): f32 0x3f000000 and 0x3f800000.
    assert out == b"0x3f000000\n0x3f800000\n"
    assert err == "lowbit: line 3: '0x17' is too wide for e2m1 (4 code bits)\n"


def test_a_bad_line_first_writes_nothing():
    rc, out, err = convert(["--from", "text", "--to", "e4m3"], b"x\n1\n")
    assert (rc, out) == (2, b"")
    assert err.startswith("lowbit: line 1: 'x' is not a number")


def test_raw_values_before_a_bad_one_are_written():
    n = 600_000  # 2.4 MB of f32 output codes
    rc, out, err = convert(["--from", "e2m1", "--to", "f32", "--raw"], b"\x02" * n + b"\x10" + b"\x01" * 100)
    assert rc == 2
    assert out == b"\x00\x00\x80\x3f" * n
    assert err == f"lowbit: --raw: the value at byte offset {n} (0x10) is too wide for e2m1\n"


def test_raw_partial_value_at_the_end():
    rc, out, err = convert(["--to", "e4m3", "--raw"], b"\x00\x00\xc0\x3f" * 3 + b"\x00")
    assert rc == 2
    assert out == b"\x3c" * 3
    assert err == "lowbit: --raw: the input ends with a partial value: 1 byte(s) at byte offset 12, a f32 value takes 4\n"
