"""`lowbit quantize --export` against the exporters' own checkpoints (fixtures/, written by compressed-tensors
0.20.1 and ModelOpt 0.47.0 from fixtures/source): exporting the same source with each recipe gives every
tensor with the dtype, shape and bytes the real exporter wrote, the config fields their loaders read, and a
directory verify-checkpoint reads back identical.  Bad input exits 2 with nothing written.

The activation scales of the static-activation recipes are calibration results, not derived from the weights;
they are taken from the exporter's own checkpoint into the --input-scales file, so every other tensor is
lowbit's own arithmetic compared with the exporter's.
"""
import json
import os
import struct
import subprocess

import pytest

from test_ct_checkpoints import FIXTURES, SOURCE, read_st, write_st

LOWBIT = os.environ.get("LOWBIT", "lowbit")
ATTN = "model.layers.0.self_attn."

# (format, recipe, fixture folder, the input-scale tensor suffix or None)
CASES = [
    ("compressed-tensors", "FP8", "fp8", ".input_scale"),
    ("compressed-tensors", "FP8_DYNAMIC", "fp8_dynamic", None),
    ("compressed-tensors", "FP8_BLOCK", "fp8_block", None),
    ("compressed-tensors", "NVFP4", "nvfp4", ".input_global_scale"),
    ("compressed-tensors", "NVFP4A16", "nvfp4a16", None),
    ("compressed-tensors", "MXFP4A16", "mxfp4a16", None),
    ("modelopt", "FP8", "modelopt_fp8", ".input_scale"),
    ("modelopt", "NVFP4", "modelopt_nvfp4", ".input_scale"),
]
IDS = [c[2] for c in CASES]


def lowbit(*args):
    p = subprocess.run([LOWBIT, *map(str, args)], capture_output=True, check=False)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def input_scales(tmp_path, fixture, suffix):
    """The exporter's own activation scales, as the --input-scales file."""
    tensors, _ = read_st(os.path.join(FIXTURES, fixture, "model.safetensors"))
    picked = {k: v for k, v in tensors.items() if k.endswith(suffix)}
    assert len(picked) == 7
    path = tmp_path / "input_scales.safetensors"
    write_st(path, picked)
    return path


def export(tmp_path, fmt, recipe, fixture, suffix, *extra):
    out = tmp_path / "out"
    args = ["quantize", "--in", SOURCE, "--out", out, "--export", fmt, "--recipe", recipe, *extra]
    if suffix:
        args += ["--input-scales", input_scales(tmp_path, fixture, suffix)]
    rc, stdout, err = lowbit(*args)
    assert rc == 0, stdout + err
    return out


@pytest.mark.parametrize("fmt,recipe,fixture,suffix", CASES, ids=IDS)
def test_every_tensor_is_the_exporters(tmp_path, fmt, recipe, fixture, suffix):
    out = export(tmp_path, fmt, recipe, fixture, suffix)
    ours, our_meta = read_st(out / "model.safetensors")
    theirs, their_meta = read_st(os.path.join(FIXTURES, fixture, "model.safetensors"))
    assert sorted(ours) == sorted(theirs)
    for k in theirs:
        assert ours[k][0] == theirs[k][0], f"{k}: dtype {ours[k][0]}, the exporter's {theirs[k][0]}"
        assert ours[k][1] == theirs[k][1], f"{k}: shape {ours[k][1]}, the exporter's {theirs[k][1]}"
        assert ours[k][2] == theirs[k][2], f"{k}: bytes differ from the exporter's"
    assert our_meta == their_meta == {"format": "pt"}


@pytest.mark.parametrize("fmt,recipe,fixture,suffix", CASES, ids=IDS)
def test_config_fields_the_loaders_read(tmp_path, fmt, recipe, fixture, suffix):
    out = export(tmp_path, fmt, recipe, fixture, suffix)
    ours = json.load(open(out / "config.json"))["quantization_config"]
    theirs = json.load(open(os.path.join(FIXTURES, fixture, "config.json")))["quantization_config"]
    if fmt == "compressed-tensors":
        # vLLM's CompressedTensorsConfig.from_config and compressed-tensors' QuantizationConfig read all of it.
        assert ours == theirs
    else:
        # vLLM's ModelOpt configs and TensorRT-LLM read hf_quant_config.json's "quantization" (quant_algo,
        # kv_cache_quant_algo, group_size, exclude_modules) and config.json's quant_method; ModelOpt's
        # "producer" names ModelOpt itself, which lowbit is not, and no loader reads it.
        theirs.pop("producer")
        assert ours == theirs
        hq = json.load(open(out / "hf_quant_config.json"))
        their_hq = json.load(open(os.path.join(FIXTURES, fixture, "hf_quant_config.json")))
        assert hq == {"quantization": their_hq["quantization"]}


