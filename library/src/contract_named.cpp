// The named contracts: the training and serving recipes people use, as documents of the contract schema
// (docs/contract.md), parsed and validated by the same loader as a user's file.  Each cites the code it
// follows; where the recipe's kernel does something no procedure or scheme here models, the contract says
// what it models instead (docs/contract.md "Named contracts" lists every such difference).
//
// Sources read for them:
//  * Transformer Engine, transformer_engine/common/recipe/__init__.py (commit 000b637e): Format.HYBRID is e4m3
//    forward and e5m2 backward; Float8CurrentScaling: fprop without a split accumulator (cuBLASLt's fast
//    accumulation), dgrad and wgrad with one (on Blackwell, tcgen05's FP8 MMA has no such flag: every pass
//    is the blackwell-f8f6f4 model, te-current@sm100); Float8BlockScaling: E4M3, power-of-two scales, 1-D (1x128)
//    blocks for inputs and gradients, 2-D (128x128) for weights, split accumulation on every pass;
//    MXFP8BlockScaling: E4M3 on every tensor; NVFP4BlockScaling: 16x16 weight blocks, stochastic rounding on
//    gradients, the random Hadamard transform on the columnwise (wgrad) copies of inputs and gradients, as
//    TE computes it (scale::hadamard_rows_te_bf16 cites the kernel).
//  * Transformer Engine DelayedScaling (recipe/__init__.py, the same commit): HYBRID, one scale per tensor
//    from its amax history (amax_history_len 1024, amax_compute_algo "max", margin 0 by default;
//    delayed_scaling.cu, scale::delayed_update); the GEMMs as Float8CurrentScaling's (pytorch/module/base.py:
//    _2X_ACC_FPROP False, _2X_ACC_DGRAD and _2X_ACC_WGRAD True).
//  * DeepSeek-V3 (arXiv 2412.19437 §3.3): 1x128 activation and gradient tiles, 128x128 weight blocks, E4M3 on
//    all tensors, WGMMA results promoted into f32 every 128 elements of K, weight gradients kept in FP32
//    (Figure 6); the wgrad GEMM is DeepGEMM's 1d1d kernel (impls/sm90_fp8_gemm_1d1d.cuh: both operands
//    per 1x128 along the token dimension, the row of procedure hopper-fp8-blockscaled-1d1d); its quantizer
//    (tests/test_core.py, per_token_cast_to_fp8): amax clamped at 1e-4, elements x * fp32(448 / amax).
//  * vLLM, vllm/model_executor/layers/quantization/modelopt.py, ModelOptNvFp4LinearMethod: a ModelOpt NVFP4
//    checkpoint's weight is read as stored (packed e2m1 codes, weight_scale e4m3 per 1x16, weight_scale_2 the
//    f32 tensor decode scale); the activation is quantized on the fly by scaled_fp4_quant (1x16, e4m3 block
//    scales, the tensor scale 1 / input_scale); cutlass_scaled_fp4_mm multiplies by alpha = input_scale *
//    weight_scale_2 (process_weights_after_loading) and writes the output dtype; a bias is added afterwards
//    by torch on that output (`out + bias`, a bf16 addition outside the kernel, so not a step here).
//  * torchao prototype/mx_formats: MX blocks of 32 with the FLOOR scale rule and e4m3 elements by default;
//    single-level NVFP4 (an e4m3 scale per 16, no tensor scale).
#include "lowbit/contract.hpp"

namespace lowbit::contract {

namespace {

// clang-format off
constexpr const char* vllm_modelopt_nvfp4_sm100 = R"json({
  "lowbit_contract": 1,
  "name": "vllm-modelopt-nvfp4@sm100",
  "description": "vLLM serving a ModelOpt NVFP4 (W4A4) checkpoint on Blackwell: W stored as NVFP4, X quantized on the fly",
  "source": "vLLM modelopt.py ModelOptNvFp4LinearMethod (scaled_fp4_quant, cutlass_scaled_fp4_mm, alpha = input_scale * weight_scale_2); tcgen05.mma kind::mxf4nvf4",
  "hardware": "unverified",
  "storage": {"x": "bf16", "w": {"quantized": {"quantization_format": "nvfp4"}}},
  "passes": {
    "fprop": {
      "x": {"quantize": {"quantization_format": "nvfp4"}},
      "w": {"quantize": null},
      "procedure": "blackwell-mxf4nvf4",
      "epilogue": [{"step": "dequantize"}, {"step": "cast", "format": "bf16"}]
    }
  }
})json";

