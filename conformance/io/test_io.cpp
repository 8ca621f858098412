// Tensor files: .npy and safetensors round trips, files written by numpy and by the safetensors
// reference implementation, and every kind of bad file (each must be a lowbit::io::FileError naming
// the file and the byte offset or JSON key at fault).
//
// .npy:        https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
// safetensors: https://github.com/huggingface/safetensors (README, "Format")

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "lowbit/io.hpp"

namespace fs = std::filesystem;
using lowbit::io::DType;
using lowbit::io::FileError;
using lowbit::io::Tensor;
using Bytes = std::vector<std::uint8_t>;
using Shape = std::vector<std::uint64_t>;

namespace {

const fs::path kFixtures{LOWBIT_IO_FIXTURES};

// A fresh directory per test, removed afterwards.
class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("lowbit_io_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    return names;
  }
  fs::path dir_;
};

Bytes slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void spit(const std::string& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

Bytes concat(const std::string& s, const Bytes& tail = {}) {
  Bytes b(s.begin(), s.end());
  b.insert(b.end(), tail.begin(), tail.end());
  return b;
}

// Deterministic pseudo-random bytes.
Bytes pattern(std::size_t n, std::uint32_t seed) {
  Bytes b(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& v : b) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v = static_cast<std::uint8_t>(x);
  }
  return b;
}

std::uint32_t f32_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// Expects `f` to throw a FileError for `file` located at `where` ("byte N" or "key \"k\""), whose
// message contains `problem`.
void expect_file_error(const std::function<void()>& f, const std::string& file, const std::string& where,
                       const std::string& problem) {
  try {
    f();
  } catch (const FileError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.path(), file) << msg;
    EXPECT_EQ(e.where(), where) << msg;
    EXPECT_NE(msg.find(file), std::string::npos) << msg;
    EXPECT_NE(msg.find(where), std::string::npos) << msg;
    EXPECT_NE(msg.find(problem), std::string::npos) << "expected \"" << problem << "\" in: " << msg;
    return;
  }
  ADD_FAILURE() << "no FileError for " << file << " (expected " << where << ": " << problem << ")";
}

// A .npy file with a hand-written header dict, padded as numpy pads it.
Bytes npy_bytes(const std::string& dict, const Bytes& data, int major = 1, int minor = 0) {
  const std::size_t pre = major == 1 ? 10 : 12;
  std::size_t total = (pre + dict.size() + 1 + 63) / 64 * 64;
  const std::size_t hlen = total - pre;
  std::string s = "\x93NUMPY";
  s += static_cast<char>(major);
  s += static_cast<char>(minor);
  for (std::size_t i = 0; i < pre - 8; ++i) s += static_cast<char>((hlen >> (8 * i)) & 0xff);
  s += dict;
  s.append(hlen - dict.size() - 1, ' ');
  s += '\n';
  return concat(s, data);
}

// A safetensors file with a hand-written JSON header (not padded) and buffer.
Bytes st_bytes(const std::string& header, const Bytes& buffer) {
  std::string s;
  for (int i = 0; i < 8; ++i) s += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  s += header;
  s.append(buffer.begin(), buffer.end());
  return Bytes(s.begin(), s.end());
}

const std::vector<DType> kNpyDTypes{DType::boolean, DType::u8,  DType::i8,  DType::u16, DType::i16,
                                    DType::u32,     DType::i32, DType::u64, DType::i64, DType::f16,
                                    DType::bf16,    DType::f32, DType::f64};
const std::vector<DType> kAllDTypes{DType::boolean, DType::u8,      DType::i8,      DType::u16,     DType::i16,
                                    DType::u32,     DType::i32,     DType::u64,     DType::i64,     DType::f16,
                                    DType::bf16,    DType::f32,     DType::f64,     DType::f8_e4m3, DType::f8_e5m2,
                                    DType::f8_e8m0, DType::f6_e2m3, DType::f6_e3m2, DType::f4};
const std::vector<Shape> kShapes{{}, {0}, {1}, {5}, {3, 4}, {2, 0, 3}, {2, 3, 4}, {1, 1, 1, 1, 7}, {0, 0}};

}  // namespace

// ---- dtypes ----------------------------------------------------------------------------------------

TEST(IoDType, NamesRoundTripAndWidths) {
  for (DType d : kAllDTypes) {
    const auto back = lowbit::io::dtype_from_name(lowbit::io::dtype_name(d));
    ASSERT_TRUE(back.has_value()) << lowbit::io::dtype_name(d);
    EXPECT_EQ(*back, d);
  }
  EXPECT_EQ(lowbit::io::dtype_bits(DType::f4), 4u);
  EXPECT_EQ(lowbit::io::dtype_bits(DType::f6_e3m2), 6u);
  EXPECT_EQ(lowbit::io::dtype_bits(DType::bf16), 16u);
  EXPECT_EQ(lowbit::io::npy_descr(DType::bf16), "<u2");
  EXPECT_EQ(lowbit::io::npy_descr(DType::u8), "|u1");
  EXPECT_FALSE(lowbit::io::npy_descr(DType::f8_e4m3).has_value());
  EXPECT_FALSE(lowbit::io::dtype_from_name("F7").has_value());
  const Shape overflow{1ull << 32, 1ull << 32};
  EXPECT_FALSE(lowbit::io::element_count(overflow).has_value());
  EXPECT_EQ(lowbit::io::element_count(Shape{}), 1u);
  EXPECT_EQ(lowbit::io::byte_count(DType::f4, 6), 3u);
  EXPECT_FALSE(lowbit::io::byte_count(DType::f4, 3).has_value());
  EXPECT_FALSE(lowbit::io::byte_count(DType::f32, 1ull << 62).has_value());
}

