// Checking a quantized checkpoint against its source (`lowbit verify-checkpoint`): a weight W of the quantized
// safetensors file, described by its recipe keys (W.quantization_format, ...; reference/README.md "Files"), is
// re-quantized from the source file's W and compared block by block with what the file stores.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/io.hpp"
#include "lowbit/names.hpp"
#include "lowbit/output.hpp"
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
// 0.47.0's export_hf_checkpoint writes it for TensorRT-LLM.  gguf: one GGUF file (ggml's container, as
// llama.cpp loads it) whose MXFP4 tensors are checked as gguf-py 0.19.0 quantizes them.
// fp8_block: a directory whose config.json has quant_method "fp8", F8_E4M3 weights with F32 weight_scale_inv per
// block, as DeepSeek-V3 publishes them and Hugging Face transformers 5.24's FineGrainedFP8 writes them.
enum class CheckpointFormat : std::uint8_t { lowbit, compressed_tensors, modelopt, gguf, fp8_block };
inline constexpr Named<CheckpointFormat> checkpoint_format_names[] = {
    {CheckpointFormat::lowbit, "lowbit", "W.data, W.block_scales, W.quantization_format"},
    {CheckpointFormat::compressed_tensors, "compressed-tensors", "config.json quantization_config (vLLM)"},
    {CheckpointFormat::modelopt, "modelopt", "hf_quant_config.json (ModelOpt's export, TensorRT-LLM)"},
    {CheckpointFormat::gguf, "gguf", "a .gguf file's MXFP4 tensors (gguf-py, llama.cpp)"},
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
  // GGUF: tensor name -> the source's name, for names neither the source holds nor gguf-py's Llama naming
  // maps (gguf_source_name).
  std::map<std::string, std::string> gguf_names;
};