constexpr const char* te_current_sm90 = R"json({
  "lowbit_contract": 1,
  "name": "te-current@sm90",
  "description": "Transformer Engine Float8CurrentScaling (HYBRID) on Hopper",
  "source": "TE recipe/__init__.py Float8CurrentScaling; recipe_common.cuh compute_scale_from_amax; cuBLASLt FP8 GEMM",
  "hardware": "model-verified",
  "storage": {"x": "bf16", "w": "bf16", "dy": "bf16"},
  "passes": {
    "fprop": {
      "x": {"quantize": {"quantization_format": "tensor", "element": "e4m3", "profile": "te"}},
      "w": {"quantize": {"quantization_format": "tensor", "element": "e4m3", "profile": "te"}},
      "procedure": "hopper-fp8",
      "epilogue": [{"step": "dequantize"}, {"step": "bias", "format": "bf16"}, {"step": "cast", "format": "bf16"}]
    },
    "dgrad": {
      "dy": {"quantize": {"quantization_format": "tensor", "element": "e5m2", "profile": "te"}},
      "w": {"quantize": {"quantization_format": "tensor", "element": "e4m3", "profile": "te"}},
      "procedure": "hopper-fp8-promote128",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    },
    "wgrad": {
      "dy": {"quantize": {"quantization_format": "tensor", "element": "e5m2", "profile": "te"}},
      "x": {"quantize": {"quantization_format": "tensor", "element": "e4m3", "profile": "te"}},
      "procedure": "hopper-fp8-promote128",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    }
  }
})json";

constexpr const char* te_current_sm100 = R"json({
  "lowbit_contract": 1,
  "name": "te-current@sm100",
  "description": "Transformer Engine Float8CurrentScaling (HYBRID) on Blackwell",
  "source": "TE recipe/__init__.py Float8CurrentScaling; recipe_common.cuh compute_scale_from_amax; cuBLASLt FP8 GEMM on tcgen05.mma kind::f8f6f4",
  "hardware": "unverified",
  "storage": {"x": "bf16", "w": "bf16", "dy": "bf16"},
  "passes": {
    "fprop": {
      "x": {"quantize": {"quantization_format": "tensor", "element": "e4m3", "profile": "te"}},
      "w": {"quantize": {"quantization_format": "tensor", "element": "e4m3", "profile": "te"}},
      "procedure": "blackwell-f8f6f4",
      "epilogue": [{"step": "dequantize"}, {"step": "bias", "format": "bf16"}, {"step": "cast", "format": "bf16"}]
    },
    "dgrad": {
      "dy": {"quantize": {"quantization_format": "tensor", "element": "e5m2", "profile": "te"}},
      "w": {"quantize": {"quantization_format": "tensor", "element": "e4m3", "profile": "te"}},
      "procedure": "blackwell-f8f6f4",
      "epilogue": [{"step": "dequantize"}, {"step": "cast", "format": "bf16"}]
    },
    "wgrad": {
      "dy": {"quantize": {"quantization_format": "tensor", "element": "e5m2", "profile": "te"}},
      "x": {"quantize": {"quantization_format": "tensor", "element": "e4m3", "profile": "te"}},
      "procedure": "blackwell-f8f6f4",
      "epilogue": [{"step": "dequantize"}, {"step": "cast", "format": "bf16"}]
    }
  }
})json";

