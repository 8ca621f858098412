// GGUF files (ggml's container, the one llama.cpp loads) and their MXFP4 tensors, read as ggml's docs/gguf.md
// (GGUF v3) defines them and gguf-py 0.19.0 writes them (gguf_writer.py; constants.py GGUF_MAGIC 0x46554747,
// GGUF_VERSION 3, GGUF_DEFAULT_ALIGNMENT 32, GGUFValueType, GGMLQuantizationType, GGML_QUANT_SIZES MXFP4
// (32, 1 + 16)).  An MXFP4 block (ggml-common.h block_mxfp4: uint8_t e; uint8_t qs[QK_MXFP4 / 2], QK_MXFP4
// 32) is one e8m0 byte and 16 bytes in which element j is the low nibble of qs[j] and element j + 16 the
// high nibble (ggml-quants.c dequantize_row_mxfp4; gguf-py quants.py MXFP4.quantize_blocks: qs[:, 0] |
// qs[:, 1] << 4 over the block's two halves).  A tensor's dims are stored innermost first: a Hugging Face
// weight [rows, cols] is GGUF [cols, rows], its blocks along each row as lowbit's MX blocks are.
//
// verify_gguf re-quantizes every MXFP4 tensor from the source under the mx scheme's gguf variant
// (docs/semantics.md §4.11): no llama.cpp weight permutation is undone (convert_hf_to_gguf.py permutes a
// Llama's attn_q and attn_k rows; such a file's q and k differ from the source as it stands).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <span>
#include <string>

#include "checkpoint_internal.hpp"
#include "lowbit/checkpoint.hpp"
#include "lowbit/convert.hpp"
#include "lowbit/error.hpp"
#include "lowbit/output.hpp"
#include "lowbit/quantized.hpp"
#include "lowbit/text.hpp"

namespace lowbit::checkpoint {

namespace {

namespace S = scale;
namespace fs = std::filesystem;

constexpr GgmlType ggml_types[] = {
    {0, "F32", 1, 4}, {1, "F16", 1, 2},      {2, "Q4_0"},     {3, "Q4_1"},    {6, "Q5_0"},        {7, "Q5_1"},
    {8, "Q8_0"},      {9, "Q8_1"},           {10, "Q2_K"},    {11, "Q3_K"},   {12, "Q4_K"},       {13, "Q5_K"},
    {14, "Q6_K"},     {15, "Q8_K"},          {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"},    {19, "IQ1_S"},
    {20, "IQ4_NL"},   {21, "IQ3_S"},         {22, "IQ2_S"},   {23, "IQ4_XS"}, {24, "I8"},         {25, "I16"},
    {26, "I32"},      {27, "I64"},           {28, "F64"},     {29, "IQ1_M"},  {30, "BF16", 1, 2}, {34, "TQ1_0"},
    {35, "TQ2_0"},    {39, "MXFP4", 32, 17}, {40, "NVFP4"},   {41, "Q1_0"},
};

constexpr std::uint32_t gguf_magic = 0x46554747u;  // "GGUF" read as a little-endian u32
constexpr int max_dims = 4;                        // GGML_MAX_DIMS
constexpr int max_array_depth = 8;                 // arrays of arrays: deeper than any writer goes
constexpr std::uint64_t max_key_bytes = 65535;     // docs/gguf.md: a key is at most 2^16 - 1 bytes; names too

std::string at_byte(std::uint64_t at) { return "byte " + std::to_string(at); }

// Little-endian reads from the file (or from its bytes in memory), every one checked against the bytes left.
class Cursor {
 public:
  explicit Cursor(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) throw io::FileError(path, "file", "not a regular file");
    if (!in_) throw io::FileError(path, "file", "cannot be opened");
    size_ = fs::file_size(path, ec);
    if (ec) throw io::FileError(path, "file", "its size cannot be read");
  }
  Cursor(std::span<const std::uint8_t> memory, const std::string& name)
      : path_(name), memory_(memory.data()), size_(memory.size()) {}
  std::uint64_t at() const { return at_; }
  std::uint64_t size() const { return size_; }
  std::uint64_t left() const { return size_ - at_; }
  [[noreturn]] void fail(std::uint64_t where, const std::string& why) const {
    throw io::FileError(path_, at_byte(where), why);
  }
  void need(std::uint64_t n, const char* what) const {
    if (n > left())
      fail(at_, std::string(what) + " needs " + std::to_string(n) + " byte(s), the file has " + std::to_string(left()) +
                    " left (truncated?)");
  }
  void bytes(void* out, std::uint64_t n, const char* what) {
    need(n, what);
    if (memory_) {
      if (n) std::memcpy(out, memory_ + at_, static_cast<std::size_t>(n));
      at_ += n;
      return;
    }
    in_.seekg(static_cast<std::streamoff>(at_));
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
    if (!in_) fail(at_, std::string("cannot read ") + what);
    at_ += n;
  }
  template <class T>
  T le(const char* what) {
    unsigned char b[sizeof(T)];
    bytes(b, sizeof(T), what);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(b[i]) << (8 * i);
    return static_cast<T>(v);
  }
  // A string (u64 length, bytes) of at most `max` bytes: longer is an error naming where it starts.
  std::string string(const char* what, std::uint64_t max) {
    const std::uint64_t start = at_;
    const std::uint64_t n = length(what);
    if (n > max)
      fail(start, std::string(what) + ": length " + std::to_string(n) + ", longer than " + std::to_string(max));
    std::string s(static_cast<std::size_t>(n), '\0');
    if (n) bytes(s.data(), n, what);
    return s;
  }
  // A string value: its first `keep` bytes (the rest skipped, never held).
  std::string string_head(const char* what, std::uint64_t keep) {
    const std::uint64_t n = length(what);
    std::string s(static_cast<std::size_t>(std::min(n, keep)), '\0');
    if (!s.empty()) bytes(s.data(), s.size(), what);
    skip(n - s.size(), what);
    return s;
  }
  // A string's u64 length, checked against the bytes left.
  std::uint64_t length(const char* what) {
    const std::uint64_t start = at_;
    const auto n = le<std::uint64_t>(what);
    if (n > left())
      fail(start, std::string(what) + ": length " + std::to_string(n) + " is more than the " + std::to_string(left()) +
                      " byte(s) left");
    return n;
  }
  void skip(std::uint64_t n, const char* what) {
    need(n, what);
    at_ += n;
  }

 private:
  std::string path_;
  std::ifstream in_;
  const std::uint8_t* memory_ = nullptr;
  std::uint64_t size_ = 0, at_ = 0;
};

std::uint64_t scalar_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::boolean: return 1;
    case GgufValueType::u16:
    case GgufValueType::i16: return 2;
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::f32: return 4;
    case GgufValueType::u64:
    case GgufValueType::i64:
    case GgufValueType::f64: return 8;
    case GgufValueType::string: return 8;  // at least its length
    case GgufValueType::array: return 12;  // at least its element type and count
  }
  return 1;
}