TEST(IoDType, TypedAccessors) {
  const std::vector<float> v{1.0f, -2.5f, 0.0f};
  const Tensor t = Tensor::from_values<float>(DType::f32, {3}, v);
  EXPECT_EQ(t.values<float>(), v);
  EXPECT_EQ(t.values<std::uint32_t>()[1], f32_bits(-2.5f));
  EXPECT_THROW(t.values<std::uint16_t>(), std::invalid_argument);
  const std::vector<std::uint8_t> three{1, 2, 3};
  EXPECT_THROW(Tensor::from_values<std::uint8_t>(DType::u8, {2, 2}, three), std::invalid_argument);
  const Tensor f4{DType::f4, {6}, {0x21, 0x43, 0x65}};
  EXPECT_NO_THROW(f4.check_consistent());
  EXPECT_THROW(f4.values<std::uint8_t>(), std::invalid_argument);
}

// ---- .npy ------------------------------------------------------------------------------------------

TEST_F(IoTest, NpyRoundTripEveryDTypeAndShape) {
  std::uint32_t seed = 1;
  for (DType d : kNpyDTypes) {
    for (const Shape& shape : kShapes) {
      const std::uint64_t n = *lowbit::io::element_count(shape);
      const Bytes data = pattern(n * lowbit::io::dtype_bits(d) / 8, seed++);
      const std::string p = path("a.npy");
      lowbit::io::write_npy(p, d, shape, data);
      const lowbit::io::NpyArray a = lowbit::io::read_npy(p, d);
      EXPECT_EQ(a.dtype, d);
      EXPECT_EQ(a.shape, shape);
      EXPECT_EQ(a.bytes, data) << lowbit::io::dtype_name(d);
      EXPECT_FALSE(a.fortran_order);
      EXPECT_EQ(a.version_major, 1);
      EXPECT_EQ(lowbit::io::encode_npy(d, shape, data), slurp(p));
      // numpy pads the preamble to a multiple of 64 bytes and ends the header with '\n'.
      const Bytes file = slurp(p);
      const std::size_t data_start = file.size() - data.size();
      EXPECT_EQ(data_start % 64, 0u);
      EXPECT_EQ(file[data_start - 1], '\n');
    }
  }
  EXPECT_EQ(listing(), std::vector<std::string>{"a.npy"});  // no temporaries left behind
}

TEST_F(IoTest, NpyBf16IsStoredAsUint16) {
  const std::vector<std::uint16_t> bits{0x3f80, 0xc000, 0x7fc0};
  const std::string p = path("b.npy");
  lowbit::io::write_npy(p, Tensor::from_values<std::uint16_t>(DType::bf16, {3}, bits));
  const lowbit::io::NpyArray plain = lowbit::io::read_npy(p);
  EXPECT_EQ(plain.dtype, DType::u16);  // the file says '<u2'
  const lowbit::io::NpyArray as_bf16 = lowbit::io::read_npy(p, DType::bf16);
  EXPECT_EQ(as_bf16.dtype, DType::bf16);
  EXPECT_EQ(as_bf16.values<std::uint16_t>(), bits);
  const Bytes file = slurp(p);
  EXPECT_NE(std::string(file.begin(), file.end()).find("'descr': '<u2'"), std::string::npos);
}

TEST_F(IoTest, NpyLongHeaderUsesVersion2) {
  const Shape shape(25000, 1);  // the dict alone is over 65535 bytes
  const Bytes data = pattern(4, 7);
  const std::string p = path("long.npy");
  lowbit::io::write_npy(p, DType::f32, shape, data);
  const Bytes file = slurp(p);
  EXPECT_EQ(file[6], 2);
  const lowbit::io::NpyArray a = lowbit::io::read_npy(p);
  EXPECT_EQ(a.version_major, 2);
  EXPECT_EQ(a.shape, shape);
  EXPECT_EQ(a.bytes, data);
}

// Our writer produces numpy's bytes exactly: the C-order fixtures written by numpy.save re-encode
// byte for byte.
TEST(IoNumpy, WriterMatchesNumpyByteForByte) {
  for (const char* name : {"f32_2x3.npy", "f16_4.npy", "f64_scalar.npy", "u8_2x2x2.npy", "u16_3.npy", "u32_2.npy",
                           "i8_4.npy", "bf16_2x3.npy", "f32_empty_0x3.npy"}) {
    const fs::path p = kFixtures / name;
    const lowbit::io::NpyArray a = lowbit::io::read_npy(p.string());
    EXPECT_EQ(lowbit::io::encode_npy(a.dtype, a.shape, a.bytes), slurp(p)) << name;
  }
}