@pytest.mark.parametrize("fmt,recipe,fixture,suffix", CASES, ids=IDS)
def test_export_verifies_identical(tmp_path, fmt, recipe, fixture, suffix):
    out = export(tmp_path, fmt, recipe, fixture, suffix)
    rc, stdout, err = lowbit("verify-checkpoint", "--source", SOURCE, "--quantized", out)
    assert rc == 0, stdout + err
    assert stdout.count(": identical (") == 7, stdout
    assert stdout.endswith(f"{fmt}, 7 tensor(s), 0 differing block(s), identical\n"), stdout


def test_a_second_export_replaces_the_first(tmp_path):
    export(tmp_path, "compressed-tensors", "NVFP4A16", "nvfp4a16", None)
    out = export(tmp_path, "compressed-tensors", "MXFP4A16", "mxfp4a16", None)
    assert sorted(os.listdir(out)) == ["config.json", "lowbit_export.json", "model.safetensors"]
    assert json.load(open(out / "config.json"))["quantization_config"]["format"] == "mxfp4-pack-quantized"


def test_ignore_adds_modules(tmp_path):
    out = export(tmp_path, "compressed-tensors", "FP8_DYNAMIC", "fp8_dynamic", None, "--ignore", "o_proj",
                 "--ignore", "re:mlp\\.down")
    tensors, _ = read_st(out / "model.safetensors")
    source, _ = read_st(os.path.join(SOURCE, "model.safetensors"))
    for m in (ATTN + "o_proj", "model.layers.0.mlp.down_proj"):
        assert tensors[m + ".weight"] == source[m + ".weight"]
        assert m + ".weight_scale" not in tensors
    assert tensors[ATTN + "q_proj.weight"][0] == "F8_E4M3"
    cfg = json.load(open(out / "config.json"))["quantization_config"]
    assert cfg["ignore"] == ["lm_head", "model.layers.0.mlp.down_proj", ATTN + "o_proj"]
    rc, stdout, err = lowbit("verify-checkpoint", "--source", SOURCE, "--quantized", out)
    assert rc == 0 and stdout.count(": identical (") == 5, stdout + err


def test_modelopt_ignore_is_in_exclude_modules(tmp_path):
    # The scale of a module left unquantized is refused (a stray entry), so k_proj's is dropped from the file.
    path = input_scales(tmp_path, "modelopt_nvfp4", ".input_scale")
    tensors, _ = read_st(path)
    del tensors[ATTN + "k_proj.input_scale"]
    write_st(path, tensors)
    out = tmp_path / "out"
    rc, stdout, err = lowbit("quantize", "--in", SOURCE, "--out", out, "--export", "modelopt", "--recipe", "NVFP4",
                             "--ignore", ATTN + "k_proj", "--input-scales", path)
    assert rc == 0, stdout + err
    hq = json.load(open(out / "hf_quant_config.json"))["quantization"]
    assert hq["exclude_modules"] == ["lm_head", "model.embed_tokens", ATTN + "k_proj"]
    tensors, _ = read_st(out / "model.safetensors")
    # q and v still share one weight_scale_2 (their larger amax's), k is copied.
    assert tensors[ATTN + "q_proj.weight_scale_2"][2] == tensors[ATTN + "v_proj.weight_scale_2"][2]
    assert tensors[ATTN + "k_proj.weight"][0] == "BF16"
    rc, stdout, err = lowbit("verify-checkpoint", "--source", SOURCE, "--quantized", out)
    assert rc == 0 and stdout.count(": identical (") == 6, stdout + err


# ---- bad input: exit 2, the argument or key named, nothing written ---------------------------------------


def refused(tmp_path, *args, out=None):
    out = out or tmp_path / "out"
    before = sorted(os.listdir(tmp_path))
    rc, stdout, err = lowbit("quantize", "--in", SOURCE, "--out", out, *args)
    assert rc == 2, stdout + err
    assert stdout == ""
    assert not any(n.startswith(".lowbit-") for n in os.listdir(tmp_path))
    return err, before


