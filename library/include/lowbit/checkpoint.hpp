// Checking a quantized checkpoint against its source (`lowbit verify-checkpoint`): a weight W of the quantized
// safetensors file, described by its recipe keys (W.quantization_format, ...; reference/README.md "Files"), is
// re-quantized from the source file's W and compared block by block with what the file stores.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/io.hpp"
#include "lowbit/names.hpp"
#include "lowbit/scale.hpp"

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

// ---- checkpoints as exporters write them ----------------------------------------------------------------

// The layouts verify_checkpoint reads.  lowbit: one safetensors file with W.data / W.block_scales /
// W.tensor_scale and W.quantization_format metadata.  compressed_tensors: a directory with config.json's
// quantization_config (quant_method "compressed-tensors", version 0.20), as vLLM and LLM Compressor load
// and write it.  modelopt: a directory with hf_quant_config.json (quant_algo FP8 or NVFP4), as NVIDIA ModelOpt
// 0.47.0's export_hf_checkpoint writes it for TensorRT-LLM.
// fp8_block: a directory whose config.json has quant_method "fp8", F8_E4M3 weights with F32 weight_scale_inv per
// block, as DeepSeek-V3 publishes them and Hugging Face transformers 5.24's FineGrainedFP8 writes them.
enum class CheckpointFormat : std::uint8_t { lowbit, compressed_tensors, modelopt, fp8_block };
inline constexpr Named<CheckpointFormat> checkpoint_format_names[] = {
    {CheckpointFormat::lowbit, "lowbit", "W.data, W.block_scales, W.quantization_format"},
    {CheckpointFormat::compressed_tensors, "compressed-tensors", "config.json quantization_config (vLLM)"},
    {CheckpointFormat::modelopt, "modelopt", "hf_quant_config.json (ModelOpt's export, TensorRT-LLM)"},
    {CheckpointFormat::fp8_block, "fp8-block", "config.json quant_method fp8, weight_scale_inv blocks (DeepSeek-V3)"},
};
constexpr const auto& names_of(CheckpointFormat) { return checkpoint_format_names; }

// Safetensors files read as one set of tensors: a file, or a directory holding model.safetensors or the
// shards that model.safetensors.index.json's weight_map names.
struct TensorSet {
  std::string path;                          // what was named, for messages
  std::vector<io::Safetensors> files;        // in the order read
  std::map<std::string, std::size_t> where;  // tensor name -> its file
  bool contains(const std::string& key) const { return where.count(key) != 0; }
  const io::Tensor* find(const std::string& key) const;
  const io::Tensor& at(const std::string& key) const;  // FileError naming the key when missing
  std::string file_of(const std::string& key) const;   // the file holding key (or path)
};
// Throws io::FileError naming the file and the key or byte at fault.
TensorSet read_tensor_set(const std::string& path);

struct CheckpointOptions {
  // Projections that share one NVFP4 global scale (vLLM's fused qkv_proj and gate_up_proj; TensorRT-LLM's
  // fused qkv and gate_up, whose NVFP4 weight_scale_2 ModelOpt makes equal), by the last component of the
  // module name.
  std::vector<std::vector<std::string>> fused = {{"q_proj", "k_proj", "v_proj"}, {"gate_proj", "up_proj"}};
};

struct CheckpointReport {
  CheckpointFormat format = CheckpointFormat::lowbit;
  std::vector<TensorReport> tensors;
  std::vector<std::string> problems;  // structural defects, each naming the tensor key
  bool identical() const {
    if (!problems.empty()) return false;
    for (const TensorReport& t : tensors)
      if (!t.diffs.empty() || !t.notes.empty()) return false;
    return true;
  }
};

// Detects the format of `quantized` (a file: lowbit's; a directory with config.json: the exporter its
// quantization_config names), re-quantizes every quantized weight from `source` (a file or directory of
// the unquantized weights) with the recipe the metadata states under that exporter's arithmetic, and
// compares.  Throws io::FileError naming the file and the key for what cannot be read: a malformed or
// unsupported config, a source weight missing or of another shape.
CheckpointReport verify_checkpoint(const std::string& source, const std::string& quantized,
                                   const CheckpointOptions& options = {});