constexpr const char* te_delayed_sm90 = R"json({
  "lowbit_contract": 1,
  "name": "te-delayed@sm90",
  "description": "Transformer Engine DelayedScaling (HYBRID, amax history) on Hopper",
  "source": "TE recipe/__init__.py DelayedScaling; delayed_scaling.cu; pytorch/module/base.py _2X_ACC_*; cuBLASLt FP8 GEMM",
  "hardware": "model-verified",
  "storage": {"x": "bf16", "w": "bf16", "dy": "bf16"},
  "passes": {
    "fprop": {
      "x": {"quantize": {"quantization_format": "delayed", "element": "e4m3", "profile": "te"}},
      "w": {"quantize": {"quantization_format": "delayed", "element": "e4m3", "profile": "te"}},
      "procedure": "hopper-fp8",
      "epilogue": [{"step": "dequantize"}, {"step": "bias", "format": "bf16"}, {"step": "cast", "format": "bf16"}]
    },
    "dgrad": {
      "dy": {"quantize": {"quantization_format": "delayed", "element": "e5m2", "profile": "te"}},
      "w": {"quantize": {"quantization_format": "delayed", "element": "e4m3", "profile": "te"}},
      "procedure": "hopper-fp8-promote128",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    },
    "wgrad": {
      "dy": {"quantize": {"quantization_format": "delayed", "element": "e5m2", "profile": "te"}},
      "x": {"quantize": {"quantization_format": "delayed", "element": "e4m3", "profile": "te"}},
      "procedure": "hopper-fp8-promote128",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    }
  }
})json";

constexpr const char* deepseek_v3_sm90 = R"json({
  "lowbit_contract": 1,
  "name": "deepseek-v3@sm90",
  "description": "DeepSeek-V3 FP8 training GEMMs: 1x128 / 128x128 e4m3, promotion every 128 on Hopper",
  "source": "arXiv 2412.19437 §3.3; DeepGEMM tests/test_core.py per_token_cast_to_fp8 (amax clamped at 1e-4)",
  "hardware": "model-verified",
  "storage": {"x": "bf16", "w": "bf16", "dy": "bf16"},
  "passes": {
    "fprop": {
      "x": {"quantize": {"quantization_format": "block1x128", "element": "e4m3", "scale_format": "f32", "eps": "0x38d1b717"}},
      "w": {"quantize": {"quantization_format": "block128x128", "element": "e4m3", "scale_format": "f32", "eps": "0x38d1b717"}},
      "procedure": "hopper-fp8-blockscaled",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    },
    "dgrad": {
      "dy": {"quantize": {"quantization_format": "block1x128", "element": "e4m3", "scale_format": "f32", "eps": "0x38d1b717"}},
      "w": {"quantize": {"quantization_format": "block128x128", "element": "e4m3", "scale_format": "f32", "eps": "0x38d1b717"}},
      "procedure": "hopper-fp8-blockscaled",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    },
    "wgrad": {
      "dy": {"quantize": {"quantization_format": "block1x128", "element": "e4m3", "scale_format": "f32", "eps": "0x38d1b717"}},
      "x": {"quantize": {"quantization_format": "block1x128", "element": "e4m3", "scale_format": "f32", "eps": "0x38d1b717"}},
      "procedure": "hopper-fp8-blockscaled-1d1d",
      "epilogue": [{"step": "cast", "format": "f32"}]
    }
  }
})json";

constexpr const char* te_block_sm90 = R"json({
  "lowbit_contract": 1,
  "name": "te-block@sm90",
  "description": "Transformer Engine Float8BlockScaling on Hopper: 1x128 inputs and gradients, 128x128 weights, pow2 scales",
  "source": "TE recipe/__init__.py Float8BlockScaling; the split accumulator modelled as DeepGEMM's promotion",
  "hardware": "model-verified",
  "storage": {"x": "bf16", "w": "bf16", "dy": "bf16"},
  "passes": {
    "fprop": {
      "x": {"quantize": {"quantization_format": "block1x128", "element": "e4m3", "profile": "te"}},
      "w": {"quantize": {"quantization_format": "block128x128", "element": "e4m3", "profile": "te"}},
      "procedure": "hopper-fp8-blockscaled",
      "epilogue": [{"step": "bias", "format": "bf16"}, {"step": "cast", "format": "bf16"}]
    },
    "dgrad": {
      "dy": {"quantize": {"quantization_format": "block1x128", "element": "e4m3", "profile": "te"}},
      "w": {"quantize": {"quantization_format": "block128x128", "element": "e4m3", "profile": "te"}},
      "procedure": "hopper-fp8-blockscaled",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    },
    "wgrad": {
      "dy": {"quantize": {"quantization_format": "block1x128", "element": "e4m3", "profile": "te"}},
      "x": {"quantize": {"quantization_format": "block1x128", "element": "e4m3", "profile": "te"}},
      "procedure": "hopper-fp8-blockscaled-1d1d",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    }
  }
})json";