def test_unknown_recipe_names_the_choices(tmp_path):
    err, before = refused(tmp_path, "--export", "compressed-tensors", "--recipe", "NVFP8")
    assert "--recipe: 'NVFP8' is not a compressed-tensors preset" in err
    assert "(FP8, FP8_DYNAMIC, FP8_BLOCK, NVFP4, NVFP4A16, MXFP4A16)" in err
    assert sorted(os.listdir(tmp_path)) == before
    err, _ = refused(tmp_path, "--export", "modelopt", "--recipe", "MXFP4A16")
    assert "--recipe: 'MXFP4A16' is not a ModelOpt quant_algo lowbit writes (FP8, NVFP4)" in err
    err, _ = refused(tmp_path, "--export", "fp8-block", "--recipe", "FP8")
    assert "--export: 'fp8-block' is not compressed-tensors, modelopt or gguf" in err


def test_static_activations_need_input_scales(tmp_path):
    err, _ = refused(tmp_path, "--export", "modelopt", "--recipe", "FP8")
    assert "--input-scales: required: modelopt FP8 stores each quantized module's static activation scale" in err
    assert "model.layers.0.mlp.down_proj.input_scale and 6 more" in err
    assert not (tmp_path / "out").exists()


def test_missing_input_scale_entry_is_named(tmp_path):
    path = input_scales(tmp_path, "nvfp4", ".input_global_scale")
    tensors, _ = read_st(path)
    del tensors[ATTN + "v_proj.input_global_scale"]
    write_st(path, tensors)
    err, _ = refused(tmp_path, "--export", "compressed-tensors", "--recipe", "NVFP4", "--input-scales", path)
    assert f'--input-scales: {path}: key "{ATTN}v_proj.input_global_scale": missing' in err
    assert not (tmp_path / "out").exists()


def test_input_scale_of_another_dtype_or_module_is_refused(tmp_path):
    # compressed-tensors FP8 keeps the weight's dtype (BF16); an F32 scale is not what it stores.
    path = input_scales(tmp_path, "modelopt_fp8", ".input_scale")
    err, _ = refused(tmp_path, "--export", "compressed-tensors", "--recipe", "FP8", "--input-scales", path)
    assert "input_scale\": F32 [], not one BF16 value" in err
    tensors, _ = read_st(path)
    tensors["lm_head.input_scale"] = tensors[ATTN + "q_proj.input_scale"]
    write_st(path, tensors)
    err, _ = refused(tmp_path, "--export", "modelopt", "--recipe", "FP8", "--input-scales", path)
    assert 'key "lm_head.input_scale": not the input_scale of a module FP8 quantizes' in err
    err, _ = refused(tmp_path, "--export", "compressed-tensors", "--recipe", "FP8_DYNAMIC", "--input-scales", path)
    assert "--input-scales: FP8_DYNAMIC stores no activation scale" in err


def test_existing_unrelated_folder_is_not_replaced(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    err, _ = refused(tmp_path, "--export", "compressed-tensors", "--recipe", "NVFP4A16", out=out)
    assert err.startswith("lowbit: --out: ") and str(out) in err
    assert os.listdir(out) == ["notes.txt"] and (out / "notes.txt").read_text() == "mine\n"


def test_symlinked_out_is_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "out"
    link.symlink_to(target)
    err, _ = refused(tmp_path, "--export", "compressed-tensors", "--recipe", "NVFP4A16", out=link)
    assert err.startswith("lowbit: --out: ") and "symbolic link" in err
    assert link.is_symlink() and os.listdir(target) == []


def test_unknown_ignore_and_lowbit_recipe_options_are_refused(tmp_path):
    err, _ = refused(tmp_path, "--export", "compressed-tensors", "--recipe", "FP8_BLOCK", "--ignore", "qkv_proj")
    assert "--ignore: 'qkv_proj' names no module with a matrix weight" in err
    err, _ = refused(tmp_path, "--export", "compressed-tensors", "--recipe", "FP8_BLOCK", "--scheme", "block")
    assert "--scheme: --export writes the exporter's own recipe (--recipe)" in err
    err, _ = refused(tmp_path, "--recipe", "FP8_BLOCK", "--scheme", "block")
    assert "--recipe: applies with --export" in err
    assert not (tmp_path / "out").exists()


def test_non_matrix_columns_and_quantized_source_are_refused(tmp_path):
    # A quantized checkpoint is not a source: its config says so, and its F8 weights are named.
    rc, stdout, err = lowbit("quantize", "--in", os.path.join(FIXTURES, "fp8_dynamic"), "--out", tmp_path / "out",
                             "--export", "compressed-tensors", "--recipe", "NVFP4A16")
    assert rc == 2 and 'config.json: key "quantization_config": present: the source is already quantized' in err, err
    rc, stdout, err = lowbit("quantize", "--in", os.path.join(FIXTURES, "fp8_dynamic", "model.safetensors"), "--out",
                             tmp_path / "out", "--export", "compressed-tensors", "--recipe", "NVFP4A16")
    assert rc == 2 and 'key "model.layers.0.mlp.down_proj.weight": dtype F8_E4M3 is not F32, BF16 or F16' in err, err
    # 24 columns do not divide into NVFP4's 16-element groups.
    tensors, meta = read_st(os.path.join(SOURCE, "model.safetensors"))
    dtype, shape, b = tensors[ATTN + "q_proj.weight"]
    tensors[ATTN + "q_proj.weight"] = (dtype, [64, 24], b[: 64 * 24 * 2])
    src = tmp_path / "src.safetensors"
    write_st(src, tensors, meta)
    rc, stdout, err = lowbit("quantize", "--in", src, "--out", tmp_path / "out", "--export", "modelopt", "--recipe",
                             "NVFP4", "--input-scales", input_scales(tmp_path, "modelopt_nvfp4", ".input_scale"))
    assert rc == 2 and f'key "{ATTN}q_proj.weight": 24 columns, not a multiple of NVFP4\'s 16-element group' in err, err
    assert not (tmp_path / "out").exists()


def test_sharded_source_exports_as_one_file(tmp_path):
    tensors, meta = read_st(os.path.join(SOURCE, "model.safetensors"))
    src = tmp_path / "sharded"
    src.mkdir()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:6], "model-00002-of-00002.safetensors": names[6:]}
    for f, keys in shards.items():
        write_st(src / f, {k: tensors[k] for k in keys}, meta)
    (src / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {k: f for f, keys in shards.items() for k in keys}}))
    out = tmp_path / "out"
    rc, stdout, err = lowbit("quantize", "--in", src, "--out", out, "--export", "compressed-tensors", "--recipe",
                             "MXFP4A16")
    assert rc == 0, stdout + err
    ours, _ = read_st(out / "model.safetensors")
    theirs, _ = read_st(os.path.join(FIXTURES, "mxfp4a16", "model.safetensors"))
    assert ours == theirs


