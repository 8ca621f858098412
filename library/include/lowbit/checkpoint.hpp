// Checking a quantized checkpoint against its source (`lowbit verify-checkpoint`): a weight W of the quantized
// safetensors file, described by its recipe keys (W.quantization_format, ...; reference/README.md "Files"), is
// re-quantized from the source file's W and compared block by block with what the file stores.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/io.hpp"

namespace lowbit::checkpoint {

struct CodeDiff {
  int row = 0, col = 0;
  std::uint64_t expected = 0, actual = 0;
};

struct BlockDiff {
  std::size_t block = 0;
  int r0 = 0, r1 = 0, c0 = 0, c1 = 0;  // inclusive
  bool scale_differs = false;
  std::uint64_t scale_expected = 0, scale_actual = 0;
  std::size_t codes_differ = 0;
  CodeDiff first;
};

struct TensorReport {
  std::string name, recipe;
  std::size_t blocks = 0;
  std::vector<BlockDiff> diffs;
  std::vector<std::string> notes;  // tensor-level differences (tensor scale, scale padding)
  const Format* element = nullptr;
  const Format* scale_format = nullptr;
};

// W of `quantized` against W of `source`.  Throws io::FileError naming the file and the key (a recipe key,
// a tensor) for metadata or tensors that cannot be checked: a recipe lowbit cannot re-compute (delayed
// scaling, stochastic rounding), a missing tensor, a dtype or shape that does not fit the recipe.
TensorReport verify_tensor(const io::Safetensors& source, const io::Safetensors& quantized, const std::string& w);

// A code's exact value for the reports (s*2^e for long decimals), or a note when the stored byte is not a code.
std::string value_text(const Format& f, std::uint64_t code);

}  // namespace lowbit::checkpoint