GgufValueType value_type(Cursor& c, const std::string& key) {
  const std::uint64_t where = c.at();
  const auto t = c.le<std::uint32_t>("a value type");
  if (t > static_cast<std::uint32_t>(GgufValueType::f64))
    c.fail(where, "metadata \"" + echo_text(key, 80) + "\": value type " + std::to_string(t) +
                      " is not a GGUF value type (0..12)");
  return static_cast<GgufValueType>(t);
}

// One scalar value as text; its unsigned value where it is an unsigned integer.
std::string scalar_text(Cursor& c, GgufValueType t, std::optional<std::uint64_t>* unsigned_value) {
  auto uns = [&](std::uint64_t v) {
    if (unsigned_value) *unsigned_value = v;
    return std::to_string(v);
  };
  switch (t) {
    case GgufValueType::u8: return uns(c.le<std::uint8_t>("a UINT8"));
    case GgufValueType::i8: return std::to_string(static_cast<std::int8_t>(c.le<std::uint8_t>("an INT8")));
    case GgufValueType::u16: return uns(c.le<std::uint16_t>("a UINT16"));
    case GgufValueType::i16: return std::to_string(static_cast<std::int16_t>(c.le<std::uint16_t>("an INT16")));
    case GgufValueType::u32: return uns(c.le<std::uint32_t>("a UINT32"));
    case GgufValueType::i32: return std::to_string(static_cast<std::int32_t>(c.le<std::uint32_t>("an INT32")));
    case GgufValueType::u64: return uns(c.le<std::uint64_t>("a UINT64"));
    case GgufValueType::i64: return std::to_string(static_cast<std::int64_t>(c.le<std::uint64_t>("an INT64")));
    case GgufValueType::f32: return short_value(formats::f32, c.le<std::uint32_t>("a FLOAT32"), 24);
    case GgufValueType::f64: {
      const double d = std::bit_cast<double>(c.le<std::uint64_t>("a FLOAT64"));
      return std::to_string(d);
    }
    case GgufValueType::boolean: {
      const std::uint64_t where = c.at();
      const auto b = c.le<std::uint8_t>("a BOOL");
      if (b > 1) c.fail(where, "a BOOL holds " + std::to_string(b) + ", not 0 or 1");
      return b ? "true" : "false";
    }
    case GgufValueType::string: return echo_text(c.string_head("a STRING", 200), 200);
    case GgufValueType::array: break;
  }
  return "";
}

GgufValue read_value(Cursor& c, const std::string& key, GgufValueType t, int depth) {
  GgufValue v;
  v.type = t;
  if (t != GgufValueType::array) {
    v.text = scalar_text(c, t, &v.unsigned_value);
    return v;
  }
  const std::uint64_t where = c.at();
  if (depth >= max_array_depth)
    c.fail(where,
           "metadata \"" + echo_text(key, 80) + "\": arrays nested deeper than " + std::to_string(max_array_depth));
  v.element = value_type(c, key);
  v.count = c.le<std::uint64_t>("an array's count");
  // Every element takes at least scalar_bytes of the file: a count the file cannot hold is refused before
  // anything is read.
  if (v.count > c.left() / scalar_bytes(v.element))
    c.fail(where, "metadata \"" + echo_text(key, 80) + "\": an array of " + std::to_string(v.count) + " " +
                      name(v.element) + " needs more than the " + std::to_string(c.left()) + " byte(s) left");
  std::string shown;
  for (std::uint64_t i = 0; i < v.count; ++i) {
    const GgufValue e = read_value(c, key, v.element, depth + 1);
    if (i < 4) shown += (i ? ", " : "") + e.text;
  }
  v.text = "[" + std::to_string(v.count) + " " + name(v.element) + (v.count ? ": " + shown : "") +
           (v.count > 4 ? ", ...]" : "]");
  return v;
}

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return v % a == 0 ? v : v + (a - v % a); }

}  // namespace