@pytest.mark.parametrize("dtype", ["F32", "F16"])
def test_other_source_dtypes_read_back_identical(tmp_path, dtype):
    """An F32 or F16 source: the scales are kept in its dtype (FP8) and the export reads back identical.  The
    exporter's own output for these dtypes is compared in test_export_peer.py."""
    tensors, meta = read_st(os.path.join(SOURCE, "model.safetensors"))

    def widen(b):  # bf16 -> f32 exactly, or -> f16 rounded by Python's half
        vals = [struct.unpack("<f", b"\0\0" + bytes(b[i : i + 2]))[0] for i in range(0, len(b), 2)]
        return struct.pack(f"<{len(vals)}{'f' if dtype == 'F32' else 'e'}", *vals)

    src = tmp_path / "src.safetensors"
    write_st(src, {k: (dtype, shape, widen(b)) for k, (_, shape, b) in tensors.items()}, meta)
    for recipe in ("FP8_DYNAMIC", "FP8_BLOCK", "NVFP4A16"):
        out = tmp_path / recipe
        rc, stdout, err = lowbit("quantize", "--in", src, "--out", out, "--export", "compressed-tensors", "--recipe",
                                 recipe)
        assert rc == 0, stdout + err
        ours, _ = read_st(out / "model.safetensors")
        scale = ours["model.layers.0.self_attn.q_proj.weight_scale"]
        assert scale[0] == (dtype if recipe != "NVFP4A16" else "F8_E4M3")
        rc, stdout, err = lowbit("verify-checkpoint", "--source", src, "--quantized", out)
        assert rc == 0 and stdout.count(": identical (") == 7, stdout + err


def test_f16_mxfp4_scale_underflow_is_refused(tmp_path):
    """compressed-tensors computes MX scales in the weight's dtype; in f16 o_proj's all-zero row would take 1.0
    (0x7f) where lowbit's MX row gives 2^-127 (test_export_peer.py shows compressed-tensors doing it)."""
    tensors, meta = read_st(os.path.join(SOURCE, "model.safetensors"))

    def half(b):  # bf16 -> f16, rounded by Python's half
        vals = [struct.unpack("<f", b"\0\0" + bytes(b[i : i + 2]))[0] for i in range(0, len(b), 2)]
        return struct.pack(f"<{len(vals)}e", *vals)

    src = tmp_path / "src.safetensors"
    write_st(src, {k: ("F16", shape, half(b)) for k, (_, shape, b) in tensors.items()}, meta)
    rc, stdout, err = lowbit("quantize", "--in", src, "--out", tmp_path / "out", "--export", "compressed-tensors",
                             "--recipe", "MXFP4A16")
    assert rc == 2 and not (tmp_path / "out").exists()
    assert f'key "{ATTN}o_proj.weight": block 10: e8m0 scale 0x00 (2^-127) is below f16\'s least subnormal' in err, err


