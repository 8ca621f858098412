"""compressed-tensors' own loader on the checkpoints `lowbit quantize --export compressed-tensors` writes (peers
label): transformers' AutoModelForCausalLM.from_pretrained with CompressedTensorsConfig(dequantize=True) (the
CompressedTensorsHfQuantizer, which builds a ModelCompressor from config.json and runs its decompress_model
on the CPU) loads lowbit's export of every preset with no missing or mismatched key, and every
tensor it decompresses equals, bit for bit, what the same loader decompresses from the checkpoint
compressed-tensors itself wrote (fixtures/).  torch, transformers and compressed-tensors from
requirements-peers.txt; about 10 s on the CPU, most of it importing torch.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
LOWBIT = os.environ.get("LOWBIT", "lowbit")
# (preset, fixture folder, the input-scale tensor suffix or None)
PRESETS = [
    ("FP8", "fp8", ".input_scale"),
    ("FP8_DYNAMIC", "fp8_dynamic", None),
    ("FP8_BLOCK", "fp8_block", None),
    ("NVFP4", "nvfp4", ".input_global_scale"),
    ("NVFP4A16", "nvfp4a16", None),
    ("MXFP4A16", "mxfp4a16", None),
]


def _peer():
    try:
        import compressed_tensors  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        if os.environ.get("LOWBIT_REQUIRE_PEERS") == "1":
            raise
        pytest.skip(f"torch, transformers or compressed-tensors not installed ({e})")


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """fixtures/source with the model's config.json beside it, as a Hugging Face model directory."""
    _peer()
    sys.path.insert(0, HERE)
    from make_checkpoints import build_model

    d = tmp_path_factory.mktemp("source")
    shutil.copy(os.path.join(FIXTURES, "source", "model.safetensors"), d / "model.safetensors")
    build_model().config.save_pretrained(d)
    return d


def load(path):
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils.quantization_config import CompressedTensorsConfig

    model, info = AutoModelForCausalLM.from_pretrained(
        str(path), quantization_config=CompressedTensorsConfig(dequantize=True), dtype=torch.bfloat16,
        output_loading_info=True)
    for kind in ("missing_keys", "mismatched_keys"):
        assert not info[kind], f"{path}: {kind} {info[kind]}"
    return model.state_dict(), set(info["unexpected_keys"])


@pytest.mark.parametrize("preset,fixture,suffix", PRESETS, ids=[p[1] for p in PRESETS])
def test_lowbit_export_decompresses_as_the_exporters(tmp_path, source, preset, fixture, suffix):
    import torch
    from safetensors.torch import load_file, save_file

    out = tmp_path / "export"
    args = [LOWBIT, "quantize", "--in", source, "--out", out, "--export", "compressed-tensors", "--recipe", preset]
    if suffix:
        theirs = load_file(os.path.join(FIXTURES, fixture, "model.safetensors"))
        save_file({k: v for k, v in theirs.items() if k.endswith(suffix)}, tmp_path / "input_scales.safetensors")
        args += ["--input-scales", tmp_path / "input_scales.safetensors"]
    p = subprocess.run(list(map(str, args)), capture_output=True, check=False)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    # The source's config.json is carried over with quantization_config set.
    config = json.load(open(out / "config.json"))
    assert config["model_type"] == "llama" and config["quantization_config"]["quant_method"] == "compressed-tensors"

    (ours, our_unused), (reference, their_unused) = load(out), load(os.path.join(FIXTURES, fixture))
    # Dequantizing drops the activation quantization, so the loader leaves the input scales unread: the same
    # ones in both checkpoints, and nothing else.
    assert our_unused == their_unused == ({k for k in theirs if k.endswith(suffix)} if suffix else set())
    assert sorted(ours) == sorted(reference)
    for k in reference:
        assert ours[k].dtype == reference[k].dtype and ours[k].shape == reference[k].shape, k
        assert torch.equal(ours[k], reference[k]), k
    # The loader really decompressed the weights: q_proj is no longer the source's bf16 weight.
    src = load_file(os.path.join(FIXTURES, "source", "model.safetensors"))
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(ours[q], src[q])
    assert torch.equal(ours["lm_head.weight"], src["lm_head.weight"])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("preset", ["FP8_DYNAMIC", "FP8_BLOCK", "NVFP4A16", "MXFP4A16"])
def test_other_source_dtypes_match_the_exporters(tmp_path, dtype, preset):
    """The committed fixtures are a bf16 model; the same model in F32 and F16 compressed by compressed-tensors
    itself (make_checkpoints.py's calibration and compressors) equals lowbit's export tensor for tensor: the
    scales computed and stored in that dtype (--compute f32 / f16), but for MXFP4's f16 scale underflow, which
    lowbit refuses."""
    _peer()
    import torch
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config, preset_name_to_scheme
    from safetensors.torch import load_file, save_file

    sys.path.insert(0, HERE)
    import make_checkpoints as mc

    model = mc.build_model().to(getattr(torch, dtype))
    src = tmp_path / "source.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, src)
    scheme = preset_name_to_scheme(preset, ["Linear"])
    apply_quantization_config(model, QuantizationConfig(config_groups={"group_0": scheme}, ignore=["lm_head"]))
    mc.calibrate(model)
    ModelCompressor.from_pretrained_model(model).compress_model(model)
    theirs = {k: v.detach().contiguous() for k, v in model.state_dict().items()}

    out = tmp_path / "export"
    p = subprocess.run([LOWBIT, "quantize", "--in", str(src), "--out", str(out), "--export", "compressed-tensors",
                        "--recipe", preset], capture_output=True, check=False)
    if preset == "MXFP4A16" and dtype == "float16":
        # compressed-tensors computes MX scales in f16 here: o_proj's all-zero row 5 (blocks 10 and 11) would
        # take 2^-127 (0x00), which underflows f16 to 0 and is replaced by 1.0 (0x7f).  lowbit refuses the
        # weight rather than write another scale (docs/semantics.md §4.8).
        o = "model.layers.0.self_attn.o_proj"
        assert theirs[o + ".weight_scale"][5].tolist() == [0x7F, 0x7F]
        assert p.returncode == 2 and not out.exists()
        err = p.stderr.decode()
        assert f'key "{o}.weight": block 10: e8m0 scale 0x00 (2^-127) is below f16\'s least subnormal' in err, err
        return
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    ours = load_file(out / "model.safetensors")
    assert sorted(ours) == sorted(theirs)
    raw = lambda t: t.reshape(-1).view(torch.uint8).numpy().tobytes()  # noqa: E731
    for k, t in theirs.items():
        assert ours[k].dtype == t.dtype and ours[k].shape == t.shape, k
        assert raw(ours[k]) == raw(t), f"{k}: bytes differ from compressed-tensors' ({dtype})"
