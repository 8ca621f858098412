#!/usr/bin/env python3
"""Regenerates the ModelOpt fixtures of conformance/checkpoint/fixtures/ (modelopt_fp8, modelopt_nvfp4): the
small Llama of make_checkpoints.py (the same source/ weights) quantized and exported by NVIDIA ModelOpt's own
code, on the CPU, nothing downloaded.

    python conformance/checkpoint/make_modelopt.py [OUT]     (default: the fixtures folder beside this file)

Needs torch, transformers and nvidia-modelopt (requirements-peers.txt); about 5 s on the CPU.

mtq.quantize calibrates with ModelOpt's max calibrator on one fixed random batch of token ids (FP8_DEFAULT_CFG,
NVFP4_DEFAULT_CFG), and export_hf_checkpoint writes model.safetensors, config.json and hf_quant_config.json as
TensorRT-LLM loads them; everything here is ModelOpt's own code.  generation_config.json is not kept.
"""
import os
import shutil
import sys

import torch

import modelopt
import modelopt.torch.quantization as mtq
from modelopt.torch.export import export_hf_checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_checkpoints import build_model  # noqa: E402

CONFIGS = {"modelopt_fp8": "FP8_DEFAULT_CFG", "modelopt_nvfp4": "NVFP4_DEFAULT_CFG"}


def export(out_dir, config_name):
    model = build_model()
    model.config.architectures = ["LlamaForCausalLM"]  # ModelOpt's export reads it
    torch.manual_seed(7)
    tokens = torch.randint(0, model.config.vocab_size, (2, 16))

    def forward_loop(m):
        with torch.no_grad():
            m(tokens)

    mtq.quantize(model, getattr(mtq, config_name), forward_loop)
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    with torch.no_grad():
        export_hf_checkpoint(model, dtype=torch.bfloat16, export_dir=out_dir)
    for extra in ("generation_config.json",):
        p = os.path.join(out_dir, extra)
        if os.path.exists(p):
            os.remove(p)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    os.makedirs(out, exist_ok=True)
    for name, config in CONFIGS.items():
        export(os.path.join(out, name), config)
    with open(os.path.join(out, "VERSIONS_MODELOPT"), "w") as f:
        f.write(f"nvidia-modelopt {modelopt.__version__}\ntorch {torch.__version__}\n")


if __name__ == "__main__":
    main()