const GgmlType* ggml_type(std::uint32_t id) {
  for (const GgmlType& t : ggml_types)
    if (t.id == id) return &t;
  return nullptr;
}

std::string ggml_type_text(std::uint32_t id) {
  const GgmlType* t = ggml_type(id);
  return t ? std::string(t->name) + " (" + std::to_string(id) + ")" : "type " + std::to_string(id);
}

bool is_gguf(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char m[4] = {};
  in.read(m, 4);
  return in && std::memcmp(m, "GGUF", 4) == 0;
}

std::vector<std::uint8_t> GgufFile::read(const GgufTensor& t) const {
  if (!t.sized) throw io::FileError(path, "tensor \"" + echo_text(t.name, 200) + "\"", "its size is not known");
  if (memory)
    return {memory->begin() + static_cast<std::ptrdiff_t>(t.offset),
            memory->begin() + static_cast<std::ptrdiff_t>(t.offset + t.bytes)};
  std::ifstream in(path, std::ios::binary);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(t.bytes));
  in.seekg(static_cast<std::streamoff>(t.offset));
  if (!out.empty()) in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!in)
    throw io::FileError(path, at_byte(t.offset), "tensor \"" + echo_text(t.name, 200) + "\": its data cannot be read");
  return out;
}

namespace {

GgufFile parse(Cursor& c, const std::string& path);

}  // namespace

GgufFile read_gguf(const std::string& path) {
  Cursor c(path);
  return parse(c, path);
}

GgufFile parse_gguf(std::span<const std::uint8_t> file, const std::string& name) {
  Cursor c(file, name);
  GgufFile f = parse(c, name);
  f.memory = std::make_shared<const std::vector<std::uint8_t>>(file.begin(), file.end());
  return f;
}

