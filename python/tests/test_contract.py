"""lowbit.contract: the named contracts and documents of `lowbit contract list / show --json`; every pass of
every named contract run to the same stage bytes as `lowbit contract run` writes (random and adversarial bf16
inputs); a small contract whose stages are derived by hand; check / assert_matches naming the first differing
stage and element as `lowbit contract check` does; bad contracts and inputs refused naming the JSON path or
the argument."""
import json

import numpy as np
import pytest

import lowbit
from conftest import cli

ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")

NAMED = [line.split("\t")[0] for line in cli("contract", "list").stdout.decode().splitlines()]


def test_names_and_descriptions_are_the_command_lines():
    lines = cli("contract", "list").stdout.decode().splitlines()
    assert NAMED and lowbit.contract.names() == NAMED
    assert [f"{n}\t{d}" for n, d in lowbit.contract.descriptions().items()] == lines


@pytest.mark.parametrize("name", NAMED)
def test_show_is_the_command_lines_document(name):
    assert lowbit.contract.show(name) == json.loads(cli("contract", "show", name, "--json").stdout)


def test_show_reads_a_file_and_a_dict(tmp_path):
    p = tmp_path / "hand.json"
    p.write_text(json.dumps(HAND))
    assert lowbit.contract.show(str(p)) == HAND == lowbit.contract.show(p) == lowbit.contract.show(HAND)


def bf16(a, rng=None):
    """float32 values as bfloat16 (round to nearest even, ml_dtypes)."""
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16)