// ---- writing checkpoints as exporters write them (`lowbit quantize --export`) ---------------------------

// compressed-tensors 0.20.1's preset schemes (quantization/quant_scheme.py PRESET_SCHEMES), by their names.
enum class CtPreset : std::uint8_t { fp8, fp8_dynamic, fp8_block, nvfp4, nvfp4a16, mxfp4a16 };
inline constexpr Named<CtPreset> ct_preset_names[] = {
    {CtPreset::fp8, "FP8", "FP8 per-tensor weights, static per-tensor FP8 activations (needs input scales)"},
    {CtPreset::fp8_dynamic, "FP8_DYNAMIC", "FP8 per-channel weights, dynamic per-token activations"},
    {CtPreset::fp8_block, "FP8_BLOCK", "FP8 128x128-block weights, dynamic 1x128 activations"},
    {CtPreset::nvfp4, "NVFP4", "NVFP4 weights and activations (needs input global scales)"},
    {CtPreset::nvfp4a16, "NVFP4A16", "NVFP4 weights, unquantized activations"},
    {CtPreset::mxfp4a16, "MXFP4A16", "MXFP4 weights, unquantized activations"},
};
constexpr const auto& names_of(CtPreset) { return ct_preset_names; }

// ModelOpt 0.47.0's quant_algo values its Hugging Face export writes for FP8_DEFAULT_CFG and NVFP4_DEFAULT_CFG.
enum class ModeloptAlgo : std::uint8_t { fp8, nvfp4 };
inline constexpr Named<ModeloptAlgo> modelopt_algo_names[] = {
    {ModeloptAlgo::fp8, "FP8", "FP8 per-tensor weights and activations (needs input scales)"},
    {ModeloptAlgo::nvfp4, "NVFP4", "NVFP4 weights and activations (needs input scales)"},
};
constexpr const auto& names_of(ModeloptAlgo) { return modelopt_algo_names; }

struct ExportOptions {
  CheckpointFormat format = CheckpointFormat::compressed_tensors;  // compressed_tensors or modelopt
  std::string recipe;  // a CtPreset name (compressed-tensors) or a ModeloptAlgo name (modelopt)
  // Modules left unquantized besides lm_head: a module name ("model.layers.0.mlp.down_proj"), its last
  // components ("down_proj": every such module), or "re:" and a regular expression searched in the name.
  std::vector<std::string> ignore;
  // A safetensors file of the activation scales calibration found, for the recipes that store one: tensor
  // M.input_scale (compressed-tensors FP8: one value in the weight's dtype; ModelOpt FP8 and NVFP4: one F32)
  // or M.input_global_scale (compressed-tensors NVFP4: one F32) for every quantized module M, copied bit for bit.
  std::string input_scales;
  std::vector<std::vector<std::string>> fused = CheckpointOptions{}.fused;
};

struct ExportSummary {
  std::vector<std::string> quantized;  // module names, in order
  std::size_t copied = 0;              // tensors copied unchanged
};

// Quantizes the Linear weights of `source` (a safetensors file or a directory, as read_tensor_set reads it)
// with `options.recipe` under that exporter's arithmetic and writes the checkpoint directory `out` as the
// exporter writes it (model.safetensors, config.json, hf_quant_config.json for ModelOpt; the source's
// config.json carried over with quantization_config set), through io::FolderOutput: nothing is written on
// error, an existing folder is replaced only when empty or a previous export (it holds lowbit_export.json).
// ArgumentError (recipe, ignore, input_scales, out) for a bad option; io::FileError naming the file and key
// for input that cannot be exported.
ExportSummary export_checkpoint(const std::string& source, const std::string& out, const ExportOptions& options);

// Fills rep.diffs with every block of q whose scale or codes differ from the stored ones (block order).
void compare_blocks(const scale::Quantized& q, const std::vector<std::uint8_t>& codes,
                    const std::vector<std::uint64_t>& scales, TensorReport& rep);

// A code's exact value for the reports (s*2^e for long decimals), or a note when the stored byte is not a code.
std::string value_text(const Format& f, std::uint64_t code);

}  // namespace lowbit::checkpoint
