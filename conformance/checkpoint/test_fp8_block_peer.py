"""transformers itself (peers label): make_fp8_block.py rebuilds the small Llama and quantizes it with the installed
transformers' FineGrainedFP8 operation (5.24.0, requirements-peers.txt), on the CPU in about 5 s once torch is
imported; the checkpoint verifies as identical and equals the committed fixture, and transformers' own loader
(from_pretrained, which dequantizes on a machine without a GPU) reads each weight as code * weight_scale_inv per
block, the orientation the reader assumes.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LOWBIT = os.environ.get("LOWBIT", "lowbit")
NAME = "fp8_weight_scale_inv"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        if os.environ.get("LOWBIT_REQUIRE_PEERS") == "1":
            raise
        pytest.skip(f"torch or transformers not installed ({e})")
    out = tmp_path_factory.mktemp("fp8_block")
    subprocess.run([sys.executable, os.path.join(HERE, "make_fp8_block.py"), str(out)], check=True, capture_output=True)
    return out


def test_fresh_checkpoint_verifies_identical_and_equals_the_fixture(fresh):
    p = subprocess.run([LOWBIT, "verify-checkpoint", "--source", os.path.join(HERE, "fixtures", "source"),
                        "--quantized", fresh / NAME], capture_output=True, check=False)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    for f in ("model.safetensors", "config.json"):
        with open(fresh / NAME / f, "rb") as a, open(os.path.join(HERE, "fixtures", NAME, f), "rb") as b:
            assert a.read() == b.read(), f


def test_transformers_loader_reads_code_times_weight_scale_inv(fresh):
    import ml_dtypes
    import torch
    from transformers import AutoModelForCausalLM

    from test_ct_checkpoints import read_st

    d = os.path.join(HERE, "fixtures", NAME)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16)
    stored, _ = read_st(os.path.join(d, "model.safetensors"))  # {key: (dtype, shape, bytes)}
    loaded = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    checked = 0
    for key, (_, shape, raw) in stored.items():
        if not key.endswith(".weight_scale_inv"):
            continue
        w = key[: -len("_scale_inv")]
        # The loader's dequantization (integrations/finegrained_fp8.py Fp8Dequantize._dequantize): the e4m3 value
        # times the f32 scale of its block, in f32, then rounded to the model's bf16.
        values = np.frombuffer(bytes(stored[w][2]), ml_dtypes.float8_e4m3fn).reshape(stored[w][1]).astype(np.float32)
        scale = np.frombuffer(bytes(raw), np.float32).reshape(shape)
        per_element = np.repeat(np.repeat(scale, 32, axis=0), 32, axis=1)[: values.shape[0], : values.shape[1]]
        want = (values * per_element).astype(ml_dtypes.bfloat16).astype(np.float32)
        assert np.array_equal(loaded[w], want), w
        checked += 1
    assert checked == 7