TEST(IoNumpy, ReadsNumpyFiles) {
  const auto read = [](const char* name, DType d) { return lowbit::io::read_npy((kFixtures / name).string(), d); };
  {
    const auto a = read("f32_2x3.npy", DType::f32);
    EXPECT_EQ(a.shape, (Shape{2, 3}));
    const std::vector<float> v = a.values<float>();
    ASSERT_EQ(v.size(), 6u);
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(f32_bits(v[static_cast<std::size_t>(i)]), f32_bits(static_cast<float>(i) * 0.5f - 1.0f));
  }
  {
    const auto a = read("f16_4.npy", DType::f16);
    EXPECT_EQ(a.shape, (Shape{4}));
    // -0.5, -0.25, 0, 0.25 in binary16
    EXPECT_EQ(a.values<std::uint16_t>(), (std::vector<std::uint16_t>{0xb800, 0xb400, 0x0000, 0x3400}));
  }
  {
    const auto a = read("f64_scalar.npy", DType::f64);
    EXPECT_TRUE(a.shape.empty());
    EXPECT_EQ(a.values<double>(), std::vector<double>{3.25});
  }
  {
    const auto a = read("u8_2x2x2.npy", DType::u8);
    EXPECT_EQ(a.shape, (Shape{2, 2, 2}));
    EXPECT_EQ(a.bytes, (Bytes{0, 1, 2, 3, 4, 5, 6, 7}));
  }
  EXPECT_EQ(read("u16_3.npy", DType::u16).values<std::uint16_t>(), (std::vector<std::uint16_t>{0, 1, 65535}));
  EXPECT_EQ(read("u32_2.npy", DType::u32).values<std::uint32_t>(), (std::vector<std::uint32_t>{0, 4294967295u}));
  EXPECT_EQ(read("i8_4.npy", DType::i8).values<std::int8_t>(), (std::vector<std::int8_t>{-128, -1, 0, 127}));
  {
    const auto a = read("bf16_2x3.npy", DType::bf16);
    EXPECT_EQ(a.dtype, DType::bf16);
    EXPECT_EQ(a.shape, (Shape{2, 3}));
    const std::vector<std::uint16_t> v = a.values<std::uint16_t>();
    for (int i = 0; i < 6; ++i)  // exactly representable, so the bf16 pattern is the top half of f32's
      EXPECT_EQ(v[static_cast<std::size_t>(i)], f32_bits(static_cast<float>(i) * 0.25f - 2.0f) >> 16);
  }
  {
    const auto a = read("f32_empty_0x3.npy", DType::f32);
    EXPECT_EQ(a.shape, (Shape{0, 3}));
    EXPECT_TRUE(a.bytes.empty());
  }
  for (const char* name : {"f32_v2_2x3.npy", "f32_v3_2x3.npy"}) {
    const auto a = read(name, DType::f32);
    EXPECT_EQ(a.version_major, name[5] - '0') << name;
    EXPECT_EQ(a.values<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5})) << name;
  }
}

TEST(IoNumpy, FortranOrderIsReturnedInCOrder) {
  {
    const auto a = lowbit::io::read_npy((kFixtures / "f32_fortran_2x3x4.npy").string(), DType::f32);
    EXPECT_TRUE(a.fortran_order);
    EXPECT_EQ(a.shape, (Shape{2, 3, 4}));
    std::vector<float> want(24);
    for (int i = 0; i < 24; ++i) want[static_cast<std::size_t>(i)] = static_cast<float>(i);
    EXPECT_EQ(a.values<float>(), want);
  }
  {
    const auto a = lowbit::io::read_npy((kFixtures / "u16_fortran_3x5.npy").string(), DType::u16);
    EXPECT_TRUE(a.fortran_order);
    std::vector<std::uint16_t> want(15);
    for (int i = 0; i < 15; ++i) want[static_cast<std::size_t>(i)] = static_cast<std::uint16_t>(i);
    EXPECT_EQ(a.values<std::uint16_t>(), want);
  }
}

TEST_F(IoTest, FortranOrderHandWritten) {
  // Shape (2, 3) in Fortran order: the file lists column by column.
  const Bytes data{0, 3, 1, 4, 2, 5};
  const std::string p = path("f.npy");
  spit(p, npy_bytes("{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }", data));
  const auto a = lowbit::io::read_npy(p);
  EXPECT_EQ(a.bytes, (Bytes{0, 1, 2, 3, 4, 5}));
  // Rank 0, rank 1 and zero-size Fortran arrays read as they are.
  spit(p, npy_bytes("{'descr': '|u1', 'fortran_order': True, 'shape': (), }", {9}));
  EXPECT_EQ(lowbit::io::read_npy(p).bytes, Bytes{9});
  spit(p, npy_bytes("{'descr': '|u1', 'fortran_order': True, 'shape': (0, 4), }", {}));
  EXPECT_TRUE(lowbit::io::read_npy(p).bytes.empty());
  // Python 2 era headers: double quotes, 'L' suffixes, no trailing comma.
  spit(p, npy_bytes("{\"descr\": \"<u2\", \"fortran_order\": False, \"shape\": (2L, 1L)}", {1, 0, 2, 0}));
  EXPECT_EQ(lowbit::io::read_npy(p).values<std::uint16_t>(), (std::vector<std::uint16_t>{1, 2}));
}