def layer_inputs(kind, m, n, k, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    dy = (rng.standard_normal((m, n)) * 1e-3).astype(np.float32)
    if kind == "adversarial":
        x[1, :] = 0  # a zero row
        x[2, :] *= 3.0e4  # an outlier row
        x[0, 3], x[0, 7] = np.nan, np.inf
        w[3, 5] = 6.0e3
        w[4, ::2] = 3.0e38  # saturating
        dy[0, 1], dy[2, :] = -np.inf, 0
    return {"x": bf16(x), "w": bf16(w), "dy": bf16(dy), "bias": bf16(rng.standard_normal(n))}


READS = {"fprop": ("x", "w"), "dgrad": ("dy", "w"), "wgrad": ("dy", "x")}
PASSES = [(n, p) for n in NAMED for p in json.loads(cli("contract", "show", n, "--json").stdout)["passes"]]


@pytest.mark.parametrize("name,pass_name", PASSES, ids=[f"{n}-{p}" for n, p in PASSES])
@pytest.mark.parametrize("kind", ["random", "adversarial"])
def test_run_writes_the_command_lines_bytes(tmp_path, name, pass_name, kind):
    m, n, k = 5, 32, 256
    arrays = layer_inputs(kind, m, n, k, seed=len(name) * 7 + len(pass_name))
    spec = lowbit.contract.show(name)["passes"][pass_name]
    used = list(READS[pass_name]) + (["bias"] if any(s["step"] == "bias" for s in spec["epilogue"]) else [])
    args = ["contract", "run", "--contract", name, "--pass", pass_name, "--sr-seed", "3", "--out", tmp_path / "run"]
    storage = lowbit.contract.show(name)["storage"]
    stored = {}
    for t in used:
        np.save(tmp_path / f"{t}.npy", arrays[t].view(np.uint16))  # bf16 files hold their bits as '<u2'
        if isinstance(storage.get(t), dict):
            # Stored already quantized: its parts made by `lowbit quantize` with the storage's scheme, given to
            # both as they are (u8 codes and e4m3 scale codes, the f32 tensor scale).
            q = tmp_path / f"stored-{t}"
            cli("quantize", "--in", tmp_path / f"{t}.npy", "--in-format", "bf16", "--scheme",
                storage[t]["quantized"]["quantization_format"], "--out", q)
            for part in ("codes", "scales", "tensor_scale"):
                if (q / f"{part}.npy").exists():
                    stored[f"{t}.{part}"] = np.load(q / f"{part}.npy")
                    args += [f"--{t}-{part.replace('_', '-')}", q / f"{part}.npy"]
            continue
        args += [f"--{t}", tmp_path / f"{t}.npy"]
    used = [t for t in used if f"{t}.codes" not in stored]
    cli(*args)
    r = lowbit.contract.run(name, pass_=pass_name, sr_seed=3, stored=stored, **{t: arrays[t] for t in used})
    assert r.contract == name and r.pass_ == pass_name
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert [e["path"] for e in manifest["stages"]] == [f"{s.key}.npy" for s in r.stages]
    assert [e["format"] for e in manifest["stages"]] == [s.format for s in r.stages]
    first_operand = "x" if pass_name == "fprop" else "dy"
    assert {f"{first_operand}.quantized.codes", "accumulator", "output"} <= set(r.keys())
    for e, s in zip(manifest["stages"], r.stages):
        want = np.load(tmp_path / "run" / e["path"])
        assert want.shape == s.array.shape, e["path"]
        assert want.tobytes() == np.ascontiguousarray(s.array).tobytes(), e["path"]
        assert e["description"] == s.description and e["stage"] == s.name and e.get("part", "") == s.part
    # Raw uint16 bit patterns are bf16, as the command line reads '<u2' files.
    raw = lowbit.contract.run(name, pass_=pass_name, sr_seed=3, stored=stored,
                              **{t: arrays[t].view(np.uint16) for t in used})
    assert raw["output"].tobytes() == r["output"].tobytes()


# X = [[448, -224, 1, 0]], W = [[1, 2, 4, 448], [-0.5, 0.25, 448, 3]], f32 storage, per-tensor e4m3 (rne,
# satfinite), the exact GEMM, then dequantize with alpha 0.5, clamp to [-3, 50], amax, cast to e4m3 times 8.
#  * Both amaxes are 448 (e4m3's largest finite value), so each scale is fp32(448 / 448) = 1.
#  * X's codes: 448 = 1.75 * 2^8 -> 0x7e; -224 = -1.75 * 2^7 -> 0xf6; 1 -> 0x38; 0 -> 0x00.
#    W's codes: 1 -> 0x38, 2 -> 0x40, 4 -> 0x48, 448 -> 0x7e; -0.5 -> 0xb0, 0.25 -> 0x28, 448 -> 0x7e,
#    3 = 1.5 * 2 -> 0x44.
#  * accumulator: 448*1 - 224*2 + 1*4 + 0 = 4; 448*-0.5 - 224*0.25 + 448 + 0 = 168.
#  * dequantize: 1 * 1 * 0.5 * acc = [2, 84]; clamp to [-3, 50]: [2, 50]; amax: 50.
#  * cast: [16, 400]; 16 -> 0x58; 400 lies halfway between 384 (0x7c) and 416 (0x7d): ties to even, 0x7c.
HAND = {
    "lowbit_contract": 1,
    "name": "hand",
    "storage": {"x": "f32", "w": "f32"},
    "passes": {
        "fprop": {
            "x": {"quantize": {"quantization_format": "tensor", "element": "e4m3"}},
            "w": {"quantize": {"quantization_format": "tensor", "element": "e4m3"}},
            "procedure": "exact",
            "epilogue": [
                {"step": "dequantize", "alpha": "0x3f000000"},
                {"step": "clamp", "min": -3, "max": 50},
                {"step": "amax"},
                {"step": "cast", "format": "e4m3", "scale": 8, "overflow": "satfinite"},
            ],
        }
    },
}
HAND_X = np.array([[448, -224, 1, 0]], np.float32)
HAND_W = np.array([[1, 2, 4, 448], [-0.5, 0.25, 448, 3]], np.float32)


def u(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}").tolist()


def test_hand_derived_stages():
    r = lowbit.contract.run(HAND, x=HAND_X, w=HAND_W)
    assert r.contract == "hand"
    assert u(r["x.quantized.codes"]) == [[0x7E, 0xF6, 0x38, 0x00]]
    assert u(r["w.quantized.codes"]) == [[0x38, 0x40, 0x48, 0x7E], [0xB0, 0x28, 0x7E, 0x44]]
    assert r["x.quantized.codes"].dtype == ml_dtypes.float8_e4m3fn
    assert u(r["x.quantized.scales"]) == u(r["w.quantized.scales"]) == [[0x3F800000]]  # 1
    assert u(r["accumulator"]) == [[0x40800000, 0x43280000]]  # 4, 168
    assert u(r["epilogue[0].dequantize"]) == [[0x40000000, 0x42A80000]]  # 2, 84
    assert u(r["epilogue[1].clamp"]) == [[0x40000000, 0x42480000]]  # 2, 50
    assert u(r["amax"]) == [0x42480000]  # 50
    assert u(r["output"]) == [[0x58, 0x7C]]
    assert not r["output"].flags.writeable


def test_check_names_stage_index_and_values():
    r = lowbit.contract.run(HAND, x=HAND_X, w=HAND_W)
    good = {"output": np.array([[0x58, 0x7C]], np.uint8)}
    c = lowbit.contract.check(r, good)
    assert c.ok and c.first_stage is None and "output: 2 elements equal" in c.text
    lowbit.contract.assert_matches(r, good)
    # A kernel that rounded 400 up, and whose accumulator lost 168's low bit.
    bad = {"output.npy": np.array([[0x58, 0x7D]], np.uint8),
           "accumulator": np.array([[4, 168.0001]], np.float32)}
    c = lowbit.contract.check(r, bad)
    assert not c.ok and c.first_stage == "accumulator"
    assert "accumulator[0, 1]: expected 0x43280000 (168), actual 0x43280007" in c.text
    assert "output[0, 1]: expected 0x7c (384), actual 0x7d (416)" in c.text
    out = next(s for s in c.stages if s.key == "output")
    assert (out.compared, out.differing, out.first[0].index) == (2, 1, (0, 1))
    with pytest.raises(AssertionError, match=r"first differing stage accumulator"):
        lowbit.contract.assert_matches(r, bad)
    # Nothing of the output compared, another dtype, another shape, an unknown stage.
    c = lowbit.contract.check(r, {"accumulator": r["accumulator"]})
    assert not c.ok and "output was not compared" in c.text
    c = lowbit.contract.check(r, {"output": np.array([[16.0, 384.0]], np.float32)})
    assert not c.ok and c.first_stage == "output" and "output: error:" in c.text
    c = lowbit.contract.check(r, {"output": np.array([0x58, 0x7C], np.uint8)})
    assert not c.ok and "shape (2,), expected (1, 2)" in c.text
    with pytest.raises(ValueError, match=r"results: 'y' is not a stage"):
        lowbit.contract.check(r, {"y": good["output"]})


def test_check_compares_nan_by_its_code():
    x = np.array([[np.nan, 1, 1, 1]], np.float32)
    doc = json.loads(json.dumps(HAND))
    doc["passes"]["fprop"]["x"] = {"quantize": None}  # f32 operands into the exact GEMM
    doc["passes"]["fprop"]["w"] = {"quantize": None}
    doc["passes"]["fprop"]["epilogue"] = [{"step": "cast", "format": "f32"}]
    r = lowbit.contract.run(doc, x=x, w=HAND_W)
    y = np.array(r["output"])
    assert np.isnan(y[0]).all()
    other = y.copy()
    other.view(np.uint32)[0, 0] ^= 1  # another NaN payload
    c = lowbit.contract.check(r, {"output": other})
    assert not c.ok and c.stages[-1].differing == 1


def edited(**changes):
    doc = json.loads(json.dumps(HAND))
    fprop = doc["passes"]["fprop"]
    for k, v in changes.items():
        fprop[k] = v
    return doc


@pytest.mark.parametrize("doc,path", [
    (edited(epilogue=[{"step": "dequantize"}, {"step": "swish"}]), r"passes\.fprop\.epilogue\[1\]\.step"),
    (edited(epilogue=[{"step": "dequantize"}, {"step": "cast", "format": "nosuch"}]),
     r"passes\.fprop\.epilogue\[1\]\.format"),
    (edited(procedure="hopper-fp8-nope"), r"passes\.fprop\.procedure"),
    (edited(bogus=1), r"passes\.fprop\.bogus"),
    ({k: v for k, v in HAND.items() if k != "storage"}, r"storage"),
])
def test_bad_documents_name_the_json_path(doc, path):
    with pytest.raises(ValueError, match=r"^contract: the document: " + path):
        lowbit.contract.run(doc, x=HAND_X, w=HAND_W)
    with pytest.raises(ValueError, match=r"^contract: the document: " + path):
        lowbit.contract.show(doc)


def test_bad_contract_files_and_names(tmp_path):
    with pytest.raises(ValueError, match=r"^contract: 'te-nope@sm90' is neither a named contract"):
        lowbit.contract.show("te-nope@sm90")
    p = tmp_path / "broken.json"
    p.write_text('{"lowbit_contract": 1,')
    with pytest.raises(ValueError, match=r"^contract: '.*broken\.json': malformed JSON at byte"):
        lowbit.contract.show(p)
    with pytest.raises(TypeError, match=r"^contract: expected a contract name"):
        lowbit.contract.show(3)


def test_bad_inputs_name_the_argument():
    x, w = bf16(np.ones((2, 128))), bf16(np.ones((4, 128)))
    bias = bf16(np.zeros(4))
    with pytest.raises(ValueError, match=r"^dy: "):  # dgrad reads dY, which is missing
        lowbit.contract.run("te-current@sm90", w=w, pass_="dgrad")
    with pytest.raises(ValueError, match=r"^x: .*f32"):  # the contract stores bf16
        lowbit.contract.run("te-current@sm90", x=np.ones((2, 128), np.float32), w=w, bias=bias)
    with pytest.raises(ValueError, match=r"^w: "):  # K does not agree
        lowbit.contract.run("te-current@sm90", x=x, w=bf16(np.ones((4, 64))), bias=bias)
    with pytest.raises(ValueError, match=r"^bias: "):  # the fprop epilogue's bias step needs it
        lowbit.contract.run("te-current@sm90", x=x, w=w)
    with pytest.raises(ValueError, match=r"^x: shape \(2, 2, 64\) is 3-D"):
        lowbit.contract.run("te-current@sm90", x=bf16(np.ones((2, 2, 64))), w=w, bias=bias)
    with pytest.raises(ValueError, match=r"^pass_: unknown 'bprop'"):
        lowbit.contract.run("te-current@sm90", x=x, w=w, bias=bias, pass_="bprop")
    with pytest.raises(ValueError, match=r"^pass_: hand defines no dgrad"):
        lowbit.contract.run(HAND, dy=np.ones((1, 2), np.float32), w=HAND_W, pass_="dgrad")
    with pytest.raises(ValueError, match=r"^sr_seed: "):
        lowbit.contract.run("te-current@sm90", x=x, w=w, bias=bias, sr_seed=-1)


# W stored as per-tensor e4m3 codes [1, 2, -4, 8] with decode scale 0.25 (storage.w.quantized), X = [[1, 2, -3,
# 0.5]] f32 not quantized, the exact GEMM: 1 + 4 + 12 + 4 = 21; dequantize fp32(1 * 0.25) * 21 = 5.25; bf16 0x40a8.
# The stored codes are not those a quantization of W's values would make (their largest is 8, not 448): the
# w.quantized stage equal to them shows they entered unchanged.
STORED = {
    "lowbit_contract": 1,
    "name": "stored",
    "storage": {"x": "f32", "w": {"quantized": {"quantization_format": "tensor", "element": "e4m3"}}},
    "passes": {"fprop": {"x": {"quantize": None}, "w": {"quantize": None}, "procedure": "exact",
                         "epilogue": [{"step": "dequantize"}, {"step": "cast", "format": "bf16"}]}},
}


def test_stored_operand_by_hand():
    codes = np.array([[0x38, 0x40, 0xC8, 0x50]], np.uint8)
    scales = np.array([[0.25]], np.float32)
    r = lowbit.contract.run(STORED, x=np.array([[1, 2, -3, 0.5]], np.float32),
                            stored={"w.codes": codes, "w.scales": scales})
    assert u(r["w.quantized.codes"].reshape(-1)) == [0x38, 0x40, 0xC8, 0x50]
    assert u(r["w.quantized.scales"].reshape(-1)) == [0x3E800000]
    assert u(r["accumulator"].reshape(-1)) == [0x41A80000]
    assert u(r["output"].reshape(-1)) == [0x40A8]
    with pytest.raises(ValueError, match=r"^w.scales: has shape \[2, 1\]"):
        lowbit.contract.run(STORED, x=np.ones((1, 4), np.float32),
                            stored={"w.codes": codes, "w.scales": np.ones((2, 1), np.float32)})
    with pytest.raises(ValueError, match=r"^w.scales: .*missing"):
        lowbit.contract.run(STORED, x=np.ones((1, 4), np.float32), stored={"w.codes": codes})
    with pytest.raises(ValueError, match=r"^stored: 'x.codes' is not a stored part"):
        lowbit.contract.run(STORED, x=np.ones((1, 4), np.float32), stored={"x.codes": codes})
    with pytest.raises(ValueError, match=r"^w: .*stored quantized"):
        lowbit.contract.run(STORED, x=np.ones((1, 4), np.float32), w=np.ones((1, 4), np.float32))


def test_activation_tolerance():
    # gelu (erf form) at 1 and 0.5: 0x3f57625f and 0x3eb103af, the correctly rounded f32 values (mpmath at 400
    # bits, conformance/contract/test_contract_activation.py).  One ulp off passes at tolerance 1, fails at 0.
    def doc(tol):
        return {"lowbit_contract": 1, "name": f"gelu-{tol}", "storage": {"x": "f32", "w": "f32"},
                "passes": {"fprop": {"x": {"quantize": None}, "w": {"quantize": None}, "procedure": "exact",
                                     "epilogue": [{"step": "gelu", "approximation": "erf", "tolerance_ulp": tol}]}}}
    x, w = np.array([[1.0], [0.5]], np.float32), np.ones((1, 1), np.float32)
    kernel = np.array([[0x3F57625F + 1], [0x3EB103AF]], np.uint32).view(np.float32)
    r1 = lowbit.contract.run(doc(1), x=x, w=w)
    assert u(r1["output"].reshape(-1)) == [0x3F57625F, 0x3EB103AF]
    assert r1.stages[-1].tolerance_ulp == 1 and r1.stages[0].tolerance_ulp is None  # the accumulator is exact
    c = lowbit.contract.check(r1, {"output": kernel})
    assert c.ok and "output: 2 elements within tolerance (1 within 1 ulp)" in c.text
    c = lowbit.contract.check(lowbit.contract.run(doc(0), x=x, w=w), {"output": kernel})
    assert not c.ok and c.first_stage == "output" and c.stages[-1].first[0].ulps == 1
    assert "output[0, 0]: expected 0x3f57625f" in c.text and ", 1 ulp" in c.text


def test_delayed_state_as_the_command_line(tmp_path):
    # te-delayed@sm90 from a given state (scales 3 and 0.7): the stages and next_state.json of `contract run
    # --state`, byte for byte and key for key.
    hist = ["0x00000000"] * 7 + ["0x40400000"]
    state = {"layers": {"x": {"history": hist, "scale": "0x40400000"}, "w": {"history": hist, "scale": "0x3f333333"},
                        "dy": {"history": hist, "scale": "0x3f800000", "element": "e5m2"}}}
    (tmp_path / "state.json").write_text(json.dumps(state))
    rng = np.random.default_rng(2)
    arrays = {"x": bf16(rng.standard_normal((3, 64))), "w": bf16(rng.standard_normal((8, 64))),
              "bias": bf16(rng.standard_normal(8))}
    for t, a in arrays.items():
        np.save(tmp_path / f"{t}.npy", a.view(np.uint16))
    cli("contract", "run", "--contract", "te-delayed@sm90", "--x", tmp_path / "x.npy", "--w", tmp_path / "w.npy",
        "--bias", tmp_path / "bias.npy", "--state", tmp_path / "state.json", "--out", tmp_path / "run")
    r = lowbit.contract.run("te-delayed@sm90", state=state, **arrays)
    for s in r.stages:
        assert np.load(tmp_path / "run" / f"{s.key}.npy").tobytes() == np.ascontiguousarray(s.array).tobytes(), s.key
    assert r.next_state == json.loads((tmp_path / "run" / "next_state.json").read_text())
    assert r.next_state["layers"]["dy"]["scale"] == "0x3f800000"  # fprop does not step dY
    with pytest.raises(ValueError, match=r"^state: .*layer 'q'"):
        lowbit.contract.run("te-delayed@sm90", state={"layers": {"q": state["layers"]["x"]}}, **arrays)
    with pytest.raises(ValueError, match=r"^state: .*quantizes no tensor with the delayed scheme"):
        lowbit.contract.run("te-current@sm90", state=state, **arrays)


def test_check_names_what_the_command_lines_check_names(tmp_path):
    # A kernel whose output differs in three elements (one a NaN) and whose accumulator differs in one: the
    # same differing elements, codes and decoded values as `lowbit contract check` prints, and the same verdict.
    arrays = layer_inputs("random", 5, 32, 256, seed=11)
    args = ["contract", "run", "--contract", "te-current@sm90", "--out", tmp_path / "run"]
    for t in ("x", "w", "bias"):
        np.save(tmp_path / f"{t}.npy", arrays[t].view(np.uint16))
        args += [f"--{t}", tmp_path / f"{t}.npy"]
    cli(*args)
    r = lowbit.contract.run("te-current@sm90", x=arrays["x"], w=arrays["w"], bias=arrays["bias"])
    out = np.array(r["output"]).view(np.uint16).copy()
    out[0, 3] ^= 1
    out[2, 31] = 0x7FC0
    out[4, 0] ^= 0x8000
    acc = np.array(r["accumulator"]).copy()
    acc.view(np.uint32)[1, 2] += 1
    (tmp_path / "kernel").mkdir()
    np.save(tmp_path / "kernel" / "output.npy", out)
    np.save(tmp_path / "kernel" / "accumulator.npy", acc)
    p = cli("contract", "check", "--contract", "te-current@sm90", "--inputs", tmp_path / "run", "--results",
            tmp_path / "kernel", check=False)
    assert p.returncode == 1
    c = lowbit.contract.check(r, {"output": out, "accumulator": acc})
    assert not c.ok and c.first_stage == "accumulator"
    details = lambda text: [line for line in text.splitlines() if line.startswith("  ")]
    assert details(c.text) == details(p.stdout.decode()) and len(details(c.text)) == 4
