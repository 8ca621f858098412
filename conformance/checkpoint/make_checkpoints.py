#!/usr/bin/env python3
"""Regenerates conformance/checkpoint/fixtures/: a small Llama built locally with random bf16 weights
(nothing downloaded) and the checkpoints compressed-tensors writes for it, one folder per preset.

    python conformance/checkpoint/make_checkpoints.py [OUT]       (default: the fixtures folder beside this file)

Needs torch, transformers and compressed-tensors (requirements-peers.txt); runs on the CPU in about 20 s.

The weights are calibrated as LLM Compressor's MinMax observer does (torch.amin / torch.amax over the
strategy's groups), and everything after the min/max is compressed-tensors' own code: generate_gparam
(the NVFP4 global scale), calculate_qparams (the scales), and the compressors behind
ModelCompressor.compress_model (the codes, the FP4 packing, the scale dtypes).  q/k/v and gate/up share
one NVFP4 global scale, the smallest of theirs, as LLM Compressor's update_fused_layer_weight_global_scales
sets it.  The input scales of the static-activation presets come from one fixed random activation.
"""
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

import compressed_tensors
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.quantization import (
    QuantizationConfig,
    QuantizationStrategy,
    apply_quantization_config,
    preset_name_to_scheme,
)
from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam

PRESETS = ["FP8", "FP8_DYNAMIC", "FP8_BLOCK", "NVFP4", "NVFP4A16", "MXFP4A16"]
FUSED = [["q_proj", "k_proj", "v_proj"], ["gate_proj", "up_proj"]]


def build_model():
    torch.manual_seed(22)
    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=192, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
        # An all-zero row (FP8 per-channel: the dtype's eps as its scale) whose first 32 columns are also
        # an all-zero NVFP4 block pair and MX block (NVFP4: block scale 0.125).
        model.model.layers[0].self_attn.o_proj.weight[5].zero_()
        # One large weight, so that a block's amax differs from its neighbours' by far.
        model.model.layers[0].mlp.down_proj.weight[3, 17] = 0.75
    return model


def minmax(w, args):
    """LLM Compressor's MinMax observer on a weight: torch.amin / torch.amax over each group."""
    s = args.strategy
    if s == QuantizationStrategy.TENSOR:
        return w.amin().reshape(1), w.amax().reshape(1)
    if s == QuantizationStrategy.CHANNEL:
        return w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True)
    if s in (QuantizationStrategy.GROUP, QuantizationStrategy.TENSOR_GROUP):
        g = w.unflatten(-1, (w.shape[-1] // args.group_size, args.group_size))
        return g.amin(dim=-1), g.amax(dim=-1)
    if s == QuantizationStrategy.BLOCK:
        br, bc = args.block_structure
        rows, cols = w.shape
        nr, nc = -(-rows // br), -(-cols // bc)
        padded = torch.zeros(nr * br, nc * bc, dtype=w.dtype)
        padded[:rows, :cols] = w
        b = padded.reshape(nr, br, nc, bc).transpose(1, 2)
        return b.amin(dim=(-1, -2)), b.amax(dim=(-1, -2))
    raise ValueError(s)


def calibrate(model):
    modules = {n: m for n, m in model.named_modules() if getattr(m, "quantization_scheme", None)}
    global_scales = {}
    for name, m in modules.items():
        args = m.quantization_scheme.weights
        if args.strategy == QuantizationStrategy.TENSOR_GROUP:
            global_scales[name] = generate_gparam(m.weight.amin(), m.weight.amax())
    for name in list(global_scales):
        for group in FUSED:
            leaf = name.rsplit(".", 1)[-1]
            if leaf in group:
                parent = name.rsplit(".", 1)[0]
                shared = [global_scales[parent + "." + g] for g in group if parent + "." + g in global_scales]
                global_scales[name] = torch.min(torch.cat(shared)).reshape(1)
    torch.manual_seed(7)
    activation = torch.randn(4, 128).to(torch.bfloat16)
    for name, m in modules.items():
        scheme = m.quantization_scheme
        args = scheme.weights
        gs = global_scales.get(name)
        lo, hi = minmax(m.weight.data, args)
        scale, zp = calculate_qparams(lo, hi, args, global_scale=gs)
        m.weight_scale.data = scale.reshape(m.weight_scale.shape).to(m.weight_scale.dtype)
        if gs is not None:
            m.weight_global_scale.data = gs.to(m.weight_global_scale.dtype)
        ia = scheme.input_activations
        if ia is not None and ia.dynamic is not True:
            x = activation[:, : m.in_features]
            if hasattr(m, "input_global_scale"):
                m.input_global_scale.data = generate_gparam(x.amin(), x.amax()).to(m.input_global_scale.dtype)
            if hasattr(m, "input_scale"):
                s, _ = calculate_qparams(x.amin().reshape(1), x.amax().reshape(1), ia)
                m.input_scale.data = s.reshape(m.input_scale.shape).to(m.input_scale.dtype)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    source = build_model()
    src_dir = os.path.join(out, "source")
    os.makedirs(src_dir)
    save_file({k: v.contiguous() for k, v in source.state_dict().items()}, os.path.join(src_dir, "model.safetensors"))
    for preset in PRESETS:
        model = build_model()
        scheme = preset_name_to_scheme(preset, ["Linear"])
        config = QuantizationConfig(config_groups={"group_0": scheme}, ignore=["lm_head"])
        apply_quantization_config(model, config)
        calibrate(model)
        compressor = ModelCompressor.from_pretrained_model(model)
        compressor.compress_model(model)
        d = os.path.join(out, preset.lower())
        os.makedirs(d)
        tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(model.config.to_diff_dict(), f, indent=2, sort_keys=True)
        compressor.update_config(d)
    with open(os.path.join(out, "VERSIONS"), "w") as f:
        f.write(f"compressed-tensors {compressed_tensors.__version__}\ntorch {torch.__version__}\n")


if __name__ == "__main__":
    main()