namespace {

GgufFile parse(Cursor& c, const std::string& path) {
  GgufFile f;
  f.path = path;
  f.size = c.size();
  const auto magic = c.le<std::uint32_t>("the magic");
  if (magic != gguf_magic) c.fail(0, "magic " + hex(magic, 8) + " is not GGUF's (the bytes \"GGUF\")");
  f.version = c.le<std::uint32_t>("the version");
  // Version 2 has version 3's layout (3 added big-endian files, which say so only by this field); 1 had
  // 32-bit counts.
  if (f.version == 0x03000000u || f.version == 0x02000000u)
    c.fail(4, "a big-endian GGUF file (version " + std::to_string(f.version >> 24) +
                  " byte-swapped): only little-endian files are read");
  if (f.version != 3 && f.version != 2)
    c.fail(4, "version " + std::to_string(f.version) + ": GGUF versions 2 and 3 are read (little-endian)");
  const std::uint64_t counts_at = c.at();
  const auto n_tensors = c.le<std::uint64_t>("the tensor count");
  const auto n_kv = c.le<std::uint64_t>("the metadata count");
  // A metadata entry takes at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 4 + 8.
  if (n_kv > c.left() / 13) c.fail(counts_at + 8, std::to_string(n_kv) + " metadata entries cannot fit in the file");
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    const std::uint64_t where = c.at();
    const std::string key = c.string("a metadata key", max_key_bytes);
    const GgufValueType t = value_type(c, key);
    if (f.metadata.count(key)) c.fail(where, "metadata \"" + echo_text(key, 80) + "\" appears twice");
    f.metadata[key] = read_value(c, key, t, 0);
  }
  if (n_tensors > c.left() / 24) c.fail(counts_at, std::to_string(n_tensors) + " tensor infos cannot fit in the file");
  if (const auto it = f.metadata.find("general.alignment"); it != f.metadata.end()) {
    const GgufValue& a = it->second;
    if (a.type != GgufValueType::u32 || !a.unsigned_value || *a.unsigned_value == 0 ||
        (*a.unsigned_value & (*a.unsigned_value - 1)) != 0)
      throw io::FileError(path, "key \"general.alignment\"",
                          std::string(name(a.type)) + " " + a.text + ": not a UINT32 power of two");
    f.alignment = *a.unsigned_value;
  }
  std::set<std::string> names;
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    t.info_at = c.at();
    t.name = c.string("a tensor name", max_key_bytes);
    if (!names.insert(t.name).second) c.fail(t.info_at, "tensor \"" + echo_text(t.name, 120) + "\" appears twice");
    const std::uint64_t dims_at = c.at();
    const auto n_dims = c.le<std::uint32_t>("a dimension count");
    if (n_dims < 1 || n_dims > max_dims)
      c.fail(dims_at,
             "tensor \"" + echo_text(t.name, 120) + "\": " + std::to_string(n_dims) + " dimensions (GGUF has 1 to 4)");
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t at = c.at();
      const auto n = c.le<std::uint64_t>("a dimension");
      // At most 2^60 elements: their bytes (at most 4 each, 17 per 32 for MXFP4) fit in a u64.
      if (n == 0 || n > (std::uint64_t{1} << 60) / elements)
        c.fail(at, "tensor \"" + echo_text(t.name, 120) + "\": dimension " + std::to_string(d) + " is " +
                       std::to_string(n) + (n == 0 ? "" : ", too large a tensor"));
      elements *= n;
      t.dims.push_back(n);
    }
    t.type = c.le<std::uint32_t>("a tensor type");
    const std::uint64_t offset_at = c.at();
    t.offset = c.le<std::uint64_t>("a tensor offset");
    if (t.offset % f.alignment != 0)
      c.fail(offset_at, "tensor \"" + echo_text(t.name, 120) + "\": offset " + std::to_string(t.offset) +
                            " is not a multiple of the alignment " + std::to_string(f.alignment));
    if (const GgmlType* g = ggml_type(t.type); g && g->block && t.dims[0] % g->block == 0) {
      t.bytes = elements / g->block * g->block_bytes;
      t.sized = true;
    }
    f.tensors.push_back(std::move(t));
  }
  f.data_start = align_up(c.at(), f.alignment);
  if (f.data_start > f.size && !f.tensors.empty())
    c.fail(c.at(), "the tensor data would start at " + at_byte(f.data_start) + ", past the end of the file (" +
                       std::to_string(f.size) + " bytes)");
  for (GgufTensor& t : f.tensors) {
    if (t.offset > f.size - std::min(f.size, f.data_start))
      throw io::FileError(path, at_byte(t.info_at),
                          "tensor \"" + echo_text(t.name, 120) + "\": its data offset " + std::to_string(t.offset) +
                              " (from byte " + std::to_string(f.data_start) +
                              ") is past the end of the file (truncated?)");
    t.offset += f.data_start;
    if (t.sized && t.bytes > f.size - t.offset)
      throw io::FileError(path, at_byte(t.offset),
                          "tensor \"" + echo_text(t.name, 120) + "\": " + std::to_string(t.bytes) + " byte(s) of " +
                              ggml_type_text(t.type) + " data, the file has " + std::to_string(f.size - t.offset) +
                              " from there (truncated?)");
  }
  return f;
}

}  // namespace

