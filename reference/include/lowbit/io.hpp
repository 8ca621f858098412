// lowbit/io.hpp — tensor files: NumPy .npy and safetensors, read and written bit for bit.
//
// Formats (the specifications these readers and writers follow):
//  * .npy — NumPy's array file format, versions 1.0, 2.0 and 3.0:
//    https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
//    magic "\x93NUMPY", major and minor version bytes, a little-endian header length (2 bytes in
//    1.0, 4 bytes in 2.0 and 3.0), then a Python dict literal {'descr', 'fortran_order', 'shape'}
//    padded with spaces and ended by '\n', then the raw element bytes.
//  * safetensors — https://github.com/huggingface/safetensors (format section of its README):
//    an 8-byte little-endian header length N, N bytes of UTF-8 JSON
//    {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}},
//    then the byte buffer; offsets are relative to the buffer, which the tensors must cover
//    completely, without holes or overlaps.  Elements are little-endian, in C (row-major) order.
//
// Conventions:
//  * Every array is held as {dtype, shape, raw little-endian bytes in C order}.  A Fortran-order
//    .npy file is transposed on read, so what comes back is always in C order; writes are always
//    C order.
//  * bf16 in .npy: NumPy has no bfloat16 dtype, so bf16 tensors are stored as '<u2' (uint16) arrays
//    holding the bf16 bit patterns (numpy: `a.view(np.uint16)` of an ml_dtypes.bfloat16 array).
//    `write_npy` with DType::bf16 writes '<u2'; `read_npy(path, DType::bf16)` accepts '<u2' and
//    labels the result bf16.  safetensors has a native "BF16" dtype and uses it.
//  * Sub-byte safetensors dtypes (F4, F6_E2M3, F6_E3M2) are packed; their byte count is
//    elements × bits / 8 and must be whole.  .npy has no sub-byte dtypes.
//  * Every malformed file is a FileError naming the file and the byte offset (or the JSON key) at
//    fault.  Sizes declared by a header are checked against the real file size before anything is
//    allocated.  Caller mistakes (a byte count that does not match the shape) are
//    std::invalid_argument.
//  * Writes go through the one writer (lowbit/output.hpp): a temporary created exclusively beside the
//    target, every write and fsync checked, renamed into place last; a link, device or FIFO as the
//    target, or a target that is one of `options.inputs`, is refused; on any failure an existing file of
//    that name is left untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "lowbit/output.hpp"

namespace lowbit::io {

// A malformed or unreadable file.  what() reads "<path>: <where>: <problem>", where <where> is
// "byte <offset>" or "key \"<name>\"" (or empty when the whole file is at fault, e.g. it cannot be
// opened).  The command line maps this exception to exit status 2.
class FileError : public std::runtime_error {
 public:
  FileError(std::string path, std::string where, const std::string& problem);
  const std::string& path() const noexcept { return path_; }
  const std::string& where() const noexcept { return where_; }

 private:
  std::string path_;
  std::string where_;
};

// Element types of the two file formats.  Names follow safetensors' dtype list.
enum class DType : std::uint8_t {
  boolean,  // BOOL, |b1
  u8,       // U8, |u1
  i8,       // I8, |i1
  u16,      // U16, <u2
  i16,      // I16, <i2
  u32,      // U32, <u4
  i32,      // I32, <i4
  u64,      // U64, <u8
  i64,      // I64, <i8
  f16,      // F16, <f2
  bf16,     // BF16; in .npy stored as <u2 (see above)
  f32,      // F32, <f4
  f64,      // F64, <f8
  f8_e4m3,  // F8_E4M3 (safetensors only)
  f8_e5m2,  // F8_E5M2 (safetensors only)
  f8_e8m0,  // F8_E8M0 (safetensors only)
  f6_e2m3,  // F6_E2M3, packed (safetensors only)
  f6_e3m2,  // F6_E3M2, packed (safetensors only)
  f4,       // F4 (e2m1), packed (safetensors only)
};

// Bits per element.
unsigned dtype_bits(DType dtype) noexcept;
// The safetensors name ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType dtype) noexcept;
// Inverse of dtype_name; nullopt for a name this library does not know.
std::optional<DType> dtype_from_name(std::string_view name) noexcept;
// The .npy descr written for a dtype ("<f4", "|u1", bf16 → "<u2"); nullopt when .npy cannot hold it.
std::optional<std::string_view> npy_descr(DType dtype) noexcept;

// Elements of a shape (1 for rank 0); nullopt when the product overflows 64 bits.
std::optional<std::uint64_t> element_count(std::span<const std::uint64_t> shape) noexcept;
// Bytes that `elements` elements of `dtype` occupy; nullopt on overflow or a partial byte.
std::optional<std::uint64_t> byte_count(DType dtype, std::uint64_t elements) noexcept;

// One array: dtype, shape and the raw little-endian bytes in C order.
struct Tensor {
  DType dtype = DType::f32;
  std::vector<std::uint64_t> shape;  // empty: rank 0 (one element)
  std::vector<std::uint8_t> bytes;

  std::uint64_t elements() const;  // product of the shape
  std::size_t rank() const noexcept { return shape.size(); }

  // The elements as T (a copy), for a T as wide as one element: float for f32, std::uint16_t for
  // the bit patterns of f16/bf16/u16, std::uint8_t for u8 and the fp8 codes, ...  A T of another
  // width, or a sub-byte dtype, is std::invalid_argument.
  template <class T>
  std::vector<T> values() const {
    static_assert(std::is_trivially_copyable_v<T>);
    check_width(sizeof(T));
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    return out;
  }

