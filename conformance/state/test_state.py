"""`lowbit state step`, `lowbit state convert` and `lowbit verify-checkpoint --state`: the training scale state.

Expected values come from hand derivations of Transformer Engine's delayed scaling (delayed_scaling.cu) and
torch's _amp_update_scale_ CPU kernel (aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp), from an exact
rational computation of the kernel's arithmetic, and from fixtures/gradscaler.json, which torch 2.15's own
GradScaler produced (make_gradscaler.py).
"""
import json
import os
import struct
import subprocess
from fractions import Fraction

import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "gradscaler.json")


def run(*args, stdin=""):
    p = subprocess.run([LOWBIT, *map(str, args)], input=stdin.encode(), capture_output=True, check=False)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def bits(x):
    return "0x%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


def value(b):
    return struct.unpack("<f", struct.pack("<I", int(b, 16)))[0]


def write(path, doc):
    path.write_text(json.dumps(doc))
    return path


def step(tmp_path, state, *args):
    src = write(tmp_path / "in.json", state)
    rc, out, err = run("state", "step", "--state", src, *args)
    assert rc == 0, err
    return json.loads(out)


def layer(history, scale, **kw):
    return {"history": [bits(h) for h in history], "scale": bits(scale), **kw}


# ---- TE delayed scaling, derived by hand ---------------------------------------------------------------

def test_delayed_max_roll_order(tmp_path):
    # History [0, 2, 1, 3] (slot 0 newest); amax 4 goes into slot 0 (fmaxf with its 0); max over [4, 2, 1, 3] is
    # 4, so the scale is 448 / 4 = 112; then new[i] = old[i + 1], new[3] = old[0] = 4, and slot 0 is zeroed.
    s = step(tmp_path, {"layers": {"w": layer([0, 2, 1, 3], 1.0)}}, "--amax", "w=" + bits(4.0))["layers"]["w"]
    assert s["scale"] == bits(112.0)
    assert s["history"] == [bits(0), bits(1), bits(3), bits(4)]
    # The next step: amax 0.5 into slot 0; max over [0.5, 1, 3, 4] is still 4 (the old amax rolled to the end).
    s2 = step(tmp_path, {"layers": {"w": s}}, "--amax", "w=" + bits(0.5))["layers"]["w"]
    assert s2["scale"] == bits(112.0) and s2["history"] == [bits(0), bits(3), bits(4), bits(0.5)]


def test_delayed_most_recent_margin_and_e5m2(tmp_path):
    # most_recent takes slot 0 only (amax 3, though 100 is in the history); margin 2: 448 * 2^-2 = 112; 112 / 3
    # in f32.  e5m2: 57344 * 2^-1 / 7.
    doc = {"layers": {"a": layer([0, 100], 1.0, algorithm="most_recent", margin=2),
                      "b": layer([0, 0, 0], 1.0, margin=1, element="e5m2")}}
    s = step(tmp_path, doc, "--amax", "a=" + bits(3.0), "--amax", "b=" + bits(7.0))["layers"]
    assert s["a"]["scale"] == bits(struct.unpack("<f", struct.pack("<f", 112.0 / 3.0))[0])
    assert s["a"]["history"] == [bits(0), bits(3.0)]
    assert s["b"]["scale"] == bits(28672.0 / 7.0)


def test_delayed_nonfinite_and_tiny_amax(tmp_path):
    # A NaN amax is dropped by fmaxf (slot 0 stays 0), so the amax is 0 and the scale is kept.
    s = step(tmp_path, {"layers": {"w": layer([0, 0], 5.0)}}, "--amax", "w=0x7fc00000")["layers"]["w"]
    assert s["scale"] == bits(5.0) and s["history"] == [bits(0), bits(0)]
    # An infinite amax is recorded and kept in the history; the scale is kept (not finite).
    s = step(tmp_path, {"layers": {"w": layer([0, 0], 5.0)}}, "--amax", "w=0x7f800000")["layers"]["w"]
    assert s["scale"] == bits(5.0) and s["history"] == [bits(0), "0x7f800000"]
    # The smallest subnormal: 448 / 2^-149 overflows f32, and TE stores FLT_MAX.
    s = step(tmp_path, {"layers": {"w": layer([0], 5.0)}}, "--amax", "w=0x00000001")["layers"]["w"]
    assert s["scale"] == "0x7f7fffff" and s["history"] == [bits(0)]