struct CheckpointReport {
  CheckpointFormat format = CheckpointFormat::lowbit;
  std::vector<TensorReport> tensors;
  std::vector<std::string> problems;  // structural defects, each naming the tensor key
  std::vector<std::string> skipped;   // tensors read but not re-quantized (GGUF's unquantized and other types)
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

// ---- GGUF ---------------------------------------------------------------------------------------------
// The container as ggml's docs/gguf.md (GGUF v3) defines it and gguf-py 0.19.0 writes it (gguf_writer.py
// write_header_to_file, write_kv_data_to_file, write_ti_data_to_file): little-endian throughout; the magic
// "GGUF", u32 version, u64 tensor count, u64 metadata count; each metadata entry a string key (u64 length,
// bytes), a u32 value type and the value (arrays: u32 element type, u64 count, the elements; strings: u64
// length, bytes); each tensor info a string name, u32 dimension count (at most 4), u64 dims innermost first
// (ne0 is the row length), u32 ggml type, u64 offset into the data; the data at the first multiple of
// general.alignment (u32, default 32) after the infos, each offset a multiple of it.

enum class GgufValueType : std::uint32_t { u8, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };
inline constexpr Named<GgufValueType> gguf_value_type_names[] = {
    {GgufValueType::u8, "UINT8"},    {GgufValueType::i8, "INT8"},      {GgufValueType::u16, "UINT16"},
    {GgufValueType::i16, "INT16"},   {GgufValueType::u32, "UINT32"},   {GgufValueType::i32, "INT32"},
    {GgufValueType::f32, "FLOAT32"}, {GgufValueType::boolean, "BOOL"}, {GgufValueType::string, "STRING"},
    {GgufValueType::array, "ARRAY"}, {GgufValueType::u64, "UINT64"},   {GgufValueType::i64, "INT64"},
    {GgufValueType::f64, "FLOAT64"},
};
constexpr const auto& names_of(GgufValueType) { return gguf_value_type_names; }

// One metadata value: its type (an array's element type beside it), and its text (numbers in decimal, strings
// as they are, arrays "[n items]" with their first elements).
struct GgufValue {
  GgufValueType type = GgufValueType::u8;
  GgufValueType element = GgufValueType::u8;  // arrays
  std::uint64_t count = 1;                    // arrays: the element count
  std::string text;
  std::optional<std::uint64_t> unsigned_value;  // an unsigned integer's value
};

// The ggml tensor types lowbit names (ggml.h enum ggml_type; gguf-py constants.py GGMLQuantizationType and
// GGML_QUANT_SIZES): elements per block and bytes per block where lowbit reads the type, 0 where it only names it.
struct GgmlType {
  std::uint32_t id;
  const char* name;
  std::uint32_t block = 0, block_bytes = 0;
};
inline constexpr std::uint32_t ggml_f32 = 0, ggml_f16 = 1, ggml_bf16 = 30, ggml_mxfp4 = 39;
const GgmlType* ggml_type(std::uint32_t id);   // nullptr: a type lowbit does not know
std::string ggml_type_text(std::uint32_t id);  // "MXFP4 (39)", "type 77"

struct GgufTensor {
  std::string name;
  std::vector<std::uint64_t> dims;  // as stored: innermost (ne0, the row length) first
  std::uint32_t type = 0;
  std::uint64_t info_at = 0;  // the byte its tensor info starts at
  std::uint64_t offset = 0;   // its data's byte in the file
  std::uint64_t bytes = 0;    // its data's size; 0 where the type's size is unknown or ne0 not whole blocks
  bool sized = false;         // bytes is known
};

struct GgufFile {
  std::string path;
  std::uint32_t version = 3;
  std::uint64_t alignment = 32;
  std::uint64_t data_start = 0;  // the first byte of the tensor data
  std::uint64_t size = 0;        // of the file
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensor> tensors;                          // in the file's order
  std::shared_ptr<const std::vector<std::uint8_t>> memory;  // parse_gguf's bytes; null: read from `path`
  // The data of t (t.sized), read from the file (or the bytes parse_gguf was given).
  std::vector<std::uint8_t> read(const GgufTensor& t) const;
};

// Reads the header, metadata and tensor infos; every length and count is checked against the bytes left in
// the file before anything is allocated.  Throws io::FileError naming the file and the byte offset (or the
// key, the tensor) at fault: a bad magic or version, a truncated or inconsistent file.
GgufFile read_gguf(const std::string& path);
// The same of a file's bytes in memory, named `name` in errors (the fuzz target's entry).
GgufFile parse_gguf(std::span<const std::uint8_t> file, const std::string& name);
// Whether the file at path starts with GGUF's magic.
bool is_gguf(const std::string& path);

// The source name of a GGUF tensor: options.gguf_names' entry; else `name` itself where the source holds
// it; else gguf-py's naming of a Llama (tensor_mapping.py, MODEL_ARCH.LLAMA) mapped back: token_embd ->
// model.embed_tokens, output_norm -> model.norm, output -> lm_head, blk.N.attn_q / attn_k / attn_v /
// attn_output / attn_norm / ffn_gate / ffn_up / ffn_down / ffn_norm -> model.layers.N.self_attn.q_proj / k_proj
// / v_proj / o_proj, input_layernorm, mlp.gate_proj / up_proj / down_proj, post_attention_layernorm (the
// .weight / .bias suffix kept).  nullopt when none applies.
std::optional<std::string> gguf_source_name(const std::string& name, const std::function<bool(const std::string&)>& has,
                                            const std::map<std::string, std::string>& names);

// The inverse of that naming: the gguf-py Llama name of a Hugging Face tensor name (model.layers.N.mlp.up_proj.weight
// -> blk.N.ffn_up.weight), nullopt for a name the table does not hold.
std::optional<std::string> gguf_llama_name(const std::string& hf);

// A GGUF MXFP4 tensor's stored blocks (rows x cols elements, cols a multiple of 32): each block's e8m0 byte,
// and every element's e2m1 code in row-major order (element i of a block the low nibble of its byte 1 + i,
// element i + 16 the high nibble; ggml-common.h block_mxfp4, ggml-quants.c dequantize_row_mxfp4).
void gguf_mxfp4_unpack(const std::vector<std::uint8_t>& data, std::size_t rows, std::size_t cols,
                       std::vector<std::uint64_t>& scales, std::vector<std::uint8_t>& codes);
// The inverse: the 17-byte blocks of codes and scales.
std::vector<std::uint8_t> gguf_mxfp4_pack(const std::vector<std::uint64_t>& scales,
                                          const std::vector<std::uint8_t>& codes, std::size_t rows, std::size_t cols);

// ---- writing a GGUF file ----------------------------------------------------------------------------

// One tensor of a GGUF file to write: `mxfp4`, an MX quantization with e2m1 elements in blocks of 1 x 32 over
// whole rows (cols a multiple of 32; any scale rule, `--variant gguf` for gguf-py's arithmetic), written as
// ggml type 39; or `plain`, an F32, F16 or BF16 tensor of 1 to 4 dimensions written as it is (types 0, 1,
// 30).  Dims are written innermost first, as GGUF stores them.
struct GgufEntry {
  std::string name;
  const scale::Quantized* mxfp4 = nullptr;
  const io::Tensor* plain = nullptr;
};

struct GgufWriteOptions {
  std::string architecture = "llama";           // general.architecture, the first metadata entry
  std::uint32_t alignment = 32;                 // general.alignment, written only when not GGUF's default 32
  std::map<std::string, std::string> metadata;  // further STRING entries, in key order
  io::OutputOptions output;                     // io::write_output's (the inputs the file must not be)
};

// The bytes of a GGUF v3 file of `tensors`, in their order.  Throws ArgumentError("tensors", naming the
// tensor) for a tensor of neither kind, an MX quantization that is not MXFP4's shape, a name repeated or
// longer than 2^16 - 1 bytes; ArgumentError("alignment") for an alignment that is not a power of two of at
// least 8.
std::vector<std::uint8_t> encode_gguf(const std::vector<GgufEntry>& tensors, const GgufWriteOptions& options = {});
// encode_gguf written to `path` by io::write_output (a temporary renamed over the target; nothing written on
// error).
void write_gguf(const std::string& path, const std::vector<GgufEntry>& tensors, const GgufWriteOptions& options = {});

// `lowbit quantize --export gguf --recipe MXFP4`: every tensor of `source` (a safetensors file or directory)
// under its gguf-py Llama name, the projections and the output head as MXFP4 under the mx scheme's gguf
// variant (gguf-py's arithmetic), the rest (norms, the token embedding) in their own dtype, written as one
// GGUF v3 file `out` (general.architecture "llama"; llama.cpp's hyperparameter keys are not written).  Throws
// ArgumentError("recipe") for another recipe, io::FileError naming the tensor for a name gguf-py's Llama table
// lacks, a dtype other than F32/BF16/F16 or a projection whose rows are not whole 32-element blocks.
struct GgufExportOptions {
  std::string recipe = "MXFP4";
};
ExportSummary export_gguf(const std::string& source, const std::string& out, const GgufExportOptions& options = {});

}  // namespace lowbit::checkpoint