namespace {

// gguf-py tensor_mapping.py (MODEL_ARCH.LLAMA's tensors, constants.py MODEL_TENSORS): the GGUF name and the
// Hugging Face transformers name it comes from.
constexpr std::pair<const char*, const char*> llama_top[] = {
    {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
constexpr std::pair<const char*, const char*> llama_block[] = {
    {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},   {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"}, {"attn_norm", "input_layernorm"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},        {"ffn_down", "mlp.down_proj"}};

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 6 && std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

}  // namespace

std::optional<std::string> gguf_llama_name(const std::string& hf) {
  const auto dot = hf.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string stem = hf.substr(0, dot), suffix = hf.substr(dot);
  for (const auto& [g, h] : llama_top)
    if (stem == h) return std::string(g) + suffix;
  const std::string layers = "model.layers.";
  if (stem.rfind(layers, 0) != 0) return std::nullopt;
  const auto dot2 = stem.find('.', layers.size());
  if (dot2 == std::string::npos) return std::nullopt;
  const std::string layer = stem.substr(layers.size(), dot2 - layers.size()), part = stem.substr(dot2 + 1);
  if (!all_digits(layer)) return std::nullopt;
  for (const auto& [g, h] : llama_block)
    if (part == h) return "blk." + layer + "." + g + suffix;
  return std::nullopt;
}

std::optional<std::string> gguf_source_name(const std::string& name, const std::function<bool(const std::string&)>& has,
                                            const std::map<std::string, std::string>& names) {
  if (const auto it = names.find(name); it != names.end()) return it->second;
  if (has(name)) return name;
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string stem = name.substr(0, dot), suffix = name.substr(dot);  // ".weight", ".bias"
  for (const auto& [g, hf] : llama_top)
    if (stem == g) return std::string(hf) + suffix;
  if (stem.rfind("blk.", 0) == 0) {
    const auto dot2 = stem.find('.', 4);
    if (dot2 == std::string::npos) return std::nullopt;
    const std::string layer = stem.substr(4, dot2 - 4), part = stem.substr(dot2 + 1);
    if (!all_digits(layer)) return std::nullopt;
    for (const auto& [g, hf] : llama_block)
      if (part == g) return "model.layers." + layer + "." + hf + suffix;
  }
  return std::nullopt;
}

void gguf_mxfp4_unpack(const std::vector<std::uint8_t>& data, std::size_t rows, std::size_t cols,
                       std::vector<std::uint64_t>& scales, std::vector<std::uint8_t>& codes) {
  const std::size_t per_row = cols / 32;
  scales.assign(rows * per_row, 0);
  codes.assign(rows * cols, 0);
  for (std::size_t b = 0; b < rows * per_row; ++b) {
    const std::uint8_t* p = data.data() + b * 17;
    scales[b] = p[0];
    const std::size_t first = (b / per_row) * cols + (b % per_row) * 32;
    for (std::size_t j = 0; j < 16; ++j) {
      codes[first + j] = p[1 + j] & 0x0F;
      codes[first + j + 16] = p[1 + j] >> 4;
    }
  }
}

std::vector<std::uint8_t> gguf_mxfp4_pack(const std::vector<std::uint64_t>& scales,
                                          const std::vector<std::uint8_t>& codes, std::size_t rows, std::size_t cols) {
  const std::size_t per_row = cols / 32;
  std::vector<std::uint8_t> out(rows * per_row * 17);
  for (std::size_t b = 0; b < rows * per_row; ++b) {
    std::uint8_t* p = out.data() + b * 17;
    p[0] = static_cast<std::uint8_t>(scales[b]);
    const std::size_t first = (b / per_row) * cols + (b % per_row) * 32;
    for (std::size_t j = 0; j < 16; ++j)
      p[1 + j] = static_cast<std::uint8_t>((codes[first + j] & 0x0F) | ((codes[first + j + 16] & 0x0F) << 4));
  }
  return out;
}

namespace {

// Little-endian appends.
template <class T>
void put(std::vector<std::uint8_t>& out, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(v) >> (8 * i)));
}
void put_string(std::vector<std::uint8_t>& out, const std::string& s) {
  put<std::uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

struct Planned {
  std::string name;
  std::vector<std::uint64_t> dims;  // innermost first
  std::uint32_t type = 0;
  std::vector<std::uint8_t> data;
};

Planned plan(const GgufEntry& e) {
  Planned p;
  p.name = e.name;
  auto refuse = [&](const std::string& why) {
    return ArgumentError("tensors", "'" + echo_text(e.name, 120) + "': " + why);
  };
  if (e.name.size() > max_key_bytes) throw refuse("a name longer than 2^16 - 1 bytes");
  if ((e.mxfp4 == nullptr) == (e.plain == nullptr)) throw refuse("give either an MXFP4 quantization or a plain tensor");
  if (e.mxfp4) {
    const S::Quantized& q = *e.mxfp4;
    if (q.scheme != S::Scheme::mx || q.element != &formats::e2m1 || q.block_rows != 1 || q.block_cols != 32)
      throw refuse("not an MX quantization of e2m1 elements in blocks of 1 x 32 (GGUF MXFP4)");
    if (q.rows < 1 || q.cols < 32 || q.cols % 32 != 0)
      throw refuse(std::to_string(q.cols) + " columns: MXFP4 rows are whole 32-element blocks");
    if (q.codes.size() != static_cast<std::size_t>(q.rows) * static_cast<std::size_t>(q.cols) ||
        q.scales.size() != static_cast<std::size_t>(q.rows) * static_cast<std::size_t>(q.cols / 32))
      throw refuse("its codes or scales do not fill its shape");
    for (std::uint64_t sc : q.scales)
      if (sc > 0xFF) throw refuse("a scale that is not an e8m0 code");
    for (std::uint8_t c : q.codes)
      if (c > 0x0F) throw refuse("a code that is not an e2m1 code");
    p.dims = {static_cast<std::uint64_t>(q.cols), static_cast<std::uint64_t>(q.rows)};
    p.type = ggml_mxfp4;
    p.data = gguf_mxfp4_pack(q.scales, q.codes, static_cast<std::size_t>(q.rows), static_cast<std::size_t>(q.cols));
    return p;
  }
  const io::Tensor& t = *e.plain;
  switch (t.dtype) {
    case io::DType::f32: p.type = ggml_f32; break;
    case io::DType::f16: p.type = ggml_f16; break;
    case io::DType::bf16: p.type = ggml_bf16; break;
    default:
      throw refuse("dtype " + std::string(io::dtype_name(t.dtype)) + ": F32, F16 or BF16 are written as they are");
  }
  if (t.shape.empty() || t.shape.size() > static_cast<std::size_t>(max_dims))
    throw refuse("shape " + shape_text(t.shape) + ": GGUF tensors have 1 to 4 dimensions");
  for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) {
    if (*it == 0) throw refuse("shape " + shape_text(t.shape) + " has a zero dimension");
    p.dims.push_back(*it);
  }
  p.data = t.bytes;
  return p;
}

}  // namespace

std::vector<std::uint8_t> encode_gguf(const std::vector<GgufEntry>& tensors, const GgufWriteOptions& options) {
  const std::uint64_t align = options.alignment;
  if (align < 8 || (align & (align - 1)) != 0)
    throw ArgumentError("alignment", std::to_string(align) + " is not a power of two of at least 8");
  std::vector<Planned> planned;
  std::set<std::string> names;
  for (const GgufEntry& e : tensors) {
    if (!names.insert(e.name).second) throw ArgumentError("tensors", "'" + echo_text(e.name, 120) + "' is named twice");
    planned.push_back(plan(e));
  }
  std::vector<std::pair<std::string, std::pair<GgufValueType, std::string>>> kv;
  kv.push_back({"general.architecture", {GgufValueType::string, options.architecture}});
  if (align != 32) kv.push_back({"general.alignment", {GgufValueType::u32, std::to_string(align)}});
  for (const auto& [k, v] : options.metadata) {
    if (k == "general.architecture" || k == "general.alignment")
      throw ArgumentError("metadata", "'" + k + "' is written from the options' own field");
    if (k.size() > max_key_bytes) throw ArgumentError("metadata", "a key longer than 2^16 - 1 bytes");
    kv.push_back({k, {GgufValueType::string, v}});
  }
  std::vector<std::uint8_t> out;
  put<std::uint32_t>(out, gguf_magic);
  put<std::uint32_t>(out, 3);
  put<std::uint64_t>(out, planned.size());
  put<std::uint64_t>(out, kv.size());
  for (const auto& [k, v] : kv) {
    put_string(out, k);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(v.first));
    if (v.first == GgufValueType::u32) {
      put<std::uint32_t>(out, static_cast<std::uint32_t>(align));
    } else {
      put_string(out, v.second);
    }
  }
  std::uint64_t offset = 0;
  for (const Planned& p : planned) {
    put_string(out, p.name);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(p.dims.size()));
    for (std::uint64_t d : p.dims) put<std::uint64_t>(out, d);
    put<std::uint32_t>(out, p.type);
    put<std::uint64_t>(out, offset);
    offset = align_up(offset + p.data.size(), align);
  }
  out.resize(static_cast<std::size_t>(align_up(out.size(), align)), 0);
  for (const Planned& p : planned) {
    out.insert(out.end(), p.data.begin(), p.data.end());
    out.resize(static_cast<std::size_t>(align_up(out.size(), align)), 0);
  }
  return out;
}