def test_step_matches_quantize_state(tmp_path):
    # The state quantize --state leaves after a tensor, and state step given that tensor's amax, are the same.
    st = tmp_path / "q.json"
    xs = " ".join(bits(v) for v in (1.0, -2.0, 0.5))
    for _ in range(2):
        rc, _, err = run("quantize", "--scheme", "delayed", "--state", st, "--in", "-", "--out", "-", stdin=xs)
        assert rc == 0, err
    after_two = json.loads(st.read_text())
    rc, _, err = run("quantize", "--scheme", "delayed", "--state", st, "--in", "-", "--out", "-", stdin=xs)
    after_three = json.loads(st.read_text())
    stepped = step(tmp_path, after_two, "--amax", bits(2.0))
    assert {k: stepped[k] for k in after_three} == after_three
    assert len(stepped["history"]) == 1024 and stepped["element"] == "e4m3"


def test_quantize_state_in_safetensors(tmp_path):
    # quantize --state NAME.safetensors keeps the same state as the JSON file, in lowbit state's safetensors form.
    xs = " ".join(bits(v) for v in (1.0, -2.0, 0.5, 3.0))
    outs = {}
    for name in ("q.json", "q.safetensors"):
        for _ in range(3):
            rc, out, err = run("quantize", "--scheme", "delayed", "--state", tmp_path / name, "--in", "-", "--out", "-",
                               stdin=xs)
            assert rc == 0, err
            outs.setdefault(name, []).append(out)
    assert outs["q.json"] == outs["q.safetensors"]
    rc, out, err = run("state", "convert", "--in", tmp_path / "q.safetensors")
    assert rc == 0 and json.loads(out) == json.loads((tmp_path / "q.json").read_text()) | {"element": "e4m3"}
    # A state of two layers is not one quantize can step.
    run("state", "convert", "--in", write(tmp_path / "two.json", {"layers": {"a": layer([0], 1.0), "b": layer([0], 1.0)}}),
        "--out", tmp_path / "two.safetensors")
    rc, _, err = run("quantize", "--scheme", "delayed", "--state", tmp_path / "two.safetensors", "--in", "-", "--out", "-",
                     stdin=xs)
    assert rc == 2 and "2 layer(s)" in err


# ---- GradScaler, derived by hand and exactly ---------------------------------------------------------

def scaler(scale, tracker=0, growth=2.0, backoff=0.5, interval=2000):
    return {"grad_scaler": {"scale": bits(scale), "growth_tracker": tracker, "growth_factor": growth,
                            "backoff_factor": backoff, "growth_interval": interval}}


def f32_round(q):
    """The nearest f32 of a rational, ties to even (normal range)."""
    x = float(q)  # nearest double first, then to f32: exact for what the test uses (checked below)
    return struct.unpack("<f", struct.pack("<f", x))[0]


def test_gradscaler_growth_interval_and_backoff(tmp_path):
    s = step(tmp_path, scaler(65536.0, tracker=1, interval=3), "--found-inf", "false")["grad_scaler"]
    assert (s["scale"], s["growth_tracker"]) == (bits(65536.0), 2)
    s = step(tmp_path, {"grad_scaler": s}, "--found-inf", "false")["grad_scaler"]  # 2 + 1 == 3: grow, reset
    assert (s["scale"], s["growth_tracker"]) == (bits(131072.0), 0)
    s = step(tmp_path, scaler(65536.0, tracker=2, interval=3), "--found-inf", "true")["grad_scaler"]
    assert (s["scale"], s["growth_tracker"]) == (bits(32768.0), 0)


