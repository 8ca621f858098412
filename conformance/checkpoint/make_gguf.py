#!/usr/bin/env python3
"""Regenerates the GGUF fixtures of conformance/checkpoint/fixtures/gguf/ with gguf-py's own writer and MXFP4
quantizer (GGUFWriter, gguf.quants.quantize; gguf 0.19.0, requirements-peers.txt), nothing downloaded:

    python conformance/checkpoint/make_gguf.py [OUT]     (default: fixtures/gguf beside this file)

  llama_mxfp4.gguf       the small Llama of source/ (bf16, read as f32) under gguf-py's Llama tensor names
                         (blk.0.attn_q.weight, ...): every projection and output.weight MXFP4, token_embd.weight
                         Q8_0 (a type lowbit does not check), the norms F32; no llama.cpp permutation of
                         attn_q / attn_k (the weights as they stand)
  adversarial.safetensors, adversarial.gguf
                         a weight of edge blocks (below) in F32 and its MXFP4 tensor under the same name
  scheme_blocks.npy, scheme_blocks_gguf.npy
                         random and edge blocks of 32 (float32 [N, 32]) and gguf-py's
                         MXFP4.quantize_blocks of them (uint8 [N, 17]), for the scheme-level check of
                         `lowbit quantize --scheme mx --variant gguf`

The same bytes on every run (fixed seeds; GGUFWriter writes no time or path).
"""
import json
import os
import struct
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import MXFP4

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "fixtures", "source", "model.safetensors")

# gguf-py's Llama names (tensor_mapping.py) of the source's tensors, and the type each is written as.
LLAMA = {
    "model.embed_tokens.weight": ("token_embd.weight", T.Q8_0),
    "lm_head.weight": ("output.weight", T.MXFP4),
    "model.norm.weight": ("output_norm.weight", T.F32),
    "model.layers.0.input_layernorm.weight": ("blk.0.attn_norm.weight", T.F32),
    "model.layers.0.post_attention_layernorm.weight": ("blk.0.ffn_norm.weight", T.F32),
    "model.layers.0.self_attn.q_proj.weight": ("blk.0.attn_q.weight", T.MXFP4),
    "model.layers.0.self_attn.k_proj.weight": ("blk.0.attn_k.weight", T.MXFP4),
    "model.layers.0.self_attn.v_proj.weight": ("blk.0.attn_v.weight", T.MXFP4),
    "model.layers.0.self_attn.o_proj.weight": ("blk.0.attn_output.weight", T.MXFP4),
    "model.layers.0.mlp.gate_proj.weight": ("blk.0.ffn_gate.weight", T.MXFP4),
    "model.layers.0.mlp.up_proj.weight": ("blk.0.ffn_up.weight", T.MXFP4),
    "model.layers.0.mlp.down_proj.weight": ("blk.0.ffn_down.weight", T.MXFP4),
}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header.pop("__metadata__", None)
    out = {}
    for k, v in header.items():
        b = raw[8 + n + v["data_offsets"][0] : 8 + n + v["data_offsets"][1]]
        if v["dtype"] == "BF16":
            a = (np.frombuffer(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif v["dtype"] == "F32":
            a = np.frombuffer(b, dtype=np.float32)
        else:
            raise SystemExit(f"{k}: {v['dtype']} is not BF16 or F32")
        out[k] = a.reshape(v["shape"]).copy()
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for k, a in tensors.items():
        b = np.ascontiguousarray(a, dtype=np.float32).tobytes()
        header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def f32(bits):
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def edge_blocks():
    """Blocks of 32 where gguf-py's arithmetic is not OCP MX's, or is at its edges (docs/semantics.md §4.11)."""
    z = np.zeros(32, dtype=np.float32)
    blocks = []

    def block(**at):
        b = z.copy()
        for i, v in at.items():
            b[int(i[1:])] = v
        return b

    blocks.append(z.copy())                                        # all zero: e = 0
    blocks.append(np.full(32, -0.0, dtype=np.float32))             # negative zero: +0 codes
    # amax 4 (e 127, half-scale 0.5): every midpoint x / 0.5 = 0.5, 1.5, ..., 10 and their negatives; ties
    # go to the first kvalue (toward zero), where round-to-nearest-even takes 1.0, 2.0, 4.0 at 0.75, 1.75, 3.5.
    t = np.array([4.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=np.float32)
    blocks.append(np.concatenate([t, -t[1:], np.zeros(17, np.float32)]).astype(np.float32))
    blocks.append(block(x0=6.0, x1=-0.001, x2=-0.1, x3=0.1))       # small negatives round to +0, not -0
    blocks.append(block(x0=f32(0x00000001)))                       # amax 2^-149: e wraps to 232
    blocks.append(block(x0=f32(0x00800000), x1=f32(0x00000001)))   # amax 2^-126: e wraps to 255 (2^127 half-scale)
    blocks.append(block(x0=f32(0x00100000)))                       # amax 2^-129 (subnormal): e wraps to 252
    blocks.append(block(x0=f32(0x01000000), x1=f32(0x00800000)))   # amax 2^-125: e 0
    blocks.append(block(x0=np.nextafter(np.float32(16), np.float32(0))))   # log2 rounds up to 4: e 129, not 128
    blocks.append(block(x0=np.nextafter(np.float32(2**-4), np.float32(0)), x1=-0.03))  # log2 rounds to -4
    blocks.append(block(x0=np.nextafter(np.float32(8), np.float32(0)), x1=1.0))        # log2 rounds up to 3: e 128
    blocks.append(block(x0=np.float32(3.4028235e38), x1=1e38))     # FLT_MAX: log2 rounds to 128, e 253
    blocks.append(block(x0=np.nan, x1=1.0, x2=-2.0))               # NaN: e 0, every code 0 (|d*k - x| rounds)
    blocks.append(block(x0=np.inf, x1=1.0))                        # Inf: e cast from inf is 0
    blocks.append(block(x0=-np.inf, x1=-3.0))
    blocks.append(block(x0=1.0, x1=np.nan))
    return blocks


def random_blocks(rng, n):
    x = rng.standard_normal((n, 32)).astype(np.float32)
    x *= (2.0 ** rng.integers(-20, 20, size=(n, 1))).astype(np.float32)
    return x


def add(writer, name, data, qtype):
    if qtype == T.F32:
        writer.add_tensor(name, data.astype(np.float32))
    else:
        writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)


def write_gguf(path, tensors):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("lowbit checkpoint fixture")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_MXFP4_MOE)
    for name, (data, qtype) in tensors.items():
        add(w, name, data, qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(out):
    os.makedirs(out, exist_ok=True)
    src = read_safetensors(SOURCE)
    write_gguf(os.path.join(out, "llama_mxfp4.gguf"),
               {g: (src[k], qt) for k, (g, qt) in LLAMA.items()})

    rng = np.random.default_rng(20261222)
    edges = np.stack(edge_blocks())
    adv = np.concatenate([edges, random_blocks(rng, 16)]).reshape(-1, 64)  # two blocks a row
    write_safetensors(os.path.join(out, "adversarial.safetensors"), {"adversarial.weight": adv})
    with np.errstate(all="ignore"):
        write_gguf(os.path.join(out, "adversarial.gguf"), {"adversarial.weight": (adv, T.MXFP4)})

    blocks = np.concatenate([edges, random_blocks(rng, 240)]).astype(np.float32)
    with np.errstate(all="ignore"):
        q = MXFP4.quantize_blocks(blocks.copy())
    np.save(os.path.join(out, "scheme_blocks.npy"), blocks)
    np.save(os.path.join(out, "scheme_blocks_gguf.npy"), q)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "gguf"))