// ---- .npy bad files --------------------------------------------------------------------------------

TEST_F(IoTest, NpyWrongMagic) {
  const std::string p = path("bad.npy");
  Bytes good = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", {0, 0, 0, 0});
  Bytes b = good;
  b[0] = 'X';
  spit(p, b);
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte 0", "wrong magic");
  b = good;
  b[3] = 'm';
  spit(p, b);
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte 3", "wrong magic");
  spit(p, {});
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte 0", "magic");
}

TEST_F(IoTest, NpyUnsupportedVersion) {
  const std::string p = path("bad.npy");
  spit(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", {0, 0, 0, 0}, 2, 0));
  EXPECT_NO_THROW(lowbit::io::read_npy(p));
  spit(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", {0, 0, 0, 0}, 4, 0));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte 6", "unsupported .npy version 4.0");
  spit(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", {0, 0, 0, 0}, 1, 1));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte 6", "unsupported .npy version 1.1");
}

TEST_F(IoTest, NpyTruncatedHeader) {
  const std::string p = path("bad.npy");
  const Bytes good = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", {0, 0, 0, 0});
  spit(p, Bytes(good.begin(), good.begin() + 7));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte 7", "version");
  spit(p, Bytes(good.begin(), good.begin() + 9));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte 9", "header length");
  spit(p, Bytes(good.begin(), good.begin() + 40));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte 8", "truncated header");
}

TEST_F(IoTest, NpyTruncatedData) {
  const std::string p = path("bad.npy");
  const Bytes good = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", pattern(24, 3));
  spit(p, Bytes(good.begin(), good.end() - 5));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte " + std::to_string(good.size() - 5), "truncated data");
}

TEST_F(IoTest, NpyBytesAfterTheData) {
  const std::string p = path("bad.npy");
  Bytes b = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", pattern(8, 3));
  const std::size_t end = b.size();
  b.push_back(0);
  spit(p, b);
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte " + std::to_string(end), "1 bytes follow the data");
}

TEST_F(IoTest, NpyShapeOverflow) {
  const std::string p = path("bad.npy");
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }";
  const std::string shape_at = std::to_string(10 + dict.find('('));
  spit(p, npy_bytes(dict, {}));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte " + shape_at, "overflows 64 bits");
  // Elements fit, bytes do not.
  spit(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }", {}));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte " + shape_at, "overflows 64 bits");
  // A dimension beyond 64 bits.
  spit(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", {}));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte " + std::to_string(10 + dict.find('(') + 1),
                    "integer does not fit in 64 bits");
}

TEST_F(IoTest, NpyHugeShapeRefusedBeforeAllocating) {
  // 2^40 floats declared by a file of a few bytes: refused by comparing with the file size.
  const std::string p = path("bad.npy");
  const Bytes b = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", {1, 2, 3, 4});
  spit(p, b);
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte " + std::to_string(b.size()),
                    "needs 4398046511104 bytes");
}

TEST_F(IoTest, NpyUnknownDType) {
  const std::string p = path("bad.npy");
  const std::string at = std::to_string(10 + std::string("{'descr': ").size());
  spit(p, npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", pattern(8, 1)));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte " + at, "unsupported dtype '<c8'");
  spit(p, npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", pattern(4, 1)));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte " + at, "big-endian");
  spit(p, npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", pattern(4, 1)));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte " + at, "structured");
}

TEST_F(IoTest, NpyDTypeMismatch) {
  const std::string p = path("a.npy");
  lowbit::io::write_npy(p, DType::f32, Shape{2}, pattern(8, 1));
  expect_file_error([&] { lowbit::io::read_npy(p, DType::f16); }, p, "key \"descr\"", "dtype mismatch: expected <f2");
  expect_file_error([&] { lowbit::io::read_npy(p, DType::bf16); }, p, "key \"descr\"", "the file holds <f4");
}

TEST_F(IoTest, NpyBadHeaderKeys) {
  const std::string p = path("bad.npy");
  spit(p, npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", pattern(4, 1)));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "key \"descr\"", "duplicated key");
  spit(p, npy_bytes("{'descr': '<f4', 'shape': (1,), }", pattern(4, 1)));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "key \"fortran_order\"", "missing");
  spit(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", pattern(4, 1)));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "key \"extra\"",
                    "unexpected key in the .npy header (byte 75)");
  spit(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': True}", pattern(4, 1)));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "key \"extra\"", "unexpected key");
  spit(p, npy_bytes("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", pattern(4, 1)));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte 44", "must be True or False");
  spit(p, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", pattern(4, 1)));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte 128", "ends inside its dict");
}