def test_gradscaler_factor_is_a_double(tmp_path):
    # 3 * 1.1: the kernel multiplies the f32 scale by the double 1.1 in double, then converts once to f32.
    # The exact product of 3 and double(1.1) rounds to 0x40533333; f32 arithmetic (3 * f32(1.1)) would give
    # 0x40533334.
    exact = Fraction(3) * Fraction(1.1)
    assert bits(f32_round(exact)) == "0x40533333"
    f32_factor = struct.unpack("<f", struct.pack("<f", 1.1))[0]
    assert bits(f32_round(Fraction(3) * Fraction(f32_factor))) == "0x40533334"
    s = step(tmp_path, scaler(3.0, growth=1.1, interval=1), "--found-inf", "false")["grad_scaler"]
    assert s["scale"] == "0x40533333"


def test_gradscaler_no_growth_past_flt_max(tmp_path):
    s = step(tmp_path, scaler(2.0**127, tracker=0, interval=1), "--found-inf", "false")["grad_scaler"]
    assert (s["scale"], s["growth_tracker"]) == (bits(2.0**127), 0)


# ---- torch's own GradScaler, replayed ---------------------------------------------------------------

CASES = json.load(open(FIXTURE))["cases"]


def chain(tmp_path, state, flags):
    out = []
    for f in flags:
        state = step(tmp_path, state, "--found-inf", "true" if f else "false")
        out.append(state["grad_scaler"])
    return out


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_torch_gradscaler_fixture(tmp_path, case):
    got = chain(tmp_path, {"grad_scaler": case["initial"]}, case["found_inf"])
    for k, (g, want) in enumerate(zip(got, case["states"])):
        assert g == want, f"{case['name']}: after step {k + 1} ({case['gradient'][k]} gradient)"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_torch_restore_through_safetensors(tmp_path, case):
    # torch's state halfway, saved as safetensors by lowbit and read back, continues exactly as torch's own
    # restored run and as the uninterrupted run.
    half = case["saved_after_step"]
    saved = write(tmp_path / "saved.json", {"grad_scaler": case["states"][half - 1]})
    rc, _, err = run("state", "convert", "--in", saved, "--out", tmp_path / "saved.safetensors")
    assert rc == 0, err
    rc, out, err = run("state", "convert", "--in", tmp_path / "saved.safetensors")
    assert rc == 0 and json.loads(out) == {"grad_scaler": case["states"][half - 1]}
    state = {"grad_scaler": json.loads(out)["grad_scaler"]}
    got = chain(tmp_path, state, case["found_inf"][half:])
    assert got == case["restored"] == case["states"][half:]


# ---- save and restore ---------------------------------------------------------------------------------

def full_state():
    d = {"layers": {"model.layers.0.fc1": layer([0, 2.5, 1e-30, 448], 0.75, margin=1),
                    "model.layers.0.fc2": layer([0, 3], 2.0, algorithm="most_recent", element="e5m2")}}
    d.update(scaler(1234.5, tracker=7, growth=1.7, backoff=0.3, interval=11))
    return d


