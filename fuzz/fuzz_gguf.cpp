// GGUF files (lowbit/checkpoint.hpp: parse_gguf, the reader verify-checkpoint uses on a .gguf file).  The reader
// either returns a file or reports it malformed, naming it; it never crashes, hangs, allocates what the file
// only claims (every count and length is checked against the bytes there are), or lets another exception
// escape.  Of a file it returns:
//   * every sized tensor's data lies within the bytes and reads back at its size;
//   * an MXFP4 tensor's blocks unpack into codes and scales that pack back into the same bytes;
//   * its MXFP4 (two dims) and F32 / F16 / BF16 tensors written again by encode_gguf parse back to the same
//     names, dims, types and data.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "lowbit/checkpoint.hpp"
#include "lowbit/error.hpp"

using namespace lowbit;
namespace C = lowbit::checkpoint;

namespace {

io::DType plain_dtype(std::uint32_t type) {
  return type == C::ggml_f32 ? io::DType::f32 : type == C::ggml_f16 ? io::DType::f16 : io::DType::bf16;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  C::GgufFile f;
  try {
    f = C::parse_gguf({data, size}, "fuzz.gguf");
  } catch (const io::FileError& e) {
    if (std::string(e.what()).rfind("fuzz.gguf: ", 0) != 0) fuzz::fail(std::string("gguf message: ") + e.what());
    return 0;
  }
  std::vector<scale::Quantized> quantized;
  std::vector<io::Tensor> plain;
  quantized.reserve(f.tensors.size());
  plain.reserve(f.tensors.size());
  std::vector<C::GgufEntry> again;
  for (const C::GgufTensor& t : f.tensors) {
    if (!t.sized) continue;
    if (t.offset < f.data_start || t.offset > size || t.bytes > size - t.offset)
      fuzz::fail("tensor " + t.name + ": its data lies outside the file");
    const std::vector<std::uint8_t> bytes = f.read(t);
    if (bytes.size() != t.bytes || (t.bytes && std::memcmp(bytes.data(), data + t.offset, t.bytes) != 0))
      fuzz::fail("tensor " + t.name + ": read() is not the file's bytes");
    if (t.type == C::ggml_mxfp4 && t.dims.size() == 2 && t.dims[1] <= (1u << 20) && t.dims[0] <= (1u << 20)) {
      const auto cols = static_cast<std::size_t>(t.dims[0]), rows = static_cast<std::size_t>(t.dims[1]);
      scale::Quantized q;
      q.scheme = scale::Scheme::mx;
      q.element = &formats::e2m1;
      q.scale_format = &formats::e8m0;
      q.rows = static_cast<int>(rows);
      q.cols = static_cast<int>(cols);
      q.block_rows = 1;
      q.block_cols = 32;
      C::gguf_mxfp4_unpack(bytes, rows, cols, q.scales, q.codes);
      if (C::gguf_mxfp4_pack(q.scales, q.codes, rows, cols) != bytes)
        fuzz::fail("tensor " + t.name + ": MXFP4 blocks do not pack back into their bytes");
      quantized.push_back(std::move(q));
      again.push_back({t.name, &quantized.back(), nullptr});
    } else if (t.type == C::ggml_f32 || t.type == C::ggml_f16 || t.type == C::ggml_bf16) {
      plain.push_back(io::Tensor{plain_dtype(t.type), {t.dims.rbegin(), t.dims.rend()}, bytes});
      again.push_back({t.name, nullptr, &plain.back()});
    }
  }
  std::vector<std::uint8_t> encoded;
  try {
    encoded = C::encode_gguf(again);
  } catch (const ArgumentError& e) {
    fuzz::fail(std::string("encode_gguf refused what parse_gguf read: ") + e.what());
  }
  const C::GgufFile back = C::parse_gguf(encoded, "again.gguf");
  if (back.tensors.size() != again.size()) fuzz::fail("encode_gguf: a tensor count that does not read back");
  for (std::size_t i = 0; i < again.size(); ++i) {
    const C::GgufTensor& b = back.tensors[i];
    const C::GgufTensor* t = nullptr;
    for (const C::GgufTensor& x : f.tensors)
      if (x.name == again[i].name) t = &x;
    if (b.name != t->name || b.dims != t->dims || b.type != t->type || back.read(b) != f.read(*t))
      fuzz::fail("encode_gguf: tensor " + t->name + " does not read back as it was");
  }
  return 0;
}
