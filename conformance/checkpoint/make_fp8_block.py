#!/usr/bin/env python3
"""Regenerates conformance/checkpoint/fixtures/fp8_weight_scale_inv/: the small Llama of make_checkpoints.py (the
same source/ weights) quantized by Hugging Face transformers' own FineGrainedFP8 quantizer, the writer of
quant_method "fp8" checkpoints with DeepSeek-V3's weight_scale_inv, on the CPU, nothing downloaded.

    python conformance/checkpoint/make_fp8_block.py [OUT]     (default: the fixtures folder beside this file)

Needs torch and transformers (requirements-peers.txt); about 5 s on the CPU.

transformers quantizes a model on load only on a GPU (FineGrainedFP8HfQuantizer.validate_environment), so this
script calls the quantizer's own operation, integrations/finegrained_fp8.py Fp8Quantize (the conversion its
save path runs), on every nn.Linear weight but lm_head (get_modules_to_not_convert's default), and writes the
config its FineGrainedFP8Config serialises.  The block is 32x32 (weight_block_size), since the model's
dimensions (64, 192, 32) hold no 128x128 block; DeepSeek-V3's own checkpoints use [128, 128], which the reader
takes from the same key.
"""
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers import FineGrainedFP8Config
from transformers.integrations.finegrained_fp8 import Fp8Quantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_checkpoints import build_model  # noqa: E402

BLOCK = [32, 32]


class _Quantizer:
    """What Fp8Quantize reads of its HfQuantizer: the quantization config."""

    def __init__(self, config):
        self.quantization_config = config


def export(out_dir):
    model = build_model()
    config = FineGrainedFP8Config(weight_block_size=BLOCK, modules_to_not_convert=["lm_head"])
    op = Fp8Quantize(_Quantizer(config))
    linear = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n != "lm_head"}
    tensors = {}
    for key, value in model.state_dict().items():
        module = key.rsplit(".", 1)[0]
        if key.endswith(".weight") and module in linear:
            tensors.update(op._quantize_one(key, value.detach()))
        else:
            tensors[key] = value.detach().contiguous()
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    cfg = model.config.to_dict()
    cfg["quantization_config"] = config.to_dict()
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    export(os.path.join(root, "fp8_weight_scale_inv"))
    with open(os.path.join(root, "VERSIONS_FP8_BLOCK"), "w") as f:
        f.write(f"transformers {transformers.__version__}\ntorch {torch.__version__}\n")


if __name__ == "__main__":
    main()