def test_modelopt_nvfp4_fused_input_scales_take_the_largest(tmp_path):
    """ModelOpt's export gives q/k/v (and gate/up) the largest input amax of the group (quant_utils.py
    preprocess_linear_fusion), so one input_scale; FP8 keeps each module's."""
    path = input_scales(tmp_path, "modelopt_nvfp4", ".input_scale")
    tensors, _ = read_st(path)
    planted = {"q_proj": 0.5, "k_proj": 2.0, "v_proj": 1.0}
    for leaf, v in planted.items():
        tensors[ATTN + leaf + ".input_scale"] = ("F32", [], bytearray(struct.pack("<f", v)))
    write_st(path, tensors)
    for algo, expected in (("NVFP4", {leaf: 2.0 for leaf in planted}), ("FP8", planted)):
        out = tmp_path / algo
        rc, stdout, err = lowbit("quantize", "--in", SOURCE, "--out", out, "--export", "modelopt", "--recipe", algo,
                                 "--input-scales", path)
        assert rc == 0, stdout + err
        ours, _ = read_st(out / "model.safetensors")
        for leaf, v in expected.items():
            assert ours[ATTN + leaf + ".input_scale"] == ("F32", [], bytearray(struct.pack("<f", v)))
        rc, stdout, err = lowbit("verify-checkpoint", "--source", SOURCE, "--quantized", out)
        assert rc == 0, stdout + err


# ---- --export gguf -------------------------------------------------------------------------------------------

def test_gguf_export_is_gguf_pys_mxfp4(tmp_path):
    # Every projection and the output head as MXFP4 under gguf-py's Llama names: each tensor's 17-byte blocks are
    # the bytes gguf-py's own quantizer wrote into fixtures/gguf/llama_mxfp4.gguf for the same weights, and the
    # file verifies identical; the norms and the embedding stay in the source's dtype.
    from test_gguf_checkpoints import load

    out = tmp_path / "m.gguf"
    rc, stdout, err = lowbit("quantize", "--in", SOURCE, "--out", out, "--export", "gguf", "--recipe", "MXFP4")
    assert rc == 0 and stdout == f"wrote {out}: gguf MXFP4, 8 weights quantized, 4 tensors copied\n", err
    mine, theirs = load(out), load(os.path.join(FIXTURES, "gguf", "llama_mxfp4.gguf"))
    quantized = [t for t in mine.tensors if t["type"] == 39]
    assert sorted(t["name"] for t in quantized) == sorted(
        ["output.weight"] + [f"blk.0.{p}.weight" for p in
                             ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")])
    for t in quantized:
        other = theirs.tensor(t["name"])
        assert other["type"] == 39 and other["dims"] == t["dims"]
        size = 17 * t["dims"][0] // 32 * t["dims"][1]
        a = mine.raw[mine.data + t["offset"]: mine.data + t["offset"] + size]
        b = theirs.raw[theirs.data + other["offset"]: theirs.data + other["offset"] + size]
        assert a == b, t["name"]
    assert {t["name"]: t["type"] for t in mine.tensors if t["type"] != 39} == {
        "token_embd.weight": 30, "output_norm.weight": 30, "blk.0.attn_norm.weight": 30, "blk.0.ffn_norm.weight": 30}
    rc, stdout, _ = lowbit("verify-checkpoint", "--source", SOURCE, "--quantized", out)
    assert rc == 0 and stdout.endswith("verify-checkpoint: gguf, 8 tensor(s), 0 differing block(s), identical\n")


@pytest.mark.parametrize("extra,message", [
    (["--recipe", "NVFP4"], "--recipe: 'NVFP4': gguf writes MXFP4"),
    ([], "--recipe: required with --export gguf"),
    (["--recipe", "MXFP4", "--ignore", "down_proj"], "--ignore: not with --export gguf"),
])
def test_gguf_export_refusals(tmp_path, extra, message):
    out = tmp_path / "m.gguf"
    rc, _, err = lowbit("quantize", "--in", SOURCE, "--out", out, "--export", "gguf", *extra)
    assert rc == 2 and message in err and not out.exists()
    rc, _, err = lowbit("quantize", "--in", SOURCE, "--out", tmp_path / "dir", "--export", "gguf", "--recipe", "MXFP4")
    assert rc == 2 and "--out: --export gguf writes one FILE.gguf" in err and not (tmp_path / "dir").exists()