TEST_F(IoTest, NpyHeaderOver100MB) {
  const std::string p = path("bad.npy");
  std::string s = "\x93NUMPY";
  s += '\x02';
  s += '\0';
  const std::uint32_t n = 200'000'000;
  for (int i = 0; i < 4; ++i) s += static_cast<char>((n >> (8 * i)) & 0xff);
  s += "{'descr': '<f4'";
  spit(p, concat(s));
  expect_file_error([&] { lowbit::io::read_npy(p); }, p, "byte 8", "exceeds the limit of 100000000 bytes");
}

TEST_F(IoTest, NpyFileThatCannotBeOpened) {
  const std::string p = path("missing.npy");
  try {
    lowbit::io::read_npy(p);
    ADD_FAILURE() << "no FileError";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), p);
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
  EXPECT_THROW(lowbit::io::read_npy(dir_.string()), FileError);  // a directory
}

TEST(IoNumpy, ParseFromMemoryNamesTheSource) {
  const Bytes b{'x'};
  expect_file_error([&] { lowbit::io::parse_npy(b, "<stdin>"); }, "<stdin>", "byte 0", "wrong magic");
}

// ---- safetensors -----------------------------------------------------------------------------------

TEST_F(IoTest, SafetensorsRoundTripEveryDType) {
  std::map<std::string, Tensor> tensors;
  std::uint32_t seed = 11;
  for (DType d : kAllDTypes) {
    for (std::size_t s = 0; s < kShapes.size(); ++s) {
      Shape shape = kShapes[s];
      if (lowbit::io::dtype_bits(d) % 8 != 0) shape.push_back(4);  // whole bytes for F4 and F6
      const auto bytes = lowbit::io::byte_count(d, *lowbit::io::element_count(shape));
      ASSERT_TRUE(bytes.has_value());
      tensors[std::string{lowbit::io::dtype_name(d)} + "." + std::to_string(s)] =
          Tensor{d, shape, pattern(static_cast<std::size_t>(*bytes), seed++)};
    }
  }
  const std::map<std::string, std::string> meta{{"quantization_format", "nvfp4"},
                                                {"block_size", "16"},
                                                {"w.layout", "cublaslt-128x4"},
                                                {"unicode", "\xc3\xa9t\xc3\xa9"}};
  const std::string p = path("all.safetensors");
  lowbit::io::write_safetensors(p, tensors, meta);
  const lowbit::io::Safetensors f = lowbit::io::read_safetensors(p);
  EXPECT_EQ(f.path, p);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const Tensor& r = f.tensor(name, t.dtype);
    EXPECT_EQ(r.shape, t.shape) << name;
    EXPECT_EQ(r.bytes, t.bytes) << name;
  }
  EXPECT_EQ(lowbit::io::encode_safetensors(tensors, meta), slurp(p));
  EXPECT_EQ(listing(), std::vector<std::string>{"all.safetensors"});
}