void write_gguf(const std::string& path, const std::vector<GgufEntry>& tensors, const GgufWriteOptions& options) {
  const std::vector<std::uint8_t> bytes = encode_gguf(tensors, options);
  const std::span<const std::uint8_t> parts[] = {bytes};
  io::write_output(path, parts, options.output);
}

// ---- quantize --export gguf ---------------------------------------------------------------------------------

namespace {

// The gguf-py Llama names whose weights the export writes as MXFP4: every projection and the output head (as
// conformance/checkpoint/make_gguf.py writes them with gguf-py); norms and the token embedding stay in the
// source's dtype.
bool mxfp4_target(const std::string& gguf_name) {
  for (const char* leaf : {".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_output.weight",
                           ".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight"})
    if (gguf_name.ends_with(leaf)) return true;
  return gguf_name == "output.weight";
}

}  // namespace

ExportSummary export_gguf(const std::string& source, const std::string& out, const GgufExportOptions& options) {
  if (options.recipe != "MXFP4")
    throw ArgumentError("recipe", "'" + echo_text(options.recipe, 40) + "': gguf writes MXFP4 (ggml type 39)");
  const TensorSet src = read_tensor_set(source);
  // Every tensor, named as gguf-py names a Llama's, in name order (GGUF's order is the writer's).
  std::map<std::string, std::string> gguf_of;  // gguf name -> source name
  for (const auto& [name, where] : src.where) {
    const auto g = gguf_llama_name(name);
    if (!g)
      throw io::FileError(src.file_of(name), "key "" + name + """,
                          "has no gguf-py Llama name (tensor_mapping.py): only Llama-named checkpoints are exported");
    gguf_of[*g] = name;
  }
  std::vector<scale::Quantized> quantized;
  quantized.reserve(gguf_of.size());
  std::vector<GgufEntry> entries;
  ExportSummary summary;
  for (const auto& [g, name] : gguf_of) {
    const io::Tensor& t = src.at(name);
    if (t.dtype != io::DType::f32 && t.dtype != io::DType::bf16 && t.dtype != io::DType::f16)
      throw io::FileError(src.file_of(name), "key "" + name + """,
                          "dtype " + std::string(io::dtype_name(t.dtype)) + " is not F32, BF16 or F16");
    if (!mxfp4_target(g)) {
      entries.push_back({g, nullptr, &t});
      ++summary.copied;
      continue;
    }
    const auto dims = quantized::matrix_dims(t.shape);
    if (t.shape.size() != 2 || !dims || dims->second % 32 != 0)
      throw io::FileError(src.file_of(name), "key "" + name + """,
                          "shape " + shape_text(t.shape) + ": MXFP4 takes a matrix of whole 32-element row blocks");
    scale::Request req;
    req.scheme = scale::Scheme::mx;
    req.element = &formats::e2m1;
    req.variant = scale::Variant::gguf;
    scale::Options so;
    if (const auto refused = scale::resolve(req, so)) throw ArgumentError("recipe", refused->message);
    quantized.push_back(scale::quantize(scale::Tensor{dims->first, dims->second, *quantized::float_values(t)}, so));
    entries.push_back({g, &quantized.back(), nullptr});
    summary.quantized.push_back(name.substr(0, name.size() - 7));
  }
  GgufWriteOptions wo;
  for (const io::Safetensors& f : src.files) wo.output.inputs.push_back(f.path);
  wo.output.inputs.push_back(source);
  write_gguf(out, entries, wo);
  return summary;
}

