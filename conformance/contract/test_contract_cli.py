"""`lowbit contract` (issue 21): a small contract whose every stage is derived by hand below; every named
contract's fprop against an independent composition of `lowbit quantize`, `lowbit gemm` and the epilogue steps
restated here in numpy float32 arithmetic (ml_dtypes for the bf16 cast); bad contracts and inputs refused with
exit 2, the JSON path or the argument named, and nothing written.
"""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")


def run(args):
    p = subprocess.run([LOWBIT, *args], capture_output=True, check=False)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def ok(args):
    rc, out, err = run(args)
    assert rc == 0, err
    return out


def stage(d, name):
    return np.load(os.path.join(d, name))


def bits(a):
    return [int(v) for v in np.asarray(a).view(np.uint32 if np.asarray(a).dtype == np.float32 else np.asarray(a).dtype).ravel()]


# ---- a contract derived by hand ----------------------------------------------------------------------------
#
# X = [[448, -224, 1, 0]], W = [[1, 2, 4, 448], [-0.5, 0.25, 448, 3]], f32 storage, per-tensor e4m3 (rne,
# satfinite), the exact GEMM, then dequantize with alpha 0.5, clamp to [-3, 50], amax, cast to e4m3 times 8.
#  * Both amaxes are 448, so each scale is fp32(448 / 448) = 1 and each decode scale 1 (0x3f800000).
#  * X's codes: 448 = 1.75 * 2^8 -> 0x7e; -224 = -1.75 * 2^7 -> 0xf6; 1 -> 0x38; 0 -> 0x00.
#    W's codes: 1 -> 0x38, 2 -> 0x40, 4 -> 0x48, 448 -> 0x7e; -0.5 -> 0xb0, 0.25 -> 0x28, 448 -> 0x7e,
#    3 = 1.5 * 2 -> 0x44.
#  * accumulator: 448*1 - 224*2 + 1*4 + 0 = 4 (0x40800000); 448*-0.5 - 224*0.25 + 448 + 0 = 168 = 1.3125 * 2^7
#    (0x43280000).
#  * dequantize: fp32(fp32(1 * 1) * 0.5) * acc = [2, 84]: 0x40000000, 84 = 1.3125 * 2^6 -> 0x42a80000.
#  * clamp: [2, 50]: 50 = 1.5625 * 2^5 -> 0x42480000.  amax: 50 (0x42480000).
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


