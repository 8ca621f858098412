// How a contract's quantized operands meet its GEMM procedure: what scales each scheme leaves (one per
// tensor, one per K block of a row, one per 2-D tile), which of them a procedure takes inside the MMA, and
// the scale matrices it reads, built from the quantizer's scales.  Internal to the contract engine.
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "lowbit/contract.hpp"

namespace lowbit::contract::layout {

// The scales a quantized operand carries, seen along its reduction dimension (its rows run along K).
enum class Arrangement : std::uint8_t {
  none,        // not quantized: the storage format enters the GEMM
  per_tensor,  // one f32 decode scale (tensor, delayed)
  k_blocks,    // one scale per row and K block (block 1xN, mx, nvfp4, nvfp4-1level)
  tiles,       // one scale per tile of rows x K (block RxN with R > 1, nvfp4-2d)
  unsupported  // scales no procedure here can take (per channel: along K; per token; ue8m0-packed words)
};

struct ScaleInfo {
  Arrangement arrangement = Arrangement::none;
  const Format* format = nullptr;  // the scale codes' format as the procedure reads them (f32, e8m0, ue4m3)
  int block_k = 0;                 // K elements per scale (k_blocks, tiles)
  int block_rows = 1;              // rows per scale (tiles)
  bool tensor_scale = false;       // two-level NVFP4: an f32 tensor scale besides the block scales
  const char* why = "";            // unsupported: the reason
};

ScaleInfo scale_info(const Quantization& q);
// Whether an operand carries block scales (k_blocks or tiles).
bool blocked(const ScaleInfo& s);

// Why the operands' scales cannot enter the pass's procedure: the operand (0: A, 1: B) and the message.
std::optional<std::pair<int, std::string>> scale_problem(const PassContract& p);

// Whether scales remain for the epilogue's dequantize step: a per-tensor scale the procedure does not take
// inside (every procedure but the promoted ones), or an NVFP4 tensor scale.
bool scales_left_for_epilogue(const PassContract& p);

}  // namespace lowbit::contract::layout