namespace detail {

namespace {

// Whether the stored codes of the block [first, first + 32) read with each byte's halves exchanged (element
// j + 16 where j belongs) are the expected ones, and are not already (a block of one repeated code is either).
bool block_halves_swapped(const std::vector<std::uint8_t>& stored, const std::vector<std::uint8_t>& expected,
                          std::size_t first) {
  bool differs = false;
  for (std::size_t j = 0; j < 32; ++j) {
    if (stored[first + (j + 16) % 32] != expected[first + j]) return false;
    differs = differs || stored[first + j] != expected[first + j];
  }
  return differs;
}

void verify_mxfp4(const GgufFile& f, const GgufTensor& t, const TensorSet& src, const CheckpointOptions& o,
                  CheckpointReport& rep) {
  const std::string tn = echo_text(t.name, 200);  // names are the file's bytes: shown safe
  const auto source_key = gguf_source_name(
      t.name, [&](const std::string& k) { return src.contains(k); }, o.gguf_names);
  if (!source_key || !src.contains(*source_key)) {
    rep.problems.push_back(tn + ": no source tensor" +
                           (source_key ? " (" + echo_text(*source_key, 200) + " is not in " + src.path + ")"
                                       : " of that name, and gguf-py's Llama naming maps it to none (--names)"));
    return;
  }
  const io::Tensor& st = src.at(*source_key);
  const auto values = quantized::float_values(st);
  if (!values)
    throw key_error(src.file_of(*source_key), *source_key,
                    "dtype " + std::string(io::dtype_name(st.dtype)) + " is not F32, BF16 or F16");
  const std::string dims_text = "GGUF dims " + shape_text(t.dims);
  if (st.shape.size() != 2 || t.dims.size() != 2 || t.dims[0] != st.shape[1] || t.dims[1] != st.shape[0]) {
    rep.problems.push_back(tn + ": " + dims_text + " (innermost first) do not match the source's " +
                           echo_text(*source_key, 200) + " " + shape_text(st.shape) +
                           " (GGUF [cols, rows] of a [rows, cols] weight)");
    return;
  }
  if (t.dims[0] % 32 != 0 || !t.sized) {
    rep.problems.push_back(tn + ": " + dims_text + ": ne0 " + std::to_string(t.dims[0]) +
                           " is not a whole number of MXFP4's 32-element blocks");
    return;
  }
  const auto dims = quantized::matrix_dims(st.shape);
  if (!dims) throw key_error(src.file_of(*source_key), *source_key, "shape " + shape_text(st.shape) + " is too large");
  S::Request req;
  req.scheme = S::Scheme::mx;
  req.element = &formats::e2m1;
  req.block = 32;
  req.variant = S::Variant::gguf;
  S::Options so;
  if (const auto refused = S::resolve(req, so))
    throw io::FileError(f.path, "tensor \"" + tn + "\"", S::argument_of(refused->option) + ": " + refused->message);
  const S::Quantized q = S::quantize(S::Tensor{dims->first, dims->second, *values}, so);

  TensorReport tr;
  tr.name = tn;
  tr.element = q.element;
  tr.scale_format = q.scale_format;
  tr.recipe = "gguf MXFP4 of " + echo_text(*source_key, 200) + " (mx scheme, gguf variant)";
  std::vector<std::uint64_t> scales;
  std::vector<std::uint8_t> codes;
  gguf_mxfp4_unpack(f.read(t), static_cast<std::size_t>(q.rows), static_cast<std::size_t>(q.cols), scales, codes);
  compare_blocks(q, codes, scales, tr);
  if (!tr.diffs.empty()) {
    const auto cols = static_cast<std::size_t>(q.cols);
    std::size_t swapped = 0;
    for (const BlockDiff& d : tr.diffs)
      if (d.codes_differ &&
          block_halves_swapped(codes, q.codes, static_cast<std::size_t>(d.r0) * cols + static_cast<std::size_t>(d.c0)))
        ++swapped;
    if (swapped)
      tr.notes.insert(tr.notes.begin(),
                      tn + ": nibble order swapped in " + std::to_string(swapped) + " of " +
                          std::to_string(tr.diffs.size()) +
                          " differing block(s): element j + 16 is in the low nibble of the block's byte j, where "
                          "ggml's block_mxfp4 holds element j there");
    // A scale byte that is the inverse: e8m0 2^(e - 127) stored as 2^(127 - e), i.e. the code 254 - e.
    std::size_t inverse = 0, differing = 0;
    for (const BlockDiff& d : tr.diffs)
      if (d.scale_differs) {
        ++differing;
        if (d.scale_expected != 127 && d.scale_expected <= 254 && d.scale_actual == 254 - d.scale_expected) ++inverse;
      }
    if (inverse > 0 && inverse * 2 >= differing)
      tr.notes.push_back(tn + ": " + std::to_string(inverse) + " of " + std::to_string(differing) +
                         " differing scale byte(s) hold the inverse 2^(127 - e) (code 254 - e) of the e8m0 "
                         "decode scale 2^(e - 127) that MXFP4 stores");
  }
  rep.tensors.push_back(std::move(tr));
}

// An F32, F16 or BF16 tensor: the source's values rounded to its type (to nearest even, as numpy's astype
// and gguf-py's writer convert), compared code for code where the source has it; listed as skipped either way.
void compare_plain(const GgufFile& f, const GgufTensor& t, const TensorSet& src, const CheckpointOptions& o,
                   CheckpointReport& rep) {
  const std::string shown = echo_text(t.name, 200);
  const std::string head = shown + ": " + ggml_type_text(t.type) + " " + shape_text(t.dims) + ", not quantized";
  const auto key = gguf_source_name(
      t.name, [&](const std::string& k) { return src.contains(k); }, o.gguf_names);
  if (!key || !src.contains(*key)) {
    rep.skipped.push_back(head + "; no source tensor to compare");
    return;
  }
  const io::Tensor& st = src.at(*key);
  const auto values = quantized::float_values(st);
  const std::vector<std::uint64_t> reversed(t.dims.rbegin(), t.dims.rend());
  if (!values || st.shape != reversed) {
    rep.problems.push_back(shown + ": " + shape_text(t.dims) + " (innermost first) is not the source's " +
                           echo_text(*key, 200) + " " + std::string(io::dtype_name(st.dtype)) + " " +
                           shape_text(st.shape));
    return;
  }
  const Format& to = t.type == ggml_f32 ? formats::f32 : t.type == ggml_f16 ? formats::f16 : formats::bf16;
  const std::size_t width = t.type == ggml_f32 ? 4 : 2;
  const std::vector<std::uint8_t> data = f.read(t);
  Policy p;
  p.overflow = Overflow::nosat;
  std::size_t differ = 0, first = 0;
  std::uint64_t want_first = 0, got_first = 0;
  for (std::size_t i = 0; i < values->size(); ++i) {
    std::uint64_t got = 0;
    for (std::size_t b = 0; b < width; ++b) got |= static_cast<std::uint64_t>(data[i * width + b]) << (8 * b);
    const std::uint64_t want = convert(formats::f32, std::bit_cast<std::uint32_t>((*values)[i]), to, p).code;
    if (want != got && differ++ == 0) {
      first = i;
      want_first = want;
      got_first = got;
    }
  }
  if (differ) {
    rep.problems.push_back(shown + ": " + std::to_string(differ) + " of " + std::to_string(values->size()) +
                           " values differ from the source's " + echo_text(*key, 200) + " rounded to " + to.name +
                           ", first element " + std::to_string(first) + ": expected " +
                           hex(want_first, to.hex_digits()) + " (" + value_text(to, want_first) + ") actual " +
                           hex(got_first, to.hex_digits()) + " (" + value_text(to, got_first) + ")");
    return;
  }
  rep.skipped.push_back(head + "; equal to the source's " + echo_text(*key, 200));
}

}  // namespace

CheckpointReport verify_gguf(const std::string& source, const std::string& path, const CheckpointOptions& options) {
  const GgufFile f = read_gguf(path);
  const TensorSet src = read_tensor_set(source);
  CheckpointReport rep;
  rep.format = CheckpointFormat::gguf;
  std::set<std::string> held;  // the source tensors the file's tensors stand for
  for (const GgufTensor& t : f.tensors) {
    if (const auto k = gguf_source_name(
            t.name, [&](const std::string& key) { return src.contains(key); }, options.gguf_names))
      held.insert(*k);
    if (t.type == ggml_mxfp4) {
      verify_mxfp4(f, t, src, options, rep);
    } else if (t.type == ggml_f32 || t.type == ggml_f16 || t.type == ggml_bf16) {
      compare_plain(f, t, src, options, rep);
    } else {
      rep.skipped.push_back(echo_text(t.name, 200) + ": " + ggml_type_text(t.type) + " " + shape_text(t.dims) +
                            ", a type lowbit does not check");
    }
  }
  if (std::none_of(f.tensors.begin(), f.tensors.end(), [](const GgufTensor& t) { return t.type == ggml_mxfp4; }))
    throw io::FileError(path, "tensors", "no MXFP4 (type 39) tensor: nothing to check");
  // A converter writes every tensor of the model: a source tensor that none stands for was dropped.
  // (Not a rotary embedding's inv_freq buffer, which convert_hf_to_gguf.py leaves out: llama.cpp recomputes it.)
  for (const auto& [key, file] : src.where)
    if (!held.count(key) && !key.ends_with(".rotary_emb.inv_freq"))
      rep.problems.push_back(key + ": in the source, but no tensor of " + fs::path(path).filename().string() +
                             " holds it (dropped?)");

  return rep;
}

}  // namespace detail

}  // namespace lowbit::checkpoint