constexpr const char* te_mxfp8_sm100 = R"json({
  "lowbit_contract": 1,
  "name": "te-mxfp8@sm100",
  "description": "Transformer Engine MXFP8BlockScaling on Blackwell: e4m3, 1x32 e8m0 scales (rceil)",
  "source": "TE recipe/__init__.py MXFP8BlockScaling; tcgen05.mma kind::mxf8f6f4.block_scale",
  "hardware": "unverified",
  "storage": {"x": "bf16", "w": "bf16", "dy": "bf16"},
  "passes": {
    "fprop": {
      "x": {"quantize": {"quantization_format": "mx", "element": "e4m3", "profile": "te"}},
      "w": {"quantize": {"quantization_format": "mx", "element": "e4m3", "profile": "te"}},
      "procedure": "blackwell-mxf8f6f4",
      "epilogue": [{"step": "bias", "format": "bf16"}, {"step": "cast", "format": "bf16"}]
    },
    "dgrad": {
      "dy": {"quantize": {"quantization_format": "mx", "element": "e4m3", "profile": "te"}},
      "w": {"quantize": {"quantization_format": "mx", "element": "e4m3", "profile": "te"}},
      "procedure": "blackwell-mxf8f6f4",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    },
    "wgrad": {
      "dy": {"quantize": {"quantization_format": "mx", "element": "e4m3", "profile": "te"}},
      "x": {"quantize": {"quantization_format": "mx", "element": "e4m3", "profile": "te"}},
      "procedure": "blackwell-mxf8f6f4",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    }
  }
})json";

constexpr const char* te_nvfp4_sm100 = R"json({
  "lowbit_contract": 1,
  "name": "te-nvfp4@sm100",
  "description": "Transformer Engine NVFP4BlockScaling on Blackwell: 1x16 inputs, 16x16 weights, stochastic rounding on gradients, the random Hadamard transform on wgrad's operands",
  "source": "TE recipe/__init__.py NVFP4BlockScaling; quantize_transpose_nvfp4.cuh; hadamard_transform_utils.cuh (bf16 wmma m16n16k16, rounded to bf16); tcgen05.mma kind::mxf4nvf4",
  "hardware": "unverified",
  "storage": {"x": "bf16", "w": "bf16", "dy": "bf16"},
  "passes": {
    "fprop": {
      "x": {"quantize": {"quantization_format": "nvfp4", "profile": "te"}},
      "w": {"quantize": {"quantization_format": "nvfp4-2d", "profile": "te"}},
      "procedure": "blackwell-mxf4nvf4",
      "epilogue": [{"step": "dequantize"}, {"step": "bias", "format": "bf16"}, {"step": "cast", "format": "bf16"}]
    },
    "dgrad": {
      "dy": {"quantize": {"quantization_format": "nvfp4", "rounding": "sr-a", "sr_bits": 8}},
      "w": {"quantize": {"quantization_format": "nvfp4-2d", "profile": "te"}},
      "procedure": "blackwell-mxf4nvf4",
      "epilogue": [{"step": "dequantize"}, {"step": "cast", "format": "bf16"}]
    },
    "wgrad": {
      "dy": {"quantize": {"quantization_format": "nvfp4", "rounding": "sr-a", "sr_bits": 8, "hadamard": "te-bf16"}},
      "x": {"quantize": {"quantization_format": "nvfp4", "profile": "te", "hadamard": "te-bf16"}},
      "procedure": "blackwell-mxf4nvf4",
      "epilogue": [{"step": "dequantize"}, {"step": "cast", "format": "bf16"}]
    }
  }
})json";

