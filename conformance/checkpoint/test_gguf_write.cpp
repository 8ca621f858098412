// checkpoint::write_gguf: the committed Llama source quantized under `mx --variant gguf` and written as a GGUF
// MXFP4 file reads back through read_gguf block for block, verifies identical against its source, and is byte
// for byte the file gguf-py's own GGUFWriter and quantizer wrote for the same tensors (fixtures/gguf,
// make_gguf.py) where the two hold the same tensors; bad entries are refused naming the tensor, nothing
// written.  LOWBIT_GGUF_WRITE_TO=DIR keeps the written file (DIR/written.gguf) for test_gguf_peer.py, which
// reads it with gguf-py's GGUFReader.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "lowbit/checkpoint.hpp"
#include "lowbit/error.hpp"
#include "lowbit/quantized.hpp"

namespace C = lowbit::checkpoint;
namespace S = lowbit::scale;
namespace fs = std::filesystem;

namespace {

const std::string fixtures = LOWBIT_CHECKPOINT_FIXTURES;

// The source's weights gguf-py's make_gguf.py writes as MXFP4 in llama_mxfp4.gguf, under their GGUF names.
const std::pair<const char*, const char*> mxfp4_weights[] = {
    {"output.weight", "lm_head.weight"},
    {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
    {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"},
    {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight"},
    {"blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight"},
    {"blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight"},
    {"blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight"},
    {"blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"},
};

S::Quantized gguf_quantize(const lowbit::io::Tensor& t) {
  S::Request r;
  r.scheme = S::Scheme::mx;
  r.variant = S::Variant::gguf;
  S::Options o;
  EXPECT_FALSE(S::resolve(r, o));
  const auto v = lowbit::quantized::float_values(t);
  return S::quantize(S::Tensor{static_cast<int>(t.shape[0]), static_cast<int>(t.shape[1]), *v}, o);
}

// Where a test writes: LOWBIT_GGUF_WRITE_TO, kept; else a folder of this process's own, removed at exit.
std::string dir_for_output() {
  if (const char* d = std::getenv("LOWBIT_GGUF_WRITE_TO")) return d;
  struct Scratch {
    fs::path path = fs::temp_directory_path() / ("lowbit-gguf-write-" + std::to_string(::getpid()));
    Scratch() { fs::create_directories(path); }
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Scratch scratch;
  return scratch.path.string();
}

std::vector<std::uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(GgufWrite, RoundTripsThroughTheReaderAndVerifiesIdentical) {
  const C::TensorSet src = C::read_tensor_set(fixtures + "/source");
  std::vector<S::Quantized> qs;
  qs.reserve(std::size(mxfp4_weights));
  for (const auto& [g, hf] : mxfp4_weights) qs.push_back(gguf_quantize(src.at(hf)));
  std::vector<C::GgufEntry> entries;
  for (std::size_t i = 0; i < qs.size(); ++i) entries.push_back({mxfp4_weights[i].first, &qs[i], nullptr});
  const lowbit::io::Tensor& norm = src.at("model.norm.weight");
  entries.push_back({"output_norm.weight", nullptr, &norm});  // BF16, written as it is
  const std::string path = dir_for_output() + "/written.gguf";
  C::write_gguf(path, entries);

  const C::GgufFile f = C::read_gguf(path);
  ASSERT_EQ(f.version, 3u);
  ASSERT_EQ(f.tensors.size(), entries.size());
  ASSERT_EQ(f.metadata.at("general.architecture").text, "llama");
  for (std::size_t i = 0; i < qs.size(); ++i) {
    const C::GgufTensor& t = f.tensors[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, mxfp4_weights[i].first);
    EXPECT_EQ(t.type, C::ggml_mxfp4);
    EXPECT_EQ(t.dims, (std::vector<std::uint64_t>{static_cast<std::uint64_t>(qs[i].cols),
                                                  static_cast<std::uint64_t>(qs[i].rows)}));
    EXPECT_EQ(t.offset % 32, 0u);
    std::vector<std::uint64_t> scales;
    std::vector<std::uint8_t> codes;
    C::gguf_mxfp4_unpack(f.read(t), static_cast<std::size_t>(qs[i].rows), static_cast<std::size_t>(qs[i].cols), scales,
                         codes);
    EXPECT_EQ(scales, qs[i].scales);
    EXPECT_EQ(codes, qs[i].codes);
  }
  const C::GgufTensor& n = f.tensors.back();
  EXPECT_EQ(n.type, C::ggml_bf16);
  EXPECT_EQ(f.read(n), norm.bytes);

  // Against the source: every MXFP4 tensor identical; the source tensors the file leaves out are named.
  const C::CheckpointReport rep = C::verify_checkpoint(fixtures + "/source", path);
  EXPECT_EQ(rep.format, C::CheckpointFormat::gguf);
  ASSERT_EQ(rep.tensors.size(), qs.size());
  for (const C::TensorReport& t : rep.tensors) EXPECT_TRUE(t.diffs.empty() && t.notes.empty()) << t.name;
  EXPECT_EQ(rep.problems.size(), 3u);  // embed_tokens and two layer norms: not written here
}

// gguf-py's file holds the same MXFP4 blocks, written by its quantizer: lowbit's blocks equal its bytes.
TEST(GgufWrite, BlocksEqualGgufPysFile) {
  const C::TensorSet src = C::read_tensor_set(fixtures + "/source");
  const C::GgufFile peer = C::read_gguf(fixtures + "/gguf/llama_mxfp4.gguf");
  for (const auto& [g, hf] : mxfp4_weights) {
    SCOPED_TRACE(g);
    const S::Quantized q = gguf_quantize(src.at(hf));
    const C::GgufEntry e{g, &q, nullptr};
    const std::vector<std::uint8_t> mine = C::encode_gguf({e});
    const C::GgufTensor* t = nullptr;
    for (const C::GgufTensor& x : peer.tensors)
      if (x.name == g) t = &x;
    ASSERT_NE(t, nullptr);
    const std::vector<std::uint8_t> theirs = peer.read(*t);
    ASSERT_GE(mine.size(), theirs.size());
    // A one-tensor file's data is its last bytes, padded to 32.
    const std::size_t padded = (theirs.size() + 31) / 32 * 32;
    EXPECT_EQ(std::vector<std::uint8_t>(mine.end() - static_cast<std::ptrdiff_t>(padded),
                                        mine.end() - static_cast<std::ptrdiff_t>(padded - theirs.size())),
              theirs);
  }
}

TEST(GgufWrite, RefusesWhatIsNotMxfp4NamingTheTensor) {
  S::Request r;
  r.scheme = S::Scheme::mx;
  r.element = &lowbit::formats::e4m3;
  S::Options o;
  ASSERT_FALSE(S::resolve(r, o));
  const S::Quantized e4m3 = S::quantize(S::Tensor{1, 32, std::vector<float>(32, 1.0f)}, o);
  const std::string path = dir_for_output() + "/refused.gguf";
  std::error_code ec;
  fs::remove(path, ec);
  try {
    C::write_gguf(path, {{"w.weight", &e4m3, nullptr}});
    FAIL() << "written";
  } catch (const lowbit::ArgumentError& e) {
    EXPECT_EQ(e.argument, "tensors");
    EXPECT_NE(std::string(e.what()).find("'w.weight': not an MX quantization of e2m1"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path));
  const lowbit::io::Tensor i8 = lowbit::io::Tensor{lowbit::io::DType::i8, {4}, std::vector<std::uint8_t>(4)};
  EXPECT_THROW(C::encode_gguf({{"x", nullptr, &i8}, {"x", nullptr, &i8}}), lowbit::ArgumentError);
  EXPECT_THROW(C::encode_gguf({{"x", nullptr, &i8}}), lowbit::ArgumentError);
  EXPECT_THROW(C::encode_gguf({{"x", nullptr, nullptr}}), lowbit::ArgumentError);
  C::GgufWriteOptions bad;
  bad.alignment = 12;
  EXPECT_THROW(C::encode_gguf({}, bad), lowbit::ArgumentError);
}

// An alignment of 64 is written as general.alignment and read back; the data offsets follow it.
TEST(GgufWrite, AlignmentIsWrittenAndRead) {
  const lowbit::io::Tensor t{lowbit::io::DType::f32, {3}, std::vector<std::uint8_t>(12, 0x3f)};
  C::GgufWriteOptions o;
  o.alignment = 64;
  o.metadata["general.name"] = "tiny";
  const std::string path = dir_for_output() + "/aligned.gguf";
  C::write_gguf(path, {{"a", nullptr, &t}, {"b", nullptr, &t}}, o);
  const C::GgufFile f = C::read_gguf(path);
  EXPECT_EQ(f.alignment, 64u);
  EXPECT_EQ(f.metadata.at("general.name").text, "tiny");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].offset % 64, 0u);
  EXPECT_EQ(f.tensors[1].offset - f.tensors[0].offset, 64u);
  EXPECT_EQ(f.read(f.tensors[1]), t.bytes);
  EXPECT_EQ(file_bytes(path).size(), f.tensors[1].offset + 64);
}

// gguf_llama_name is gguf_source_name's inverse on gguf-py's Llama table (the names make_gguf.py writes).
TEST(GgufWrite, LlamaNamesBothWays) {
  const C::TensorSet src = C::read_tensor_set(fixtures + "/source");
  const C::GgufFile peer = C::read_gguf(fixtures + "/gguf/llama_mxfp4.gguf");
  const auto none = [](const std::string&) { return false; };
  ASSERT_EQ(peer.tensors.size(), src.where.size());
  for (const C::GgufTensor& t : peer.tensors) {
    const auto hf = C::gguf_source_name(t.name, none, {});
    ASSERT_TRUE(hf) << t.name;
    EXPECT_TRUE(src.contains(*hf)) << *hf;
    EXPECT_EQ(C::gguf_llama_name(*hf), t.name);
  }
  EXPECT_EQ(C::gguf_llama_name("model.layers.12.self_attn.o_proj.bias"), "blk.12.attn_output.bias");
  EXPECT_FALSE(C::gguf_llama_name("model.layers.x.mlp.up_proj.weight"));
  EXPECT_FALSE(C::gguf_llama_name("model.layers.0.mlp.experts.weight"));
  EXPECT_FALSE(C::gguf_source_name("blk.0.attn_qkv.weight", none, {}));
  EXPECT_EQ(C::gguf_source_name("x", none, {{"x", "y"}}), "y");
}