def to_bf16_bits(a):
    # bf16 bit patterns, rounded to nearest even (NaN kept quiet): the inputs' storage.
    b = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(a, dtype=np.float32))
    r[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return str(p)


def hand_inputs(tmp_path):
    x = np.array([[448, -224, 1, 0]], dtype=np.float32)
    w = np.array([[1, 2, 4, 448], [-0.5, 0.25, 448, 3]], dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    return str(tmp_path / "x.npy"), str(tmp_path / "w.npy")


def test_hand_derived_stages(tmp_path):
    c = write(tmp_path, "hand.json", HAND)
    x, w = hand_inputs(tmp_path)
    out = str(tmp_path / "run")
    ok(["contract", "run", "--contract", c, "--x", x, "--w", w, "--out", out])
    assert bits(stage(out, "x.quantized.codes.npy")) == [0x7E, 0xF6, 0x38, 0x00]
    assert bits(stage(out, "x.quantized.scales.npy")) == [0x3F800000]
    assert bits(stage(out, "w.quantized.codes.npy")) == [0x38, 0x40, 0x48, 0x7E, 0xB0, 0x28, 0x7E, 0x44]
    assert bits(stage(out, "w.quantized.scales.npy")) == [0x3F800000]
    assert bits(stage(out, "accumulator.npy")) == [0x40800000, 0x43280000]
    assert bits(stage(out, "epilogue[0].dequantize.npy")) == [0x40000000, 0x42A80000]
    assert bits(stage(out, "epilogue[1].clamp.npy")) == [0x40000000, 0x42480000]
    assert bits(stage(out, "amax.npy")) == [0x42480000]
    assert bits(stage(out, "output.npy")) == [0x58, 0x7C]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    names = [(s["stage"], s.get("part")) for s in manifest["stages"]]
    assert names[:4] == [("x.quantized", "codes"), ("x.quantized", "scales"), ("w.quantized", "codes"),
                         ("w.quantized", "scales")]
    assert ("accumulator", None) in names and ("output", None) in names and ("amax", None) in names


def test_check_names_stage_index_and_values(tmp_path):
    c = write(tmp_path, "hand.json", HAND)
    x, w = hand_inputs(tmp_path)
    out, res = tmp_path / "run", tmp_path / "kernel"
    ok(["contract", "run", "--contract", c, "--x", x, "--w", w, "--out", str(out)])
    res.mkdir()
    np.save(res / "output.npy", np.array([[0x58, 0x7C]], dtype=np.uint8))
    rc, text, err = run(["contract", "check", "--contract", c, "--inputs", str(out), "--results", str(res)])
    assert rc == 0, err + text
    # A kernel that rounded 400 up, and whose accumulator lost 168's low bit.
    np.save(res / "output.npy", np.array([[0x58, 0x7D]], dtype=np.uint8))
    np.save(res / "accumulator.npy", np.array([[4, 168.0001]], dtype=np.float32))
    rc, text, _ = run(["contract", "check", "--contract", c, "--inputs", str(out), "--results", str(res)])
    assert rc == 1
    assert "accumulator[0, 1]: expected 0x43280000 (168)" in text
    assert "output[0, 1]: expected 0x7c (384), actual 0x7d (416)" in text
    assert "first differing stage accumulator.npy" in text
    # No output supplied: nothing of the kernel's result compared.
    (res / "output.npy").unlink()
    (res / "accumulator.npy").unlink()
    rc, text, _ = run(["contract", "check", "--contract", c, "--inputs", str(out), "--results", str(res)])
    assert rc == 1 and "output.npy was not compared" in text


# ---- bad input: exit 2, the JSON path or argument named, nothing written ----------------------------------


def refused(tmp_path, doc, *names, extra=()):
    c = write(tmp_path, "bad.json", doc)
    x, w = hand_inputs(tmp_path)
    out = tmp_path / "never"
    rc, stdout, err = run(["contract", "run", "--contract", c, "--x", x, "--w", w, *extra, "--out", str(out)])
    assert rc == 2, err
    for n in names:
        assert n in err, f"{n!r} not in {err}"
    assert not out.exists()
    assert stdout == ""


def edited(**changes):
    doc = json.loads(json.dumps(HAND))
    for path, value in changes.items():
        node = doc
        keys = path.split("/")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        last = keys[-1]
        if value is None:
            del node[int(last) if last.isdigit() else last]
        else:
            node[int(last) if last.isdigit() else last] = value
    return doc


def test_unknown_step(tmp_path):
    refused(tmp_path, edited(**{"passes/fprop/epilogue/1/step": "swish"}), "passes.fprop.epilogue[1].step", "swish")


def test_unknown_cast_format(tmp_path):
    refused(tmp_path, edited(**{"passes/fprop/epilogue/3/format": "nosuch8"}), "passes.fprop.epilogue[3].format")


def test_unknown_key(tmp_path):
    refused(tmp_path, edited(**{"passes/fprop/epilogue/2/format": "f32"}), "passes.fprop.epilogue[2].format",
            "takes no")


def test_procedure_that_cannot_take_the_format(tmp_path):
    doc = edited(**{"passes/fprop/procedure": "hopper-fp8",
                    "passes/fprop/x/quantize/element": "e2m1"})
    refused(tmp_path, doc, "passes.fprop.x.quantize", "hopper-fp8", "e2m1")


def test_block_scales_into_a_procedure_without_them(tmp_path):
    doc = edited(**{"passes/fprop/procedure": "hopper-fp8",
                    "passes/fprop/x/quantize": {"quantization_format": "mx", "element": "e4m3"}})
    refused(tmp_path, doc, "passes.fprop.x.quantize", "takes no block scales")


def test_missing_dequantize(tmp_path):
    refused(tmp_path, edited(**{"passes/fprop/epilogue/0": None}), "passes.fprop.epilogue", "dequantize")


def test_bad_recipe_field(tmp_path):
    refused(tmp_path, edited(**{"passes/fprop/w/quantize/scale_rule": "rceil"}), "passes.fprop.w.quantize.scale_rule")


def test_te_hadamard_needs_bf16_storage(tmp_path):
    # TE's transform reads bf16 tensors; HAND stores X as f32.
    doc = edited(**{"passes/fprop/procedure": "blackwell-mxf4nvf4", "passes/fprop/epilogue/0": None,
                    "passes/fprop/x/quantize": {"quantization_format": "nvfp4", "hadamard": "te-bf16"},
                    "passes/fprop/w/quantize": {"quantization_format": "nvfp4", "hadamard": "te-bf16"}})
    refused(tmp_path, doc, "passes.fprop.x.quantize.hadamard", "te-bf16 reads bf16 values; storage.x is f32")


def test_unknown_hadamard(tmp_path):
    doc = edited(**{"passes/fprop/x/quantize": {"quantization_format": "nvfp4", "hadamard": "bf16"}})
    refused(tmp_path, doc, "passes.fprop.x.quantize.hadamard", "'bf16' is not true, false, none, exact, te-bf16")


def test_mismatched_shapes(tmp_path):
    c = write(tmp_path, "hand.json", HAND)
    x, _ = hand_inputs(tmp_path)
    np.save(tmp_path / "w5.npy", np.ones((2, 5), dtype=np.float32))
    out = tmp_path / "never"
    rc, _, err = run(["contract", "run", "--contract", c, "--x", x, "--w", str(tmp_path / "w5.npy"), "--out", str(out)])
    assert rc == 2 and "--w:" in err and "K" in err
    assert not out.exists()


def test_missing_input_for_the_pass(tmp_path):
    np.save(tmp_path / "w.npy", to_bf16_bits(np.ones((2, 4))))
    out = tmp_path / "never"
    rc, _, err = run(["contract", "run", "--contract", "te-current@sm90", "--pass", "dgrad", "--w",
                      str(tmp_path / "w.npy"), "--out", str(out)])
    assert rc == 2 and "--dy:" in err and "missing" in err
    assert not out.exists()


def test_storage_mismatch(tmp_path):
    x, w = hand_inputs(tmp_path)  # f32, but te-current stores bf16
    out = tmp_path / "never"
    rc, _, err = run(["contract", "run", "--contract", "te-current@sm90", "--x", x, "--w", w, "--out", str(out)])
    assert rc == 2 and "--x:" in err and "bf16" in err
    assert not out.exists()


def test_pass_the_contract_does_not_define(tmp_path):
    x, w = hand_inputs(tmp_path)
    out = tmp_path / "never"
    rc, _, err = run(["contract", "run", "--contract", "torchao-nvfp4@sm100", "--pass", "wgrad", "--out", str(out)])
    assert rc == 2 and "--pass:" in err and "defines no wgrad" in err
    assert not out.exists()


# ---- an operand stored already quantized, derived by hand ----------------------------------------------------
#
# W is stored as per-tensor e4m3 codes with its decode scale (storage.w.quantized: a serving checkpoint's FP8
# weight and weight_scale); X is f32, not quantized; the exact GEMM, dequantize, cast to bf16.
#  * W's codes [[0x38, 0x40, 0xc8, 0x50]] are [1, 2, -4, 8] (e4m3: bias 7; 0x50 = 2^(10-7)), scale 0.25
#    (0x3e800000).  The largest code is 8, not 448: quantizing W's values (0.25, 0.5, -1, 2) again would scale
#    them to 448 and write other codes, so the stage w.quantized equal to the inputs shows none was made.
#  * X = [[1, 2, -3, 0.5]]: accumulator 1 + 4 + 12 + 4 = 21 (0x41a80000); dequantize fp32(1 * 0.25) * 21 = 5.25
#    (1.3125 * 2^2: 0x40a80000); bf16 keeps it exactly: 0x40a8.
STORED = {
    "lowbit_contract": 1,
    "name": "stored",
    "storage": {"x": "f32", "w": {"quantized": {"quantization_format": "tensor", "element": "e4m3"}}},
    "passes": {"fprop": {"x": {"quantize": None}, "w": {"quantize": None}, "procedure": "exact",
                         "epilogue": [{"step": "dequantize"}, {"step": "cast", "format": "bf16"}]}},
}


def stored_inputs(tmp_path, codes=((0x38, 0x40, 0xC8, 0x50),), scales=((0.25,),), codes_dtype=np.uint8):
    np.save(tmp_path / "x.npy", np.array([[1, 2, -3, 0.5]], dtype=np.float32))
    np.save(tmp_path / "wc.npy", np.array(codes, dtype=codes_dtype))
    np.save(tmp_path / "ws.npy", np.array(scales, dtype=np.float32))
    return ["--x", str(tmp_path / "x.npy"), "--w-codes", str(tmp_path / "wc.npy"), "--w-scales",
            str(tmp_path / "ws.npy")]


def test_stored_operand_enters_unchanged(tmp_path):
    c = write(tmp_path, "stored.json", STORED)
    out = str(tmp_path / "run")
    ok(["contract", "run", "--contract", c, *stored_inputs(tmp_path), "--out", out])
    assert bits(stage(out, "w.quantized.codes.npy")) == [0x38, 0x40, 0xC8, 0x50]
    assert bits(stage(out, "w.quantized.scales.npy")) == [0x3E800000]
    assert bits(stage(out, "accumulator.npy")) == [0x41A80000]
    assert bits(stage(out, "epilogue[0].dequantize.npy")) == [0x40A80000]
    assert bits(stage(out, "output.npy")) == [0x40A8]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert [(e["name"], e["format"]) for e in manifest["inputs"]] == [("x", "f32"), ("w.codes", "e4m3"),
                                                                      ("w.scales", "f32")]
    assert not (tmp_path / "run" / "x.quantized.codes.npy").exists()  # X is not quantized


def stored_refused(tmp_path, doc, args, *names):
    c = write(tmp_path, "bad.json", doc)
    out = tmp_path / "never"
    rc, stdout, err = run(["contract", "run", "--contract", c, *args, "--out", str(out)])
    assert rc == 2, err
    for n in names:
        assert n in err, f"{n!r} not in {err}"
    assert not out.exists() and stdout == ""


def test_stored_scales_that_do_not_fit_the_codes(tmp_path):
    stored_refused(tmp_path, STORED, stored_inputs(tmp_path, scales=((0.25,), (0.5,))), "--w-scales:",
                   "has shape [2, 1]", "[1, 1] scales")


def test_stored_codes_of_another_dtype(tmp_path):
    stored_refused(tmp_path, STORED, stored_inputs(tmp_path, codes_dtype=np.float32), "--w-codes:", "'<f4'",
                   "'|u1'")


def test_stored_code_out_of_range(tmp_path):
    doc = json.loads(json.dumps(STORED))
    doc["storage"]["w"]["quantized"] = {"quantization_format": "nvfp4"}
    doc["passes"]["fprop"]["procedure"] = "blackwell-mxf4nvf4"
    doc["passes"]["fprop"]["x"]["quantize"] = {"quantization_format": "nvfp4"}
    x = np.ones((1, 16), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "wc.npy", np.full((1, 16), 0x10, dtype=np.uint8))  # e2m1 has 4 bits
    np.save(tmp_path / "ws.npy", np.full((1, 1), 0x38, dtype=np.uint8))
    np.save(tmp_path / "wt.npy", np.ones(1, dtype=np.float32))
    args = ["--x", str(tmp_path / "x.npy"), "--w-codes", str(tmp_path / "wc.npy"), "--w-scales",
            str(tmp_path / "ws.npy"), "--w-tensor-scale", str(tmp_path / "wt.npy")]
    stored_refused(tmp_path, doc, args, "--w-codes:", "element 0", "not a code of e2m1")
    # Without the tensor scale NVFP4 stores: missing, named.
    stored_refused(tmp_path, doc, args[:-2], "--w-tensor-scale:", "missing")


def test_stored_operand_needs_its_parts_not_the_tensor(tmp_path):
    np.save(tmp_path / "w.npy", np.ones((1, 4), dtype=np.float32))
    stored_refused(tmp_path, STORED, stored_inputs(tmp_path)[:2] + ["--w", str(tmp_path / "w.npy")], "--w:",
                   "stored quantized")
    stored_refused(tmp_path, STORED, stored_inputs(tmp_path)[:4], "--w-scales:", "missing")
    # A tensor scale the per-tensor scheme does not store.
    np.save(tmp_path / "wt.npy", np.ones(1, dtype=np.float32))
    stored_refused(tmp_path, STORED, stored_inputs(tmp_path) + ["--w-tensor-scale", str(tmp_path / "wt.npy")],
                   "--w-tensor-scale:", "stores no tensor_scale")


def test_stored_documents_refused_by_path(tmp_path):
    args = stored_inputs(tmp_path)
    doc = json.loads(json.dumps(STORED))
    doc["passes"]["fprop"]["w"]["quantize"] = {"quantization_format": "tensor", "element": "e4m3"}
    stored_refused(tmp_path, doc, args, "passes.fprop.w.quantize", "give \"quantize\": null")
    doc = json.loads(json.dumps(STORED))
    doc["storage"]["w"]["quantized"]["element"] = "e2m1"
    doc["passes"]["fprop"]["x"]["quantize"] = {"quantization_format": "tensor", "element": "e4m3"}
    doc["passes"]["fprop"]["procedure"] = "hopper-fp8"
    stored_refused(tmp_path, doc, args, "passes.fprop.w.quantize", "not e2m1 (stored: storage.w)")
    doc = json.loads(json.dumps(STORED))
    doc["storage"]["w"]["quantized"] = {"quantization_format": "nvfp4", "variant": "compressed-tensors"}
    stored_refused(tmp_path, doc, args, "storage.w.quantized.variant", "reciprocal")
    doc = json.loads(json.dumps(STORED))
    doc["storage"]["w"]["quantized"] = {"quantization_format": "tensor", "element": "e4m3", "rounding": "sr-a",
                                        "sr_bits": 8}
    stored_refused(tmp_path, doc, args, "storage.w.quantized.rounding")
    # dgrad reads Wᵀ: block scales along W's rows do not transpose.
    doc = json.loads(json.dumps(STORED))
    doc["storage"] = {"w": {"quantized": {"quantization_format": "mx", "element": "e4m3"}}, "dy": "f32"}
    doc["passes"] = {"dgrad": {"dy": {"quantize": None}, "w": {"quantize": None}, "procedure": "exact",
                               "epilogue": []}}
    stored_refused(tmp_path, doc, args, "passes.dgrad.w", "only a per-tensor scale transposes")


# ---- TE delayed scaling: the state in, the next state out ---------------------------------------------------
#
# X = [[224, -112, 1, 0]] (bf16), per-tensor delayed e4m3 (TE DelayedScaling, margin 0, algorithm max).
#  * Step 1, no --state: TE's first step, scale 1 and 1024 zero amaxes.  Codes at scale 1: 224 = 1.75 * 2^7 ->
#    0x76, -112 -> 0xee, 1 -> 0x38, 0 -> 0x00; the decode scale fp32(1 / 1) = 0x3f800000.  The update records
#    amax 224 in slot 0, takes the next scale from the history's max, fp32(448 / 224) = 2 (0x40000000), and
#    rolls the history by one (torch.roll(-1) in delayed_scaling.cu): 224 (0x43600000) lands in slot 1023.
#  * Step 2 from that state: X times 2: 448 -> 0x7e, -224 -> 0xf6, 2 -> 0x40; decode scale 0.5 (0x3f000000);
#    the next history holds 224 in slots 1022 and 1023, the next scale is 2 again.
DELAYED = {
    "lowbit_contract": 1,
    "name": "delayed",
    "storage": {"x": "bf16", "w": "bf16"},
    "passes": {"fprop": {"x": {"quantize": {"quantization_format": "delayed", "element": "e4m3"}},
                         "w": {"quantize": None}, "procedure": "exact",
                         "epilogue": [{"step": "dequantize"}, {"step": "cast", "format": "f32"}]}},
}


def test_delayed_state_in_and_out(tmp_path):
    c = write(tmp_path, "delayed.json", DELAYED)
    np.save(tmp_path / "x.npy", to_bf16_bits(np.array([[224, -112, 1, 0]])))
    np.save(tmp_path / "w.npy", to_bf16_bits(np.array([[1, 0, 0, 0]])))
    base = ["contract", "run", "--contract", c, "--x", str(tmp_path / "x.npy"), "--w", str(tmp_path / "w.npy")]
    ok([*base, "--out", str(tmp_path / "s1")])
    s1 = str(tmp_path / "s1")
    assert bits(stage(s1, "x.quantized.codes.npy")) == [0x76, 0xEE, 0x38, 0x00]
    assert bits(stage(s1, "x.quantized.scales.npy")) == [0x3F800000]
    assert bits(stage(s1, "x.state.scale.npy")) == [0x40000000]
    h = bits(stage(s1, "x.state.history.npy"))
    assert len(h) == 1024 and h[1023] == 0x43600000 and not any(h[:1023])
    nxt = json.loads((tmp_path / "s1" / "next_state.json").read_text())
    assert nxt["layers"]["x"]["scale"] == "0x40000000" and nxt["layers"]["x"]["element"] == "e4m3"
    assert json.loads((tmp_path / "s1" / "manifest.json").read_text())["state"] is None
    ok([*base, "--state", str(tmp_path / "s1" / "next_state.json"), "--out", str(tmp_path / "s2")])
    s2 = str(tmp_path / "s2")
    assert bits(stage(s2, "x.quantized.codes.npy")) == [0x7E, 0xF6, 0x40, 0x00]
    assert bits(stage(s2, "x.quantized.scales.npy")) == [0x3F000000]
    h = bits(stage(s2, "x.state.history.npy"))
    assert h[1022] == h[1023] == 0x43600000 and not any(h[:1022])
    assert bits(stage(s2, "x.state.scale.npy")) == [0x40000000]
    # The kernel's updated state is a stage like any other: a wrong next scale is named.
    k = tmp_path / "kernel"
    k.mkdir()
    shutil.copy(tmp_path / "s2" / "output.npy", k / "output.npy")
    np.save(k / "x.state.scale.npy", np.array([1.0], np.float32))
    rc, out, _ = run(["contract", "check", "--contract", c, "--inputs", s2, "--results", str(k)])
    assert rc == 1 and "x.state.scale[0]: expected 0x40000000 (2), actual 0x3f800000 (1)" in out, out


def test_delayed_state_refusals(tmp_path):
    c = write(tmp_path, "delayed.json", DELAYED)
    np.save(tmp_path / "x.npy", to_bf16_bits(np.ones((1, 4))))
    base = ["contract", "run", "--x", str(tmp_path / "x.npy"), "--w", str(tmp_path / "x.npy")]
    (tmp_path / "bad.json").write_text(json.dumps({"layers": {"q": {"history": ["0x00000000"], "scale": "0x3f800000"}}}))
    rc, _, err = run([*base, "--contract", c, "--state", str(tmp_path / "bad.json"), "--out", str(tmp_path / "n1")])
    assert rc == 2 and "--state:" in err and "layer 'q'" in err and not (tmp_path / "n1").exists(), err
    np.save(tmp_path / "w.npy", to_bf16_bits(np.ones((2, 4))))
    np.save(tmp_path / "b.npy", to_bf16_bits(np.ones(2)))
    (tmp_path / "good.json").write_text(json.dumps({"layers": {"x": {"history": ["0x00000000"], "scale": "0x3f800000"}}}))
    rc, _, err = run(["contract", "run", "--contract", "te-current@sm90", "--x", str(tmp_path / "x.npy"), "--w",
                      str(tmp_path / "w.npy"), "--bias", str(tmp_path / "b.npy"), "--state",
                      str(tmp_path / "good.json"), "--out", str(tmp_path / "n2")])
    assert rc == 2 and "--state:" in err and "quantizes no tensor with the delayed scheme" in err, err
    assert not (tmp_path / "n2").exists()


@pytest.mark.parametrize("pass_name", ["fprop", "dgrad", "wgrad"])
def test_te_delayed_with_a_state_equals_composition(tmp_path, pass_name):
    # Each tensor's state given (a training state's layers x, w, dy; histories not all zero, scales not 1), the
    # operands quantized by `lowbit quantize --scheme delayed --state` from the same one-layer states.
    contract = json.loads(ok(["contract", "show", "te-delayed@sm90", "--json"]))
    rng = np.random.default_rng(11)
    layers = {}
    for t, scale in (("x", 3.5), ("w", 200.0), ("dy", 65536.0)):
        hist = np.zeros(16, np.float32)
        hist[3] = rng.uniform(1, 5)
        layers[t] = {"history": [f"{int(v):#010x}" for v in hist.view(np.uint32)],
                     "scale": f"{int(np.float32(scale).view(np.uint32)):#010x}", "algorithm": "max", "margin": 0}
    (tmp_path / "state.json").write_text(json.dumps({"layers": layers}))
    m, n, k = 5, 7, 64
    x, w = inputs("random", m, n, k, rng)
    dy = to_bf16_bits(rng.standard_normal((m, n)) * 1e-3)
    files = {}
    for t, a in (("x", x), ("w", w), ("dy", dy), ("bias", to_bf16_bits(rng.standard_normal(n)))):
        files[t] = str(tmp_path / f"{t}.npy")
        np.save(files[t], a)
    reads = {"fprop": ("x", "w"), "dgrad": ("dy", "w"), "wgrad": ("dy", "x")}[pass_name]
    args = ["contract", "run", "--contract", "te-delayed@sm90", "--pass", pass_name, "--state",
            str(tmp_path / "state.json"), "--out", str(tmp_path / "run")]
    for t in reads + (("bias",) if pass_name == "fprop" else ()):
        args += [f"--{t}", files[t]]
    ok(args)
    # The composition: each operand's one-layer state file for quantize --state (which steps it in place).
    fp = contract["passes"][pass_name]
    (ta, a_t), (tb, b_t) = OPERANDS[pass_name]
    got_q = {}
    for role, t, tr in (("qa", ta, a_t), ("qb", tb, b_t)):
        st = tmp_path / f"{role}-state.json"
        st.write_text(json.dumps(layers[t]))
        codes, scales, _ = quantize(tmp_path, role, along_k(tmp_path, files, t, tr), fp[t]["quantize"], str(st))
        got_q[t] = (codes, scales, json.loads(st.read_text()))
        assert (np.load(tmp_path / "run" / f"{t}.quantized.codes.npy") == codes).all()
        assert (np.load(tmp_path / "run" / f"{t}.quantized.scales.npy") == scales).all()
        # The stepped state is quantize --state's, slot for slot.
        want_hist = [int(h, 16) for h in got_q[t][2]["history"]]
        assert bits(np.load(tmp_path / "run" / f"{t}.state.history.npy")) == want_hist
        assert bits(np.load(tmp_path / "run" / f"{t}.state.scale.npy")) == [int(got_q[t][2]["scale"], 16)]
    nxt = json.loads((tmp_path / "run" / "next_state.json").read_text())["layers"]
    untouched = ({"x", "w", "dy"} - set(reads)).pop()
    assert nxt[untouched]["scale"] == layers[untouched]["scale"]  # carried unchanged


# ---- named contracts' fprop against an independent composition ---------------------------------------------
ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed (pip install -r requirements.txt)")

NAMED = [line.split("\t")[0] for line in ok(["contract", "list"]).splitlines()]


def test_list_and_show():
    assert "te-current@sm90" in NAMED and "deepseek-v3@sm90" in NAMED
    for n in NAMED:
        doc = json.loads(ok(["contract", "show", n, "--json"]))
        assert doc["name"] == n


def inputs(kind, m, n, k, rng):
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    if kind == "zeros":
        x[1, :] = 0
        w[:, :] = np.where(np.arange(k) < 32, 0, w)
    elif kind == "outlier":
        x[2, :] *= 3.0e4
        w[3, 5] = 6.0e3
    elif kind == "saturating":
        x[0, :] = 3.0e38
        x[3, ::2] = -3.0e38
    elif kind == "nonfinite":
        x[0, 3] = np.nan
        x[1, 7] = np.inf
        w[2, 9] = -np.inf
    return to_bf16_bits(x), to_bf16_bits(w)


FLAG = {"quantization_format": "--scheme", "element": "--element", "block_size": "--block",
        "scale_rule": "--scale-rule", "scale_format": "--scale-format", "nonfinite": "--nonfinite",
        "variant": "--variant", "zero_scale": "--zero-scale", "amax_nan": "--amax-nan", "profile": "--profile",
        "rounding": "--rounding", "sr_bits": "--sr-bits"}
SR_SEED = 1


def quantize(tmp, name, src, recipe, state=None):
    args = ["quantize", "--in", src, "--in-format", "bf16", "--out", str(tmp / name)]
    if state:
        args += ["--state", state]  # the delayed scheme's state (quantize --state's one-layer JSON), stepped there
    for key, value in recipe.items():
        if key == "eps":
            continue  # applied to the scales below
        if key == "hadamard":
            args += [f"--hadamard={value}"]
            continue
        args += [FLAG[key], str(value)]
    if "sr_bits" in recipe:
        args += ["--sr-seed", str(SR_SEED)]  # the seed `contract run --sr-seed` is given below
    ok(args)
    d = tmp / name
    codes = np.load(d / "codes.npy")
    scales = np.load(d / "scales.npy")
    ts = np.load(d / "tensor_scale.npy") if (d / "tensor_scale.npy").exists() else None
    if "eps" in recipe:
        # compute_scale_from_amax (docs/semantics.md §4.1) with amax raised to eps: the decode scale is
        # fp32(1 / fp32(448 / max(amax, eps))), or 1 for an infinite amax (NaN is dropped by the fmaxf amax); the
        # codes are unchanged (an all-zero block has zero codes either way).
        eps = np.uint32(int(recipe["eps"], 16)).view(np.float32)
        vals = np.load(src).astype(np.uint32) << 16
        xv = vals.view(np.float32)
        br = 128 if recipe["quantization_format"] == "block128x128" else 1
        for i in range(scales.shape[0]):
            for j in range(scales.shape[1]):
                blk = np.abs(xv[i * br:(i + 1) * br, j * 128:(j + 1) * 128])
                amax = np.fmax.reduce(blk.ravel(), initial=np.float32(0))
                amax = np.float32(max(amax, eps))
                scales[i, j] = np.float32(1) if np.isinf(amax) else np.float32(1) / (np.float32(448) / amax)
    return codes, scales, ts


def f32_bits(v):
    return np.asarray(v, dtype=np.float32).view(np.uint32)


def gpu(v):
    # The GPU's canonical NaN (gemm.hpp: 0x7fffffff) for every NaN of an f32 operation.
    b = f32_bits(v).copy()
    b[np.isnan(np.asarray(v, dtype=np.float32))] = 0x7FFFFFFF
    return b


# The GEMM operands of each pass (contract.hpp): A and B's rows-along-K form, each a tensor as stored or its
# transpose: fprop X and W, dgrad dY and Wᵀ, wgrad dYᵀ and Xᵀ.
OPERANDS = {"fprop": (("x", False), ("w", False)), "dgrad": (("dy", False), ("w", True)),
            "wgrad": (("dy", True), ("x", True))}


def along_k(tmp, files, tensor, transposed):
    """The file of a tensor in the form its quantizer reads (transposed with numpy where the pass says so)."""
    if not transposed:
        return files[tensor]
    path = tmp / f"{tensor}.T.npy"
    np.save(path, np.ascontiguousarray(np.load(files[tensor]).T))
    return str(path)


def compose(tmp, contract, x_path, w_path, b_path, pass_name="fprop", files=None):
    """A pass of the contract by hand: lowbit quantize on each operand's rows-along-K form, lowbit gemm, then the
    epilogue in numpy f32."""
    fp = contract["passes"][pass_name]
    files = files or {"x": x_path, "w": w_path}
    (ta, a_t), (tb, b_t) = OPERANDS[pass_name]
    fx, fw = fp[ta]["quantize"], fp[tb]["quantize"]
    # An operand stored already quantized (storage.<t>.quantized) enters as stored: its codes and scales are
    # the files `stored_parts` made with lowbit quantize, not quantized again.
    if isinstance(contract["storage"].get(tb), dict):
        fw = contract["storage"][tb]["quantized"]
        wc, ws, wts = [np.load(files[f"{tb}.{p}"]) if f"{tb}.{p}" in files else None
                       for p in ("codes", "scales", "tensor_scale")]
    else:
        wc, ws, wts = quantize(tmp, "qb", along_k(tmp, files, tb, b_t), fw)
    xc, xs, xts = quantize(tmp, "qa", along_k(tmp, files, ta, a_t), fx)
    elem = lambda q: q.get("element", "e2m1" if q["quantization_format"].startswith("nvfp4") else "e4m3")
    np.save(tmp / "a.npy", xc)
    np.save(tmp / "b.npy", np.ascontiguousarray(wc.T))
    args = ["gemm", "--model", fp["procedure"], "--a", str(tmp / "a.npy"), "--b", str(tmp / "b.npy"),
            "--a-format", elem(fx), "--b-format", elem(fw), "--out", str(tmp / "d.npy")]
    scheme = fx["quantization_format"]
    per_tensor = scheme in ("tensor", "delayed")
    if per_tensor and not any(s["step"] == "dequantize" for s in fp["epilogue"]):
        # A promoted procedure multiplies the per-tensor decode scales inside each promotion (docs/contract.md):
        # lowbit gemm's --scale-a / --scale-b on the same procedure.
        hexbits = lambda v: f"{int(np.float32(v).view(np.uint32)):#010x}"
        args += ["--scale-a", hexbits(xs.ravel()[0]), "--scale-b", hexbits(ws.ravel()[0])]
    if not per_tensor:
        # A's scales as the quantizer wrote them (rows x K blocks); B's from W's (N rows x K blocks, or 16x16 /
        # 128x128 tiles), transposed to K blocks x columns, a tile row repeated per column where the MMA reads
        # one scale per column.
        b_sc = ws
        if fw["quantization_format"] == "nvfp4-2d":
            b_sc = np.repeat(ws, 16, axis=0)[: wc.shape[0]]
        np.save(tmp / "as.npy", xs)
        np.save(tmp / "bs.npy", np.ascontiguousarray(b_sc.T))
        fmt = {"hopper-fp8-blockscaled": "f32", "hopper-fp8-blockscaled-1d1d": "f32", "blackwell-mxf8f6f4": "e8m0",
               "blackwell-mxf4nvf4": "ue4m3"}
        args += ["--a-scales", str(tmp / "as.npy"), "--b-scales", str(tmp / "bs.npy"),
                 "--scale-format", fmt[fp["procedure"]]]
    ok(args)
    y = np.load(tmp / "d.npy").astype(np.float32)
    with np.errstate(all="ignore"):
        for s in fp["epilogue"]:
            if s["step"] == "dequantize":
                sa = xs.ravel()[0] if per_tensor else (xts[0] if xts is not None else np.float32(1))
                sb = ws.ravel()[0] if per_tensor else (wts[0] if wts is not None else np.float32(1))
                y = np.float32(np.float32(sa) * np.float32(sb)) * y
            elif s["step"] == "bias":
                bias = (np.load(b_path).astype(np.uint32) << 16).view(np.float32)
                y = y + bias[None, :]
            elif s["step"] == "cast" and s["format"] == "f32":
                return gpu(y)  # f32 into f32: the value, with the canonical NaN
            elif s["step"] == "cast":
                assert s["format"] == "bf16"
                y = gpu(y).view(np.float32)
                out = y.astype(ml_dtypes.bfloat16).view(np.uint16)
                # A NaN casts to 0x7fff, the top bits of the canonical f32 NaN 0x7fffffff (cvt.rn.bf16.f32's
                # result, CUDART_NAN_BF16 in cuda_bf16.h); ml_dtypes writes its own quiet NaN 0x7fc0.
                out[np.isnan(y)] = 0x7FFF
                return out
    raise AssertionError("every named pass ends in a bf16 or f32 cast")


def stored_parts(tmp, contract, t, src):
    """An operand the contract stores already quantized, made from its bf16 values by `lowbit quantize` with the
    storage's recipe (what a checkpoint's exporter writes): {"w.codes": path, ...} and the run's arguments."""
    recipe = contract["storage"][t]["quantized"]
    quantize(tmp, f"stored-{t}", src, recipe)
    files, args = {}, []
    for part in ("codes", "scales", "tensor_scale"):
        path = tmp / f"stored-{t}" / f"{part}.npy"
        if path.exists():
            files[f"{t}.{part}"] = str(path)
            args += [f"--{t}-{part.replace('_', '-')}", str(path)]
    return files, args


def tensor_args(tmp, contract, t, path):
    """`contract run`'s arguments for a tensor given as bf16 values: --t, or a stored operand's parts."""
    if isinstance(contract["storage"].get(t), dict):
        return stored_parts(tmp, contract, t, path)
    return {t: path}, [f"--{t}", path]


@pytest.mark.parametrize("name", NAMED)
@pytest.mark.parametrize("kind", ["random", "zeros", "outlier", "saturating", "nonfinite"])
def test_named_fprop_equals_composition(tmp_path, name, kind):
    contract = json.loads(ok(["contract", "show", name, "--json"]))
    m, n, k = 5, 7, 256
    rng = np.random.default_rng(abs(hash((name, kind))) % 2**32)
    x, w = inputs(kind, m, n, k, rng)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "bias.npy", to_bf16_bits(rng.standard_normal(n)))
    files = {"x": str(tmp_path / "x.npy")}
    w_files, w_args = tensor_args(tmp_path, contract, "w", str(tmp_path / "w.npy"))
    files.update(w_files)
    args = ["contract", "run", "--contract", name, "--x", str(tmp_path / "x.npy"), *w_args,
            "--out", str(tmp_path / "run")]
    has_bias = any(s["step"] == "bias" for s in contract["passes"]["fprop"]["epilogue"])
    if has_bias:
        args += ["--bias", str(tmp_path / "bias.npy")]
    ok(args)
    want = compose(tmp_path, contract, None, None, str(tmp_path / "bias.npy"), files=files)
    got = np.load(tmp_path / "run" / "output.npy")
    assert got.dtype == np.uint16 and got.shape == (m, n)
    diff = np.argwhere(got != want)
    assert diff.size == 0, f"{name} {kind}: first differing element {diff[0]}: {got[tuple(diff[0])]:#06x} vs {want[tuple(diff[0])]:#06x}"


BACKWARD = [(n, p) for n in NAMED for p in ("dgrad", "wgrad")
            if p in json.loads(ok(["contract", "show", n, "--json"]))["passes"]]


@pytest.mark.parametrize("name,pass_name", BACKWARD)
@pytest.mark.parametrize("kind", ["random", "zeros", "outlier", "nonfinite"])
def test_named_backward_equals_composition(tmp_path, name, pass_name, kind):
    # dgrad reduces over N (dY [M, N] times W [N, K]), wgrad over M (dYᵀ [N, M] times X [M, K]); the reduction is
    # 256 long and the other two dimensions odd.  The first operand takes the adversarial rows, the second the
    # adversarial columns (inputs()).  te-nvfp4's wgrad runs TE's bf16 Hadamard transform (--hadamard=te-bf16)
    # and stochastic rounding on dY (the same Philox seed on both sides).
    contract = json.loads(ok(["contract", "show", name, "--json"]))
    m, n, k = (5, 256, 7) if pass_name == "dgrad" else (256, 5, 7)
    rng = np.random.default_rng(abs(hash((name, pass_name, kind))) % 2**32)
    if pass_name == "dgrad":
        dy, w = inputs(kind, m, k, n, rng)  # dY [m, n] as X, W [n, k] drawn as [k, n] and transposed
        arrays = {"dy": dy, "w": np.ascontiguousarray(w.T)}
    else:
        dyt, xt = inputs(kind, n, k, m, rng)  # dYᵀ [n, m] and Xᵀ [k, m], the reduction along their rows
        arrays = {"dy": np.ascontiguousarray(dyt.T), "x": np.ascontiguousarray(xt.T)}
    files = {}
    for t, a in arrays.items():
        files[t] = str(tmp_path / f"{t}.npy")
        np.save(files[t], a)
    args = ["contract", "run", "--contract", name, "--pass", pass_name, "--sr-seed", str(SR_SEED),
            "--out", str(tmp_path / "run")]
    for t in arrays:
        args += [f"--{t}", files[t]]
    ok(args)
    want = compose(tmp_path, contract, None, None, None, pass_name, files)
    got = np.load(tmp_path / "run" / "output.npy")
    if got.dtype == np.float32:
        got = got.view(np.uint32)  # an f32 output (deepseek-v3's wgrad), compared as bits
    assert got.shape == want.shape == ((m, k) if pass_name == "dgrad" else (n, k))
    diff = np.argwhere(got != want)
    assert diff.size == 0, (f"{name} {pass_name} {kind}: first differing element {diff[0]}: "
                            f"{got[tuple(diff[0])]:#06x} vs {want[tuple(diff[0])]:#06x}")


@pytest.mark.parametrize("name", NAMED)
def test_every_pass_runs_at_its_shape(tmp_path, name):
    # dgrad writes dX [M, K], wgrad dW [N, K]; each pass reads only its own inputs.
    contract = json.loads(ok(["contract", "show", name, "--json"]))
    m, n, k = 3, 32, 256
    rng = np.random.default_rng(7)
    files = {}
    for t, shape in {"x": (m, k), "w": (n, k), "dy": (m, n)}.items():
        files[t] = str(tmp_path / f"{t}.npy")
        np.save(files[t], to_bf16_bits(rng.standard_normal(shape)))
    np.save(tmp_path / "bias.npy", to_bf16_bits(rng.standard_normal(n)))
    reads = {"fprop": ("x", "w"), "dgrad": ("dy", "w"), "wgrad": ("dy", "x")}
    shapes = {"fprop": (m, n), "dgrad": (m, k), "wgrad": (n, k)}
    for p, spec in contract["passes"].items():
        args = ["contract", "run", "--contract", name, "--pass", p, "--sr-seed", "1", "--out", str(tmp_path / p)]
        for t in reads[p]:
            args += tensor_args(tmp_path, contract, t, files[t])[1]
        if any(s["step"] == "bias" for s in spec["epilogue"]):
            args += ["--bias", str(tmp_path / "bias.npy")]
        ok(args)
        assert np.load(tmp_path / p / "output.npy").shape == shapes[p], (name, p)


def test_max_bytes_on_the_reading_subcommands():
    for sub in ("show", "run", "check"):
        assert "--max-bytes" in ok(["contract", sub, "--help"])