TEST_F(IoTest, SafetensorsLayoutIsAligned) {
  std::map<std::string, Tensor> tensors{
      {"a", Tensor{DType::u8, {3}, {1, 2, 3}}},
      {"b", Tensor{DType::f64, {1}, pattern(8, 1)}},
      {"c", Tensor{DType::f16, {1}, {0, 0x3c}}},
      {"d", Tensor{DType::f32, {1}, pattern(4, 2)}},
  };
  const Bytes file = lowbit::io::encode_safetensors(tensors);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[static_cast<std::size_t>(i)];
  EXPECT_EQ(n % 8, 0u);
  const std::string header(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  EXPECT_EQ(header.front(), '{');
  // Widest first: b (f64) at 0, d (f32) at 8, c (f16) at 12, a (u8) at 14.
  EXPECT_NE(header.find("\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}"), std::string::npos) << header;
  EXPECT_NE(header.find("\"d\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}"), std::string::npos)
      << header;
  EXPECT_NE(header.find("\"c\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[12,14]}"), std::string::npos)
      << header;
  EXPECT_NE(header.find("\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[14,17]}"), std::string::npos)
      << header;
  EXPECT_EQ(header.find("__metadata__"), std::string::npos);  // absent when empty
  // No tensors at all: the reference writer's {} padded to 8.
  const Bytes empty = lowbit::io::encode_safetensors({});
  EXPECT_EQ(empty, (Bytes{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '}));
  EXPECT_TRUE(lowbit::io::parse_safetensors(empty, "empty").tensors.empty());
}

TEST(IoSafetensors, ReadsTheReferenceImplementationsFile) {
  const std::string p = (kFixtures / "checkpoint.safetensors").string();
  const lowbit::io::Safetensors f = lowbit::io::read_safetensors(p);
  EXPECT_EQ(f.meta_at("quantization_format"), "mxfp8");
  EXPECT_EQ(f.meta("block_size"), "32");
  EXPECT_EQ(f.meta("w.layout"), "row-major");
  EXPECT_FALSE(f.meta("nothing").has_value());
  EXPECT_EQ(f.tensors.size(), 7u);
  {
    const Tensor& t = f.tensor("w.data", DType::f8_e4m3);
    EXPECT_EQ(t.shape, (Shape{2, 32}));
    Bytes want(64);
    for (int i = 0; i < 64; ++i) want[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
    EXPECT_EQ(t.bytes, want);
  }
  EXPECT_EQ(f.tensor("w.block_scales", DType::u8).bytes, (Bytes{127, 128}));
  {
    const Tensor& t = f.tensor("w.tensor_scale", DType::f32);
    EXPECT_TRUE(t.shape.empty());
    EXPECT_EQ(t.values<float>(), std::vector<float>{0.5f});
  }
  EXPECT_EQ(f.tensor("b", DType::bf16).values<std::uint16_t>(), (std::vector<std::uint16_t>{0x3f80, 0xc000, 0}));
  EXPECT_EQ(f.tensor("h", DType::f16).values<std::uint16_t>(), (std::vector<std::uint16_t>{0xbc00, 0, 0x3c00, 0x4000}));
  EXPECT_EQ(f.tensor("d", DType::f64).values<double>(), std::vector<double>{-2.5});
  EXPECT_EQ(f.tensor("empty", DType::f32).shape, (Shape{0, 4}));
}

TEST_F(IoTest, SafetensorsWriterRefusesBadTensors) {
  const std::string p = path("out.safetensors");
  EXPECT_THROW(lowbit::io::write_safetensors(p, {{"x", Tensor{DType::f32, {2}, {1, 2, 3}}}}), std::invalid_argument);
  EXPECT_THROW(lowbit::io::write_safetensors(p, {{"__metadata__", Tensor{DType::u8, {1}, {1}}}}),
               std::invalid_argument);
  EXPECT_THROW(lowbit::io::write_safetensors(p, {{"x", Tensor{DType::f4, {3}, {1, 2}}}}), std::invalid_argument);
  EXPECT_THROW(lowbit::io::write_npy(p, DType::f8_e4m3, Shape{1}, Bytes{1}), std::invalid_argument);
  EXPECT_TRUE(listing().empty());
}

// ---- safetensors bad files -------------------------------------------------------------------------

namespace {
const std::string kTwo = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
}

TEST_F(IoTest, SafetensorsTooShort) {
  const std::string p = path("bad.safetensors");
  spit(p, {1, 2, 3});
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte 3", "shorter than the 8-byte header length");
}

TEST_F(IoTest, SafetensorsHeaderOver100MB) {
  const std::string p = path("bad.safetensors");
  Bytes b = st_bytes(kTwo, pattern(8, 1));
  const std::uint64_t n = 100'000'001;
  for (int i = 0; i < 8; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(n >> (8 * i));
  spit(p, b);
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte 0", "exceeds the limit of 100000000 bytes");
  for (int i = 0; i < 8; ++i) b[static_cast<std::size_t>(i)] = 0xff;  // 2^64 - 1
  spit(p, b);
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte 0", "exceeds the limit");
}

TEST_F(IoTest, SafetensorsTruncatedHeader) {
  const std::string p = path("bad.safetensors");
  const Bytes b = st_bytes(kTwo, {});
  spit(p, Bytes(b.begin(), b.begin() + 20));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte 0", "truncated header");
}

TEST_F(IoTest, SafetensorsHeaderNotJsonObject) {
  const std::string p = path("bad.safetensors");
  spit(p, st_bytes(" {}", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte 8", "must start with '{'");
  spit(p, st_bytes(R"({"x": [1, 2,, 3]})", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte 20", "invalid JSON header");
  spit(p, st_bytes(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} trailing)", pattern(8, 1)));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte 65", "invalid JSON header");
  spit(p, st_bytes("{\"x\xff\":1}", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte 11", "invalid JSON header");
  spit(p, st_bytes(R"({"x":3})", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x\"", "must be an object");
}

// Found by fuzz_files: a JSON number beyond a double (nlohmann's out_of_range.406, not a parse_error)
// escaped parse_safetensors as a foreign exception and aborted the command line.
TEST_F(IoTest, SafetensorsHeaderNumberTooLargeForADouble) {
  const std::string p = path("bad.safetensors");
  spit(p, st_bytes(R"({"x":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}})", pattern(4, 1)));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte 8", "invalid JSON header");
  spit(p, st_bytes(R"({"__metadata__":{"a":"b"},"x":-31e431})", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte 8", "number overflow");
}

TEST_F(IoTest, SafetensorsTruncatedData) {
  const std::string p = path("bad.safetensors");
  const Bytes good = st_bytes(kTwo, pattern(8, 1));
  spit(p, Bytes(good.begin(), good.end() - 3));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.data_offsets\"",
                    "runs past the end of the data buffer (5 bytes from byte " + std::to_string(8 + kTwo.size()) + ")");
}

TEST_F(IoTest, SafetensorsHugeTensorRefusedBeforeAllocating) {
  const std::string p = path("bad.safetensors");
  spit(p, st_bytes(R"({"x":{"dtype":"F32","shape":[274877906944],"data_offsets":[0,1099511627776]}})", pattern(8, 1)));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.data_offsets\"", "runs past the end");
}

TEST_F(IoTest, SafetensorsOffsetsThatDoNotMatchTheShape) {
  const std::string p = path("bad.safetensors");
  spit(p, st_bytes(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", pattern(8, 1)));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.data_offsets\"",
                    "holds 8 bytes, shape (3,) of F32 needs 12");
  spit(p, st_bytes(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", pattern(8, 1)));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.data_offsets\"", "end 0 is before begin 8");
  spit(p, st_bytes(R"({"x":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}})", pattern(1, 1)));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.shape\"", "whole number of bytes");
  spit(p, st_bytes(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", pattern(8, 1)));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.data_offsets\"", "[begin, end]");
}

TEST_F(IoTest, SafetensorsOverlappingOffsets) {
  const std::string p = path("bad.safetensors");
  spit(p, st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                   pattern(12, 1)));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"b.data_offsets\"", "overlaps tensor \"a\"");
  // Two tensors sharing the same bytes.
  spit(p, st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})",
                   pattern(8, 1)));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"b.data_offsets\"", "overlaps tensor \"a\"");
}

TEST_F(IoTest, SafetensorsHolesInTheBuffer) {
  const std::string p = path("bad.safetensors");
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})";
  spit(p, st_bytes(header, pattern(20, 1)));
  expect_file_error(
      [&] { lowbit::io::read_safetensors(p); }, p, "key \"b.data_offsets\"",
      "bytes [8, 12) of the data buffer (from byte " + std::to_string(8 + header.size() + 8) + ") belong to no tensor");
  spit(p, st_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", pattern(12, 1)));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"a.data_offsets\"", "bytes [0, 4)");
  // Bytes after the last tensor.
  spit(p, st_bytes(kTwo, pattern(10, 1)));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte " + std::to_string(8 + kTwo.size() + 8),
                    "2 bytes after the last tensor");
}

TEST_F(IoTest, SafetensorsShapeOverflow) {
  const std::string p = path("bad.safetensors");
  spit(p, st_bytes(R"({"x":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.shape\"", "overflows 64 bits");
  spit(p, st_bytes(R"({"x":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.shape\"", "within 64 bits");
  spit(p, st_bytes(R"({"x":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,0]}})", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.shape\"", "non-negative 64-bit integer");
  spit(p, st_bytes(R"({"x":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.shape\"", "non-negative 64-bit integer");
  spit(p, st_bytes(R"({"x":{"dtype":"U8","shape":[1.5],"data_offsets":[0,0]}})", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.shape\"", "non-negative 64-bit integer");
}

TEST_F(IoTest, SafetensorsUnknownDType) {
  const std::string p = path("bad.safetensors");
  spit(p, st_bytes(R"({"x":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}})", {0}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.dtype\"", "unknown dtype \"F7\"");
  spit(p, st_bytes(R"({"x":{"dtype":7,"shape":[1],"data_offsets":[0,1]}})", {0}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.dtype\"", "must be a string");
}

TEST_F(IoTest, SafetensorsDTypeMismatchAndMissingNames) {
  const std::string p = path("a.safetensors");
  lowbit::io::write_safetensors(p, {{"w.data", Tensor{DType::u8, {2}, {1, 2}}}}, {{"block_size", "32"}});
  const lowbit::io::Safetensors f = lowbit::io::read_safetensors(p);
  expect_file_error([&] { f.tensor("w.data", DType::f8_e4m3); }, p, "key \"w.data.dtype\"",
                    "dtype mismatch: expected F8_E4M3, the file holds U8");
  expect_file_error([&] { f.tensor("w.block_scales"); }, p, "key \"w.block_scales\"", "no such tensor");
  expect_file_error([&] { f.meta_at("quantization_format"); }, p, "key \"__metadata__.quantization_format\"",
                    "missing");
}

TEST_F(IoTest, SafetensorsDuplicatedKeys) {
  const std::string p = path("bad.safetensors");
  spit(p, st_bytes(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                   R"("x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                   {0}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x\"", "duplicated key");
  spit(p, st_bytes(R"({"x":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", {0}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.dtype\"", "duplicated key");
  spit(p, st_bytes(R"({"__metadata__":{"k":"a","k":"b"}})", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"__metadata__.k\"", "duplicated key");
}

TEST_F(IoTest, SafetensorsBadEntries) {
  const std::string p = path("bad.safetensors");
  spit(p, st_bytes(R"({"__metadata__":{"k":1}})", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"__metadata__.k\"", "must be strings");
  spit(p, st_bytes(R"({"__metadata__":[]})", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"__metadata__\"", "object of strings");
  spit(p, st_bytes(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":0}})", {0}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.extra\"", "unexpected field");
  spit(p, st_bytes(R"({"x":{"dtype":"U8","data_offsets":[0,1]}})", {0}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "key \"x.shape\"", "missing");
  spit(p, st_bytes("[]", {}));
  expect_file_error([&] { lowbit::io::read_safetensors(p); }, p, "byte 8", "must start with '{'");
}

// ---- atomic writes ---------------------------------------------------------------------------------

TEST_F(IoTest, WriteIntoAMissingDirectoryLeavesNothing) {
  const std::string p = path("no/such/dir/a.npy");
  try {
    lowbit::io::write_npy(p, DType::u8, Shape{1}, Bytes{1});
    ADD_FAILURE() << "no FileError";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), p);
    EXPECT_NE(std::string(e.what()).find("cannot open its folder"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(listing().empty());
}

TEST_F(IoTest, AFolderAsTheTargetIsRefused) {
  // The destination is a folder: refused before anything is written (lowbit/output.hpp).
  fs::create_directories(dir_ / "taken" / "inside");
  const std::string p = path("taken");
  expect_file_error(
      [&] {
        lowbit::io::write_safetensors(p, {{"x", Tensor{DType::u8, {1}, {1}}}});
      },
      p, "", "exists and is a folder");
  EXPECT_EQ(listing(), std::vector<std::string>{"taken"});
}

TEST_F(IoTest, FailedWriteLeavesNoPartialFile) {
  // A file-size limit makes write() fail part-way (EFBIG); the temporary must go and an existing
  // file of the same name must keep its contents.
  const std::string p = path("big.npy");
  const Bytes old = pattern(100, 5);
  spit(p, old);
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  try {
    lowbit::io::write_npy(p, DType::f32, Shape{4096}, pattern(4 * 4096, 6));
  } catch (const FileError& e) {
    threw = true;
    EXPECT_EQ(e.path(), p);
    EXPECT_NE(std::string(e.what()).find("write failed"), std::string::npos) << e.what();
    EXPECT_EQ(e.where(), "byte 4096") << e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  EXPECT_EQ(listing(), std::vector<std::string>{"big.npy"});
  EXPECT_EQ(slurp(p), old);
  // Same for a new name: nothing at all is left.
  fs::remove(p);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::signal(SIGXFSZ, SIG_IGN);
  EXPECT_THROW(lowbit::io::write_safetensors(p, {{"x", Tensor{DType::u8, {10000}, pattern(10000, 7)}}}), FileError);
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(listing().empty());
}

TEST_F(IoTest, InvalidArgumentsWriteNothing) {
  const std::string p = path("a.npy");
  EXPECT_THROW(lowbit::io::write_npy(p, DType::f32, Shape{2}, Bytes{1, 2, 3}), std::invalid_argument);
  EXPECT_TRUE(listing().empty());
}

TEST_F(IoTest, WrittenFilesHaveOrdinaryPermissions) {
  const ::mode_t mask = ::umask(022);
  const std::string p = path("a.npy");
  lowbit::io::write_npy(p, DType::u8, Shape{1}, Bytes{1});
  ::umask(mask);
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(IoTest, OverwriteReplacesTheWholeFile) {
  const std::string p = path("a.npy");
  lowbit::io::write_npy(p, DType::u8, Shape{1000}, pattern(1000, 1));
  lowbit::io::write_npy(p, DType::u8, Shape{2}, Bytes{7, 8});
  EXPECT_EQ(lowbit::io::read_npy(p).bytes, (Bytes{7, 8}));
}

// ---- the Python side reads what we write -----------------------------------------------------------

TEST_F(IoTest, NumpyAndSafetensorsReadOurFiles) {
  if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 with numpy not found";
  lowbit::io::write_npy(path("f.npy"),
                        Tensor::from_values<float>(DType::f32, {2, 2}, std::vector<float>{1, -2, 0.5f, 3}));
  lowbit::io::write_npy(path("s.npy"), DType::f64, Shape{}, Bytes{0, 0, 0, 0, 0, 0, 0x10, 0x40});  // 4.0
  lowbit::io::write_npy(path("e.npy"), DType::u8, Shape{3, 0}, Bytes{});
  lowbit::io::write_safetensors(
      path("c.safetensors"),
      {{"w.data", Tensor{DType::u8, {2, 2}, {1, 2, 3, 4}}},
       {"w.tensor_scale", Tensor::from_values<float>(DType::f32, {}, std::vector<float>{0.25f})}},
      {{"quantization_format", "mxfp8"}});
  const std::string script = path("check.py");
  std::ofstream(script) << "import json, struct, sys\n"
                           "import numpy as np\n"
                           "d = sys.argv[1]\n"
                           "f = np.load(d + '/f.npy')\n"
                           "assert f.dtype == np.float32 and f.tolist() == [[1, -2], [0.5, 3]], f\n"
                           "s = np.load(d + '/s.npy')\n"
                           "assert s.shape == () and s.dtype == np.float64 and float(s) == 4.0, s\n"
                           "e = np.load(d + '/e.npy')\n"
                           "assert e.shape == (3, 0) and e.dtype == np.uint8, e\n"
                           "try:\n"
                           "    from safetensors.numpy import load_file\n"
                           "    from safetensors import safe_open\n"
                           "except ImportError:\n"
                           "    sys.exit(0)\n"
                           "t = load_file(d + '/c.safetensors')\n"
                           "assert t['w.data'].tolist() == [[1, 2], [3, 4]], t\n"
                           "assert t['w.tensor_scale'].shape == () and float(t['w.tensor_scale']) == 0.25, t\n"
                           "with safe_open(d + '/c.safetensors', 'np') as g:\n"
                           "    assert g.metadata() == {'quantization_format': 'mxfp8'}, g.metadata()\n";
  const std::string cmd = "python3 " + script + " " + dir_.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}