constexpr const char* torchao_mxfp8_sm100 = R"json({
  "lowbit_contract": 1,
  "name": "torchao-mxfp8@sm100",
  "description": "torchao MXLinear, MXFP8 on Blackwell: e4m3, 1x32 e8m0 scales (FLOOR)",
  "source": "torchao prototype/mx_formats (MXLinear, to_mx FLOOR); torch._scaled_mm kind::mxf8f6f4",
  "hardware": "unverified",
  "storage": {"x": "bf16", "w": "bf16", "dy": "bf16"},
  "passes": {
    "fprop": {
      "x": {"quantize": {"quantization_format": "mx", "element": "e4m3", "scale_rule": "floor", "profile": "torchao"}},
      "w": {"quantize": {"quantization_format": "mx", "element": "e4m3", "scale_rule": "floor", "profile": "torchao"}},
      "procedure": "blackwell-mxf8f6f4",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    },
    "dgrad": {
      "dy": {"quantize": {"quantization_format": "mx", "element": "e4m3", "scale_rule": "floor", "profile": "torchao"}},
      "w": {"quantize": {"quantization_format": "mx", "element": "e4m3", "scale_rule": "floor", "profile": "torchao"}},
      "procedure": "blackwell-mxf8f6f4",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    },
    "wgrad": {
      "dy": {"quantize": {"quantization_format": "mx", "element": "e4m3", "scale_rule": "floor", "profile": "torchao"}},
      "x": {"quantize": {"quantization_format": "mx", "element": "e4m3", "scale_rule": "floor", "profile": "torchao"}},
      "procedure": "blackwell-mxf8f6f4",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    }
  }
})json";

constexpr const char* torchao_nvfp4_sm100 = R"json({
  "lowbit_contract": 1,
  "name": "torchao-nvfp4@sm100",
  "description": "torchao NVFP4 linear (single-level: an e4m3 scale per 1x16, no tensor scale) on Blackwell, fprop",
  "source": "torchao prototype/mx_formats nvfp4_tensor (per_tensor_scale=None); tcgen05.mma kind::mxf4nvf4",
  "hardware": "unverified",
  "storage": {"x": "bf16", "w": "bf16"},
  "passes": {
    "fprop": {
      "x": {"quantize": {"quantization_format": "nvfp4-1level", "profile": "torchao"}},
      "w": {"quantize": {"quantization_format": "nvfp4-1level", "profile": "torchao"}},
      "procedure": "blackwell-mxf4nvf4",
      "epilogue": [{"step": "cast", "format": "bf16"}]
    }
  }
})json";
// clang-format on

constexpr NamedContract table[] = {
    {"te-current@sm90", "Transformer Engine Float8CurrentScaling (HYBRID) on Hopper (TE recipe/__init__.py)",
     te_current_sm90},
    {"te-current@sm100",
     "Transformer Engine Float8CurrentScaling (HYBRID) on Blackwell, unverified on hardware (TE recipe/__init__.py)",
     te_current_sm100},
    {"te-delayed@sm90",
     "Transformer Engine DelayedScaling (HYBRID, amax history; contract run --state) on Hopper (TE recipe/__init__.py)",
     te_delayed_sm90},
    {"deepseek-v3@sm90", "DeepSeek-V3 1x128 / 128x128 FP8, promotion every 128 (arXiv 2412.19437 §3.3, DeepGEMM)",
     deepseek_v3_sm90},
    {"te-block@sm90", "Transformer Engine Float8BlockScaling on Hopper (TE recipe/__init__.py)", te_block_sm90},
    {"te-mxfp8@sm100",
     "Transformer Engine MXFP8BlockScaling on Blackwell, unverified on hardware (TE recipe/__init__.py)",
     te_mxfp8_sm100},
    {"te-nvfp4@sm100",
     "Transformer Engine NVFP4BlockScaling on Blackwell, wgrad with TE's bf16 random Hadamard transform, unverified "
     "on hardware (TE recipe/__init__.py, hadamard_transform_utils.cuh)",
     te_nvfp4_sm100},
    {"torchao-mxfp8@sm100",
     "torchao MXLinear MXFP8 on Blackwell, unverified on hardware (torchao prototype/mx_formats)", torchao_mxfp8_sm100},
    {"torchao-nvfp4@sm100",
     "torchao single-level NVFP4 linear on Blackwell, unverified on hardware (torchao nvfp4_tensor)",
     torchao_nvfp4_sm100},
    {"vllm-modelopt-nvfp4@sm100",
     "vLLM serving a ModelOpt NVFP4 checkpoint (W stored as NVFP4 codes and scales, X quantized per 1x16) on "
     "Blackwell, unverified on hardware (vLLM modelopt.py ModelOptNvFp4LinearMethod)",
     vllm_modelopt_nvfp4_sm100},
};

}  // namespace

std::span<const NamedContract> named() { return table; }

}  // namespace lowbit::contract