def test_round_trip_json_safetensors_json(tmp_path):
    src = write(tmp_path / "s.json", full_state())
    rc, _, err = run("state", "convert", "--in", src, "--out", tmp_path / "a.safetensors")
    assert rc == 0, err
    rc, out, err = run("state", "convert", "--in", tmp_path / "a.safetensors")
    assert rc == 0, err
    back = json.loads(out)
    want = full_state()
    for l in want["layers"].values():
        l.setdefault("algorithm", "max"), l.setdefault("margin", 0), l.setdefault("element", "e4m3")
    assert back == want
    # The same bytes every time, and the tensors and metadata as documented.
    rc, _, _ = run("state", "convert", "--in", tmp_path / "a.safetensors", "--out", tmp_path / "b.safetensors")
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    raw = (tmp_path / "a.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    assert header["__metadata__"]["lowbit.training_state"] == "1"
    assert header["__metadata__"]["grad_scaler.growth_factor"] == "1.7"
    assert header["__metadata__"]["model.layers.0.fc2.element"] == "e5m2"
    assert header["grad_scaler.growth_tracker"]["dtype"] == "I32" and header["grad_scaler.scale"]["shape"] == []
    h = header["model.layers.0.fc1.amax_history"]
    assert h["dtype"] == "F32" and h["shape"] == [4]
    b0, b1 = h["data_offsets"]
    assert raw[8 + n + b0:8 + n + b1] == struct.pack("<4f", 0, 2.5, 1e-30, 448)


def test_stepping_the_restored_file_equals_stepping_the_original(tmp_path):
    src = write(tmp_path / "s.json", full_state())
    run("state", "convert", "--in", src, "--out", tmp_path / "s.safetensors")
    steps = write(tmp_path / "steps.json", {"steps": [
        {"amax": {"model.layers.0.fc1": bits(600.0), "model.layers.0.fc2": bits(1.0)}, "found_inf": False},
        {"amax": {"model.layers.0.fc1": bits(1.0), "model.layers.0.fc2": "0x7fc00000"}, "found_inf": True}]})
    rc, a, err = run("state", "step", "--state", src, "--steps", steps)
    assert rc == 0, err
    rc, b, err = run("state", "step", "--state", tmp_path / "s.safetensors", "--steps", steps)
    assert rc == 0 and a == b


# ---- verify-checkpoint --state ------------------------------------------------------------------------

def verify(tmp_path, saved, restored, steps, *extra):
    a = write(tmp_path / "saved.json", saved)
    b = write(tmp_path / "restored.json", restored)
    s = write(tmp_path / "steps.json", {"steps": steps})
    return run("verify-checkpoint", "--state", a, "--restored", b, "--steps", s, *extra)


STEPS = [{"amax": {"fc1": bits(2.0), "fc2": bits(1.0)}, "found_inf": False},
         {"amax": {"fc1": bits(1.0), "fc2": bits(1.0)}, "found_inf": False},
         {"amax": {"fc1": bits(1.0), "fc2": bits(1.0)}, "found_inf": False},
         {"amax": {"fc1": bits(1.0), "fc2": bits(1.0)}, "found_inf": False}]


def two_layers():
    d = {"layers": {"fc1": layer([0, 0, 0, 0], 1.0), "fc2": layer([0, 8.0, 0, 0], 1.0)}}
    d.update(scaler(65536.0, tracker=0, interval=3))
    return d


def test_verify_state_identical(tmp_path):
    rc, out, err = verify(tmp_path, two_layers(), two_layers(), STEPS)
    assert rc == 0, err
    assert out == "verify-checkpoint --state: 4 step(s), every next-step scale identical\n"


def test_verify_state_names_first_layer_and_step(tmp_path):
    restored = two_layers()
    # fc2's amax 8 lost from slot 1: the saved run's scale after step 1 is 448/8 = 56, the restored run's 448/1.
    restored["layers"]["fc2"]["history"][1] = bits(0.0)
    # The growth tracker restored as 0 from a saved 1: the saved run grows after step 2, the restored after 3.
    saved = two_layers()
    saved["grad_scaler"]["growth_tracker"] = 1
    rc, out, err = verify(tmp_path, saved, restored, STEPS)
    assert rc == 1, err
    lines = out.splitlines()
    assert "state: layer 'fc2': history slot 1 is 0x00000000, expected 0x41000000" in lines
    assert "state: grad_scaler: growth_tracker 0, expected 1" in lines
    assert ("layer 'fc2': scale first differs after step 1: expected 0x42600000 (56) actual 0x43e00000 (448)"
            in lines)
    assert ("grad_scaler: scale first differs after step 2: expected 0x48000000 (131072) actual 0x47800000 (65536)"
            in lines)
    assert lines[-1] == "verify-checkpoint --state: 4 step(s), first difference: layer 'fc2' after step 1"
    rc, out, _ = verify(tmp_path, saved, restored, STEPS, "--json")
    j = json.loads(out)
    assert rc == 1 and not j["identical"]
    assert [(d["layer"], d["after_step"]) for d in j["differences"]] == [("fc2", 1), ("grad_scaler", 2)]


def test_verify_state_scale_as_restored(tmp_path):
    restored = two_layers()
    restored["layers"]["fc1"]["scale"] = bits(2.0)
    rc, out, _ = verify(tmp_path, two_layers(), restored, STEPS)
    assert rc == 1 and out.splitlines()[-1].endswith("first difference: layer 'fc1' as restored")


# ---- bad input: exit 2 naming the key, nothing written ------------------------------------------------

@pytest.mark.parametrize("doc,key", [
    ({"layers": {"w": {"history": [bits(0)]}}}, "layers.w.scale"),
    ({"layers": {"w": {"history": [], "scale": bits(1)}}}, "layers.w.history"),
    ({"layers": {"w": {"history": ["0x1"], "scale": "1.0"}}}, "layers.w.scale"),
    ({"layers": {"w": {"history": [bits(0)], "scale": bits(1), "algorithm": "mean"}}}, "layers.w.algorithm"),
    ({"layers": {"w": {"history": [bits(0)], "scale": bits(1), "element": "nope"}}}, "layers.w.element"),
    ({"layers": {"w": {"history": [bits(0)], "scale": bits(1), "element": "bf16"}}}, "layers.w.element"),
    ({"layers": {"w": {"history": [bits(0)], "scale": bits(1), "extra": 1}}}, "layers.w.extra"),
    (scaler(1.0, growth=1.0), "grad_scaler.growth_factor"),
    (scaler(1.0, backoff=1.0), "grad_scaler.backoff_factor"),
    (scaler(1.0, interval=0), "grad_scaler.growth_interval"),
    (scaler(1.0, tracker=-1), "grad_scaler.growth_tracker"),
    (scaler(1.0, tracker=2**64 + 1), "grad_scaler.growth_tracker"),
    (scaler(1.0, interval=2.5), "grad_scaler.growth_interval"),
    ({"grad_scaler": {"scale": bits(1)}}, "grad_scaler.growth_tracker"),
    ({"layer": {}}, "layer"),
])
def test_bad_state_exits_2_naming_the_key(tmp_path, doc, key):
    src = write(tmp_path / "bad.json", doc)
    out = tmp_path / "out.json"
    out.write_text("old")
    rc, so, err = run("state", "step", "--state", src, "--found-inf", "false", "--out", out)
    assert rc == 2 and key in err and so == "", err
    assert out.read_text() == "old"


def test_bad_steps_and_safetensors(tmp_path):
    src = write(tmp_path / "s.json", two_layers())
    out = tmp_path / "out.safetensors"
    rc, _, err = run("state", "step", "--state", src, "--amax", "fc1=" + bits(1.0), "--found-inf", "0", "--out", out)
    assert rc == 2 and "no amax for layer 'fc2'" in err and not out.exists()
    rc, _, err = run("state", "step", "--state", src, "--amax", "fc1=" + bits(1.0), "--amax", "fc2=" + bits(1.0),
                     "--out", out)
    assert rc == 2 and "found_inf" in err and not out.exists()
    steps = write(tmp_path / "steps.json", {"steps": [{"amax": {"fc1": "0x1"}, "found": True}]})
    rc, _, err = run("state", "step", "--state", src, "--steps", steps, "--out", out)
    assert rc == 2 and "steps[0].found" in err and not out.exists()
    rc, _, err = run("state", "step", "--state", src, "--amax", "fc1=1.0", "--out", out)
    assert rc == 2 and "--amax" in err and not out.exists()
    # A safetensors file with a tensor that is no part of a state, and one that is not a state at all.
    run("state", "convert", "--in", src, "--out", tmp_path / "s.safetensors")
    raw = (tmp_path / "s.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header["fc1.extra"] = dict(header["fc1.scale"])
    hb = json.dumps(header).encode()
    (tmp_path / "x.safetensors").write_bytes(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
    rc, _, err = run("state", "convert", "--in", tmp_path / "x.safetensors", "--out", out)
    assert rc == 2 and "fc1.extra" in err and not out.exists()
    del header["fc1.extra"], header["__metadata__"]["lowbit.training_state"]
    hb = json.dumps(header).encode()
    (tmp_path / "y.safetensors").write_bytes(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
    rc, _, err = run("state", "convert", "--in", tmp_path / "y.safetensors", "--out", out)
    assert rc == 2 and "lowbit.training_state" in err and not out.exists()


def test_verify_state_bad_input(tmp_path):
    rc, _, err = verify(tmp_path, two_layers(), {"layers": {"fc1": layer([0], 1.0)}}, STEPS)
    assert rc == 2 and "layer 'fc2'" in err
    rc, _, err = run("verify-checkpoint", "--state", tmp_path / "saved.json")
    assert rc == 2 and "--restored" in err