  // A tensor holding a copy of `values` (sizeof(T) must be the width of `dtype`).
  template <class T>
  static Tensor from_values(DType dtype, std::vector<std::uint64_t> shape, std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    Tensor t{dtype, std::move(shape), {}};
    t.check_width(sizeof(T));
    t.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    t.check_consistent();
    return t;
  }

  // std::invalid_argument unless bytes.size() is exactly what dtype and shape require.
  void check_consistent() const;

 private:
  void check_width(std::size_t bytes_per_element) const;
};

// ---- bounds on inputs ------------------------------------------------------------------------

// The largest file read_npy and read_safetensors accept: 4 GiB per input by default.  The data a file
// declares is checked against the file's real size before anything is allocated; a file that really is
// that large (a sparse file with a 40 GB hole reads as 40 GB of zeros) is refused by this bound instead of
// being allocated in full.  Raised or lowered for the whole process with set_max_input_bytes.
inline constexpr std::uint64_t default_max_input_bytes = std::uint64_t{4} << 30;
std::uint64_t max_input_bytes();
void set_max_input_bytes(std::uint64_t bytes);

// ---- .npy ------------------------------------------------------------------------------------

struct NpyArray : Tensor {
  std::string path;            // the file it came from, for messages
  std::string descr;           // the dtype as the file's header spells it ('<f4', '|u1', '<V1', ...)
  bool fortran_order = false;  // how the file stored it; `bytes` are in C order regardless
  // An ml_dtypes array (see NpyRead): `dtype` is u8 or u16, and the format of its codes is not in the file.
  bool untyped = false;
  std::uint8_t version_major = 1;
  std::uint8_t version_minor = 0;
};

// How to read a .npy file.  ml_dtypes (0.6) saves its types with descrs that do not name them: bfloat16 as
// '<V2'; float8_e4m3fn, float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu, float6_*, float4_e2m1fn and int4 as
// '<V1'; float8_e5m2 as '<f1' (a kind and size numpy itself never writes).  Their bytes are the codes, one
// element per byte or per two bytes (4- and 6-bit types take a byte each, the code in the low bits).  With
// `untyped_codes` such a file reads as u8 / u16 codes marked `untyped`, for a caller that is told the format
// some other way; without it the file is refused, saying why.
struct NpyRead {
  bool untyped_codes = false;
};

// Reads a .npy file (any of the supported dtypes, C or Fortran order, any rank).
NpyArray read_npy(const std::string& path);
NpyArray read_npy(const std::string& path, const NpyRead& how);
// Same, requiring `expected`: a FileError naming the 'descr' key when the file holds another dtype.
// DType::bf16 accepts '<u2' (the bf16 convention) and labels the result bf16.
NpyArray read_npy(const std::string& path, DType expected);
// Parses .npy bytes already in memory; `name` stands for the file in messages.
NpyArray parse_npy(std::span<const std::uint8_t> file, const std::string& name);
NpyArray parse_npy(std::span<const std::uint8_t> file, const std::string& name, const NpyRead& how);

// Writes a C-order .npy file atomically (version 1.0, or 2.0 when the header needs it).
// std::invalid_argument when .npy cannot hold `dtype` or `bytes` does not match the shape;
// FileError when the file cannot be written.
void write_npy(const std::string& path, DType dtype, std::span<const std::uint64_t> shape,
               std::span<const std::uint8_t> bytes, const OutputOptions& options = {});
void write_npy(const std::string& path, const Tensor& tensor, const OutputOptions& options = {});
// The bytes write_npy would write.
std::vector<std::uint8_t> encode_npy(DType dtype, std::span<const std::uint64_t> shape,
                                     std::span<const std::uint8_t> bytes);

// ---- safetensors -----------------------------------------------------------------------------

struct Safetensors {
  std::string path;                             // the file it came from, for messages
  std::map<std::string, std::string> metadata;  // "__metadata__" (empty when absent)
  std::map<std::string, Tensor> tensors;        // by name

  bool contains(const std::string& name) const { return tensors.count(name) != 0; }
  // The named tensor; FileError naming the key when it is missing.
  const Tensor& tensor(const std::string& name) const;
  // Same, and FileError naming the key when its dtype is not `expected`.
  const Tensor& tensor(const std::string& name, DType expected) const;
  // A metadata value, or nullopt.
  std::optional<std::string> meta(const std::string& key) const;
  // A metadata value; FileError naming "__metadata__.<key>" when it is missing.
  const std::string& meta_at(const std::string& key) const;
};

// Reads a safetensors file; every check of the format above is made before the data is read.
Safetensors read_safetensors(const std::string& path);
// Parses safetensors bytes already in memory; `name` stands for the file in messages.
Safetensors parse_safetensors(std::span<const std::uint8_t> file, const std::string& name);

// Writes a safetensors file atomically.  Tensors are laid out by descending element width, then by
// name (so every tensor is aligned to its element width), and the header is padded with spaces to
// a multiple of 8 bytes, as the reference implementation does.  std::invalid_argument for a tensor
// whose bytes do not match its shape, or a tensor named "__metadata__"; FileError when the file
// cannot be written.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       const OutputOptions& options = {});
// The bytes write_safetensors would write.
std::vector<std::uint8_t> encode_safetensors(const std::map<std::string, Tensor>& tensors,
                                             const std::map<std::string, std::string>& metadata = {});

}  // namespace lowbit::io
