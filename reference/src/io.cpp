// Tensor files: NumPy .npy and safetensors.  See lowbit/io.hpp for the formats and conventions.
//
// .npy:        https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
// safetensors: https://github.com/huggingface/safetensors (README, "Format"): 8-byte little-endian
//              header size N, N bytes of JSON starting with '{' (at most 100,000,000 bytes, possibly
//              padded with spaces), then the byte buffer, which the data_offsets must cover entirely.

#include "lowbit/io.hpp"
#include "lowbit/output.hpp"
#include "lowbit/text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

namespace lowbit::io {

static_assert(std::endian::native == std::endian::little,
              "lowbit::io keeps tensors as little-endian bytes and reads them in place");

namespace {

// The safetensors reference implementation refuses headers over 100,000,000 bytes; .npy headers are
// held to the same bound.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

std::string hex_byte(std::uint8_t b) { return hex(b, 2); }

[[noreturn]] void fail_at(const std::string& path, std::uint64_t byte, const std::string& problem) {
  throw FileError(path, "byte " + std::to_string(byte), problem);
}

[[noreturn]] void fail_key(const std::string& path, const std::string& key, const std::string& problem) {
  throw FileError(path, "key \"" + key + "\"", problem);
}

std::string shape_text(std::span<const std::uint64_t> shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::uint64_t load_le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// ---- byte sources: a file (sizes known before anything is read) or memory ----------------------

class Source {
 public:
  virtual ~Source() = default;
  virtual std::uint64_t size() const = 0;
  // Reads exactly n bytes at offset (the caller has checked offset + n <= size()).
  virtual void read(std::uint64_t offset, std::size_t n, std::uint8_t* dst) = 0;
  std::vector<std::uint8_t> read_vector(std::uint64_t offset, std::size_t n) {
    std::vector<std::uint8_t> v(n);
    if (n) read(offset, n, v.data());
    return v;
  }
};

class MemorySource final : public Source {
 public:
  explicit MemorySource(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::uint64_t size() const override { return bytes_.size(); }
  void read(std::uint64_t offset, std::size_t n, std::uint8_t* dst) override {
    std::memcpy(dst, bytes_.data() + offset, n);
  }

 private:
  std::span<const std::uint8_t> bytes_;
};

std::atomic<std::uint64_t> g_max_input_bytes{default_max_input_bytes};

class FileSource final : public Source {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    // O_NONBLOCK: a FIFO given as an input is refused below (not a regular file) instead of blocking open().
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) throw FileError(path, "", std::string{"cannot open: "} + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int e = errno;
      ::close(fd_);
      throw FileError(path, "", std::string{"cannot stat: "} + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw FileError(path, "", "not a regular file");
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
    if (size_ > max_input_bytes()) {
      ::close(fd_);
      throw FileError(path, "", "is " + std::to_string(size_) + " bytes, over the limit of " +
                                    std::to_string(max_input_bytes()) + " bytes per input");
    }
  }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  ~FileSource() override { ::close(fd_); }
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, std::size_t n, std::uint8_t* dst) override {
    std::size_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd_, dst + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail_at(path_, offset + done, std::string{"read failed: "} + std::strerror(errno));
      if (got == 0) fail_at(path_, offset + done, "file ended while reading (was it truncated meanwhile?)");
      done += static_cast<std::size_t>(got);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// ---- dtype table -------------------------------------------------------------------------------

struct DTypeRow {
  DType dtype;
  unsigned bits;
  std::string_view name;  // safetensors
  std::string_view npy;   // .npy descr written ("" when .npy cannot hold it)
};

constexpr std::array<DTypeRow, 19> kDTypes{{
    {DType::boolean, 8, "BOOL", "|b1"}, {DType::u8, 8, "U8", "|u1"},        {DType::i8, 8, "I8", "|i1"},
    {DType::u16, 16, "U16", "<u2"},     {DType::i16, 16, "I16", "<i2"},     {DType::u32, 32, "U32", "<u4"},
    {DType::i32, 32, "I32", "<i4"},     {DType::u64, 64, "U64", "<u8"},     {DType::i64, 64, "I64", "<i8"},
    {DType::f16, 16, "F16", "<f2"},     {DType::bf16, 16, "BF16", "<u2"},   {DType::f32, 32, "F32", "<f4"},
    {DType::f64, 64, "F64", "<f8"},     {DType::f8_e4m3, 8, "F8_E4M3", ""}, {DType::f8_e5m2, 8, "F8_E5M2", ""},
    {DType::f8_e8m0, 8, "F8_E8M0", ""}, {DType::f6_e2m3, 6, "F6_E2M3", ""}, {DType::f6_e3m2, 6, "F6_E3M2", ""},
    {DType::f4, 4, "F4", ""},
}};

const DTypeRow& row(DType d) {
  for (const auto& r : kDTypes)
    if (r.dtype == d) return r;
  return kDTypes[0];  // unreachable for a valid enumerator
}

// The dtype of a .npy descr.  Single-byte types are accepted with any byte-order mark ('|' is what
// numpy writes); wider ones only little-endian.  '<u2' reads as u16 (a caller wanting bf16 says so).
std::optional<DType> dtype_from_descr(std::string_view descr) {
  if (descr.size() < 3) return std::nullopt;
  const char order = descr[0];
  const std::string_view code = descr.substr(1);
  for (const auto& r : kDTypes) {
    if (r.npy.empty() || r.dtype == DType::bf16) continue;
    if (r.npy.substr(1) != code) continue;
    if (r.bits == 8 ? (order == '|' || order == '<' || order == '>' || order == '=') : order == '<') return r.dtype;
  }
  return std::nullopt;
}

// The dtype of an ml_dtypes descr (NpyRead): '<V1' / '|V1' / '<f1' (any byte-order mark) are one-byte codes,
// '<V2' / '|V2' two-byte codes.
std::optional<DType> untyped_from_descr(std::string_view descr) {
  if (descr.size() != 3) return std::nullopt;
  const char order = descr[0];
  const std::string_view code = descr.substr(1);
  if ((code == "V1" || code == "f1") && (order == '|' || order == '<' || order == '>' || order == '=')) return DType::u8;
  if (code == "V2" && (order == '|' || order == '<')) return DType::u16;
  return std::nullopt;
}

// ---- .npy header: a Python dict literal ----------------------------------------------------------
// numpy writes {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and
// ended by '\n'.  Old files may spell dimensions with an 'L' suffix (Python 2 longs).

struct PyValue {
  enum class Kind { string, boolean, tuple, other } kind = Kind::other;
  std::string text;
  bool flag = false;
  std::vector<std::uint64_t> ints;
  std::uint64_t offset = 0;  // file byte offset of the value
};

class DictParser {
 public:
  DictParser(std::string_view text, std::uint64_t base, const std::string& path) : s_(text), base_(base), path_(path) {}

  std::map<std::string, PyValue> parse() {
    std::map<std::string, PyValue> out;
    skip_space();
    expect('{');
    skip_space();
    while (peek() != '}') {
      const std::uint64_t key_at = here();
      if (peek() != '\'' && peek() != '"') fail_at(path_, key_at, "expected a quoted key in the .npy header");
      const std::string key = string_literal();
      skip_space();
      expect(':');
      skip_space();
      PyValue v = value();
      if (out.count(key))
        fail_key(path_, key, "duplicated key in the .npy header (byte " + std::to_string(key_at) + ")");
      out.emplace(key, std::move(v));
      skip_space();
      if (peek() == ',') {
        ++i_;
        skip_space();
      } else if (peek() != '}') {
        fail_at(path_, here(), "expected ',' or '}' in the .npy header");
      }
    }
    ++i_;
    skip_space();
    if (i_ != s_.size()) fail_at(path_, here(), "unexpected text after the .npy header dict");
    return out;
  }

 private:
  std::uint64_t here() const { return base_ + i_; }
  char peek() const {
    if (i_ >= s_.size()) fail_at(path_, here(), "the .npy header ends inside its dict");
    return s_[i_];
  }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail_at(path_, here(), std::string{"expected '"} + c + "' in the .npy header");
    ++i_;
  }
  std::string string_literal() {
    const char quote = s_[i_++];
    const std::size_t start = i_;
    while (peek() != quote) {
      if (s_[i_] == '\\') fail_at(path_, here(), "escape sequences are not supported in the .npy header");
      ++i_;
    }
    std::string out{s_.substr(start, i_ - start)};
    ++i_;
    return out;
  }
  bool word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    const std::size_t end = i_ + w.size();
    if (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) return false;
    i_ = end;
    return true;
  }
  std::uint64_t integer() {
    const std::uint64_t at = here();
    if (!std::isdigit(static_cast<unsigned char>(peek()))) fail_at(path_, at, "expected a non-negative integer");
    std::uint64_t v = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      const auto digit = static_cast<std::uint64_t>(s_[i_] - '0');
      if (__builtin_mul_overflow(v, std::uint64_t{10}, &v) || __builtin_add_overflow(v, digit, &v))
        fail_at(path_, at, "integer does not fit in 64 bits");
      ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'L' || s_[i_] == 'l')) ++i_;
    return v;
  }
  PyValue value() {
    PyValue v;
    v.offset = here();
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = PyValue::Kind::string;
      v.text = string_literal();
    } else if (word("True") || word("False")) {
      v.kind = PyValue::Kind::boolean;
      v.flag = s_[v.offset - base_] == 'T';
    } else if (c == '(') {
      v.kind = PyValue::Kind::tuple;
      ++i_;
      skip_space();
      while (peek() != ')') {
        v.ints.push_back(integer());
        skip_space();
        if (peek() == ',') {
          ++i_;
          skip_space();
        } else if (peek() != ')') {
          fail_at(path_, here(), "expected ',' or ')' in the shape");
        }
      }
      ++i_;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      v.ints.push_back(integer());  // an integer where the format has none: rejected by key
    } else if (c == '[' || c == '{') {
      // A structured dtype (list of fields) or a nested dict: skip it, balanced, and let the caller
      // reject it by kind.
      int depth = 0;
      do {
        const char d = peek();
        if (d == '\'' || d == '"') {
          string_literal();
          continue;
        }
        if (d == '[' || d == '{' || d == '(') ++depth;
        if (d == ']' || d == '}' || d == ')') --depth;
        ++i_;
      } while (depth > 0);
    } else {
      fail_at(path_, here(), "unexpected character '" + std::string(1, c) + "' in the .npy header");
    }
    return v;
  }

  std::string_view s_;
  std::size_t i_ = 0;
  std::uint64_t base_;
  const std::string& path_;
};

// Reorders Fortran-order element bytes into C order.
std::vector<std::uint8_t> fortran_to_c(const std::vector<std::uint8_t>& in, std::span<const std::uint64_t> shape,
                                       std::size_t elem) {
  std::vector<std::uint8_t> out(in.size());
  const std::size_t rank = shape.size();
  const std::uint64_t count = in.size() / elem;
  if (count == 0 || rank < 2) return in;
  std::vector<std::uint64_t> fstride(rank);
  std::uint64_t s = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    fstride[k] = s;
    s *= shape[k];
  }
  std::vector<std::uint64_t> idx(rank, 0);
  std::uint64_t src = 0;  // Fortran element index of idx
  for (std::uint64_t dst = 0; dst < count; ++dst) {
    std::memcpy(out.data() + dst * elem, in.data() + src * elem, elem);
    // Advance idx in C order (last axis fastest), keeping src in step.
    for (std::size_t k = rank; k-- > 0;) {
      if (++idx[k] < shape[k]) {
        src += fstride[k];
        break;
      }
      src -= fstride[k] * (shape[k] - 1);
      idx[k] = 0;
    }
  }
  return out;
}

NpyArray parse_npy_source(Source& src, const std::string& path, const NpyRead& how) {
  static constexpr std::array<std::uint8_t, 6> magic{0x93, 'N', 'U', 'M', 'P', 'Y'};
  const std::uint64_t size = src.size();
  std::array<std::uint8_t, 12> pre{};
  const std::size_t pre_n = static_cast<std::size_t>(std::min<std::uint64_t>(size, pre.size()));
  src.read(0, pre_n, pre.data());
  for (std::size_t i = 0; i < magic.size(); ++i) {
    if (i >= pre_n) fail_at(path, i, "file ends inside the .npy magic string");
    if (pre[i] != magic[i])
      fail_at(path, i, "not a .npy file: wrong magic (found " + hex_byte(pre[i]) + ", the magic is \\x93NUMPY)");
  }
  if (pre_n < 8) fail_at(path, pre_n, "file ends inside the .npy version bytes");
  NpyArray a;
  a.path = path;
  a.version_major = pre[6];
  a.version_minor = pre[7];
  if (a.version_major < 1 || a.version_major > 3 || a.version_minor != 0)
    fail_at(path, 6,
            "unsupported .npy version " + std::to_string(a.version_major) + "." + std::to_string(a.version_minor) +
                " (1.0, 2.0 and 3.0 are supported)");
  const int len_bytes = a.version_major == 1 ? 2 : 4;
  if (pre_n < static_cast<std::size_t>(8 + len_bytes)) fail_at(path, pre_n, "file ends inside the .npy header length");
  const std::uint64_t hlen = load_le(pre.data() + 8, len_bytes);
  const std::uint64_t hstart = 8 + static_cast<std::uint64_t>(len_bytes);
  if (hlen > kMaxHeaderBytes)
    fail_at(path, 8,
            "header length " + std::to_string(hlen) + " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
                " bytes");
  if (hstart + hlen > size)
    fail_at(path, 8,
            "header length " + std::to_string(hlen) + " runs past the end of the file (" + std::to_string(size) +
                " bytes): truncated header");
  const std::vector<std::uint8_t> hbytes = src.read_vector(hstart, static_cast<std::size_t>(hlen));
  const std::string_view htext{reinterpret_cast<const char*>(hbytes.data()), hbytes.size()};
  std::map<std::string, PyValue> dict = DictParser(htext, hstart, path).parse();

  for (const auto& [key, v] : dict)
    if (key != "descr" && key != "fortran_order" && key != "shape")
      fail_key(path, key, "unexpected key in the .npy header (byte " + std::to_string(v.offset) + ")");
  for (const char* key : {"descr", "fortran_order", "shape"})
    if (!dict.count(key)) fail_key(path, key, "missing from the .npy header");

  const PyValue& descr = dict["descr"];
  if (descr.kind != PyValue::Kind::string)
    fail_at(path, descr.offset, "unsupported dtype: structured dtypes are not supported");
  std::optional<DType> dt = dtype_from_descr(descr.text);
  a.descr = descr.text;
  if (!dt) {
    if (const std::optional<DType> codes = untyped_from_descr(descr.text)) {
      if (!how.untyped_codes)
        fail_at(path, descr.offset,
                "dtype '" + descr.text +
                    "' is how ml_dtypes saves its types (bfloat16, float8_*, float6_*, float4_*, float8_e8m0fnu), "
                    "and the file does not say which one: name the format to read its codes");
      dt = codes;
      a.untyped = true;
    } else {
      const bool big = descr.text.size() > 1 && descr.text[0] == '>';
      fail_at(path, descr.offset,
              "unsupported dtype '" + descr.text + "'" + (big ? " (big-endian data is not supported)" : ""));
    }
  }
  a.dtype = *dt;
  const PyValue& fortran = dict["fortran_order"];
  if (fortran.kind != PyValue::Kind::boolean) fail_at(path, fortran.offset, "fortran_order must be True or False");
  a.fortran_order = fortran.flag;
  const PyValue& shape = dict["shape"];
  if (shape.kind != PyValue::Kind::tuple) fail_at(path, shape.offset, "shape must be a tuple of integers");
  a.shape = shape.ints;

  const std::optional<std::uint64_t> count = element_count(a.shape);
  if (!count) fail_at(path, shape.offset, "the product of shape " + shape_text(a.shape) + " overflows 64 bits");
  const std::optional<std::uint64_t> nbytes = byte_count(a.dtype, *count);
  if (!nbytes) fail_at(path, shape.offset, "the byte count of shape " + shape_text(a.shape) + " overflows 64 bits");
  const std::uint64_t dstart = hstart + hlen;
  const std::uint64_t avail = size - dstart;
  if (*nbytes > avail)
    fail_at(path, size,
            "truncated data: shape " + shape_text(a.shape) + " of '" + descr.text + "' needs " +
                std::to_string(*nbytes) + " bytes from byte " + std::to_string(dstart) + ", the file holds " +
                std::to_string(avail));
  if (*nbytes < avail)
    fail_at(path, dstart + *nbytes,
            std::to_string(avail - *nbytes) + " bytes follow the data that shape " + shape_text(a.shape) + " declares");
  a.bytes = src.read_vector(dstart, static_cast<std::size_t>(*nbytes));
  if (a.fortran_order) a.bytes = fortran_to_c(a.bytes, a.shape, dtype_bits(a.dtype) / 8);
  return a;
}

void require_npy_dtype(NpyArray& a, DType expected) {
  const bool bf16_convention = expected == DType::bf16 && a.dtype == DType::u16;
  if (a.dtype != expected && !bf16_convention)
    fail_key(a.path, "descr",
             "dtype mismatch: expected " + std::string{npy_descr(expected).value_or(dtype_name(expected))} + " (" +
                 std::string{dtype_name(expected)} + "), the file holds " + std::string{*npy_descr(a.dtype)} + " (" +
                 std::string{dtype_name(a.dtype)} + ")");
  a.dtype = expected;
}

std::string npy_header(DType dtype, std::span<const std::uint64_t> shape) {
  const std::optional<std::string_view> descr = npy_descr(dtype);
  if (!descr) throw std::invalid_argument("write_npy: .npy cannot hold dtype " + std::string{dtype_name(dtype)});
  std::string dict =
      "{'descr': '" + std::string{*descr} + "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // Version 1.0 when the header length fits in 2 bytes, else 2.0; the whole preamble is padded with
  // spaces to a multiple of 64 bytes and ends with '\n', as numpy writes it.
  for (int major : {1, 2}) {
    const std::size_t pre = major == 1 ? 10 : 12;
    std::size_t total = pre + dict.size() + 1;
    total = (total + 63) / 64 * 64;
    const std::size_t hlen = total - pre;
    if (major == 1 && hlen > 0xffff) continue;
    std::string out;
    out += '\x93';
    out += "NUMPY";
    out += static_cast<char>(major);
    out += '\0';
    for (std::size_t i = 0; i < pre - 8; ++i) out += static_cast<char>((hlen >> (8 * i)) & 0xff);
    out += dict;
    out.append(hlen - dict.size() - 1, ' ');
    out += '\n';
    return out;
  }
  throw std::invalid_argument("write_npy: header too long");
}

void check_payload(DType dtype, std::span<const std::uint64_t> shape, std::size_t nbytes, const char* who) {
  const std::optional<std::uint64_t> count = element_count(shape);
  if (!count)
    throw std::invalid_argument(std::string{who} + ": the product of shape " + shape_text(shape) +
                                " overflows 64 bits");
  const std::optional<std::uint64_t> need = byte_count(dtype, *count);
  if (!need || *need != nbytes)
    throw std::invalid_argument(std::string{who} + ": shape " + shape_text(shape) + " of " +
                                std::string{dtype_name(dtype)} + " needs " +
                                (need ? std::to_string(*need) : std::string{"an overflowing number of"}) + " bytes, " +
                                std::to_string(nbytes) + " given");
}

// ---- safetensors ---------------------------------------------------------------------------------

using json = nlohmann::json;

// Parses the header, refusing duplicated keys at any depth (JSON allows them; safetensors readers
// disagree on which one wins, so a file that has them is ambiguous).
json parse_header_json(std::string_view text, std::uint64_t base, const std::string& path) {
  struct Frame {
    std::set<std::string> seen;
    std::string key;
  };
  std::vector<Frame> frames;
  const auto key_path = [&](const std::string& last) {
    std::string p;
    for (std::size_t i = 0; i + 1 < frames.size(); ++i) p += frames[i].key + ".";
    return p + last;
  };
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    // A safetensors header nests three levels ({name: {"shape": [...]}}); deeper nesting is refused while
    // parsing, before a tree of it is built (100 MB of '[' would otherwise take gigabytes).
    constexpr int max_header_depth = 64;
    if (depth > max_header_depth &&
        (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start))
      fail_at(path, base, "invalid JSON header: nested deeper than " + std::to_string(max_header_depth) + " levels");
    switch (event) {
      case json::parse_event_t::object_start: frames.emplace_back(); break;
      case json::parse_event_t::object_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string key = parsed.get<std::string>();
        if (!frames.back().seen.insert(key).second) fail_key(path, key_path(key), "duplicated key in the header");
        frames.back().key = key;
        break;
      }
      default: break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), cb);
  } catch (const json::parse_error& e) {
    const std::uint64_t at = base + (e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    fail_at(path, at, "invalid JSON header: " + what);
  } catch (const json::exception& e) {
    // A number the parser cannot hold (1e999 overflows a double: out_of_range.406) has no byte offset;
    // the header is named from its first byte.
    fail_at(path, base, std::string("invalid JSON header: ") + e.what());
  }
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;
};

std::uint64_t json_u64(const json& v, const std::string& path, const std::string& key, const char* what) {
  if (!v.is_number_unsigned())
    fail_key(path, key, std::string{what} + " must be a non-negative 64-bit integer, found " + v.dump());
  return v.get<std::uint64_t>();
}

Safetensors parse_safetensors_source(Source& src, const std::string& path) {
  const std::uint64_t size = src.size();
  if (size < 8)
    fail_at(path, size, "truncated: " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  std::array<std::uint8_t, 8> len{};
  src.read(0, 8, len.data());
  const std::uint64_t n = load_le(len.data(), 8);
  if (n > kMaxHeaderBytes)
    fail_at(
        path, 0,
        "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeaderBytes) + " bytes");
  if (8 + n > size)
    fail_at(path, 0,
            "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) +
                " bytes): truncated header");
  const std::vector<std::uint8_t> hbytes = src.read_vector(8, static_cast<std::size_t>(n));
  if (hbytes.empty() || hbytes[0] != '{') fail_at(path, 8, "the JSON header must start with '{'");
  const json header =
      parse_header_json(std::string_view{reinterpret_cast<const char*>(hbytes.data()), hbytes.size()}, 8, path);
  if (!header.is_object()) fail_at(path, 8, "the JSON header is not an object");

  const std::uint64_t buffer_start = 8 + n;
  const std::uint64_t buffer_len = size - buffer_start;
  Safetensors out;
  out.path = path;
  std::vector<Entry> entries;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) fail_key(path, name, "must be an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) fail_key(path, "__metadata__." + k, "metadata values must be strings, found " + s.dump());
        out.metadata.emplace(k, s.get<std::string>());
      }
      continue;
    }
    if (!v.is_object()) fail_key(path, name, "a tensor entry must be an object");
    for (const auto& [field, fv] : v.items()) {
      (void)fv;
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        fail_key(path, name + "." + field, "unexpected field in a tensor entry");
    }
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!v.contains(field)) fail_key(path, name + "." + field, "missing from the tensor entry");
    Entry e;
    e.name = name;
    const json& dt = v["dtype"];
    if (!dt.is_string()) fail_key(path, name + ".dtype", "must be a string");
    const std::optional<DType> d = dtype_from_name(dt.get<std::string>());
    if (!d) fail_key(path, name + ".dtype", "unknown dtype \"" + dt.get<std::string>() + "\"");
    e.dtype = *d;
    const json& sh = v["shape"];
    if (!sh.is_array()) fail_key(path, name + ".shape", "must be an array of integers");
    for (const json& dim : sh) e.shape.push_back(json_u64(dim, path, name + ".shape", "a dimension"));
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2) fail_key(path, name + ".data_offsets", "must be an array [begin, end]");
    e.begin = json_u64(off[0], path, name + ".data_offsets", "begin");
    e.end = json_u64(off[1], path, name + ".data_offsets", "end");

    const std::optional<std::uint64_t> count = element_count(e.shape);
    if (!count) fail_key(path, name + ".shape", "the product of shape " + shape_text(e.shape) + " overflows 64 bits");
    const std::optional<std::uint64_t> nbytes = byte_count(e.dtype, *count);
    if (!nbytes)
      fail_key(path, name + ".shape",
               "shape " + shape_text(e.shape) + " of " + std::string{dtype_name(e.dtype)} +
                   " does not fill a whole number of bytes within 64 bits");
    if (e.end < e.begin)
      fail_key(path, name + ".data_offsets",
               "end " + std::to_string(e.end) + " is before begin " + std::to_string(e.begin));
    if (e.end > buffer_len)
      fail_key(path, name + ".data_offsets",
               "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                   "] runs past the end of the data buffer (" + std::to_string(buffer_len) + " bytes from byte " +
                   std::to_string(buffer_start) + "): truncated data or a header that lies");
    if (e.end - e.begin != *nbytes)
      fail_key(path, name + ".data_offsets",
               "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] holds " +
                   std::to_string(e.end - e.begin) + " bytes, shape " + shape_text(e.shape) + " of " +
                   std::string{dtype_name(e.dtype)} + " needs " + std::to_string(*nbytes));
    entries.push_back(std::move(e));
  }

  // The buffer must be covered exactly: sorted by offsets, each tensor starts where the last ended.
  std::sort(entries.begin(), entries.end(), [](const Entry& l, const Entry& r) {
    return std::tie(l.begin, l.end, l.name) < std::tie(r.begin, r.end, r.name);
  });
  std::uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < covered)
      fail_key(
          path, e.name + ".data_offsets",
          "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] overlaps tensor \"" + prev->name + "\"");
    if (e.begin > covered)
      fail_key(path, e.name + ".data_offsets",
               "bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
                   ") of the data buffer (from byte " + std::to_string(buffer_start + covered) +
                   ") belong to no tensor: the buffer must be covered without holes");
    covered = e.end;
    prev = &e;
  }
  if (covered != buffer_len)
    fail_at(path, buffer_start + covered,
            std::to_string(buffer_len - covered) + " bytes after the last tensor belong to no tensor");

  // Everything is checked against the real size; now read.
  for (Entry& e : entries) {
    Tensor t;
    t.dtype = e.dtype;
    t.shape = std::move(e.shape);
    t.bytes = src.read_vector(buffer_start + e.begin, static_cast<std::size_t>(e.end - e.begin));
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

struct Layout {
  std::string header;  // padded JSON
  std::vector<std::pair<std::string, const Tensor*>> order;
};

Layout safetensors_layout(const std::map<std::string, Tensor>& tensors,
                          const std::map<std::string, std::string>& metadata) {
  Layout l;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__")
      throw std::invalid_argument("write_safetensors: a tensor may not be named __metadata__");
    check_payload(t.dtype, t.shape, t.bytes.size(), "write_safetensors");
    l.order.emplace_back(name, &t);
  }
  // Widest elements first, then by name: every tensor starts at a multiple of its element width
  // (the data start is 8-aligned), as the reference writer lays files out.
  std::stable_sort(l.order.begin(), l.order.end(), [](const auto& a, const auto& b) {
    return dtype_bits(a.second->dtype) > dtype_bits(b.second->dtype);
  });
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : l.order) {
    h[name] = {
        {"dtype", dtype_name(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  try {
    l.header = h.dump();
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string{"write_safetensors: "} + e.what());
  }
  l.header.append((8 - l.header.size() % 8) % 8, ' ');
  if (l.header.size() > kMaxHeaderBytes)
    throw std::invalid_argument("write_safetensors: header over 100,000,000 bytes");
  return l;
}

std::array<std::uint8_t, 8> le64(std::uint64_t v) {
  std::array<std::uint8_t, 8> b{};
  for (int i = 0; i < 8; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (8 * i));
  return b;
}

std::span<const std::uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

std::uint64_t max_input_bytes() { return g_max_input_bytes.load(std::memory_order_relaxed); }
void set_max_input_bytes(std::uint64_t bytes) { g_max_input_bytes.store(bytes, std::memory_order_relaxed); }

// ---- public: errors, dtypes, tensors -----------------------------------------------------------

FileError::FileError(std::string path, std::string where, const std::string& problem)
    : std::runtime_error(path + ": " + (where.empty() ? std::string{} : where + ": ") + problem),
      path_(std::move(path)),
      where_(std::move(where)) {}

unsigned dtype_bits(DType dtype) noexcept { return row(dtype).bits; }
std::string_view dtype_name(DType dtype) noexcept { return row(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (const auto& r : kDTypes)
    if (r.name == name) return r.dtype;
  return std::nullopt;
}

std::optional<std::string_view> npy_descr(DType dtype) noexcept {
  const std::string_view d = row(dtype).npy;
  if (d.empty()) return std::nullopt;
  return d;
}

std::optional<std::uint64_t> element_count(std::span<const std::uint64_t> shape) noexcept {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

std::optional<std::uint64_t> byte_count(DType dtype, std::uint64_t elements) noexcept {
  std::uint64_t bits = 0;
  if (__builtin_mul_overflow(elements, std::uint64_t{dtype_bits(dtype)}, &bits)) return std::nullopt;
  if (bits % 8 != 0) return std::nullopt;
  return bits / 8;
}

std::uint64_t Tensor::elements() const {
  const std::optional<std::uint64_t> n = element_count(shape);
  if (!n) throw std::invalid_argument("Tensor: the product of shape " + shape_text(shape) + " overflows 64 bits");
  return *n;
}

void Tensor::check_consistent() const { check_payload(dtype, shape, bytes.size(), "Tensor"); }

void Tensor::check_width(std::size_t bytes_per_element) const {
  const unsigned bits = dtype_bits(dtype);
  if (bits % 8 != 0 || bits / 8 != bytes_per_element)
    throw std::invalid_argument("Tensor: " + std::string{dtype_name(dtype)} + " elements are " + std::to_string(bits) +
                                " bits, not " + std::to_string(bytes_per_element * 8));
}

// ---- public: .npy --------------------------------------------------------------------------------

NpyArray read_npy(const std::string& path) { return read_npy(path, NpyRead{}); }

NpyArray read_npy(const std::string& path, const NpyRead& how) {
  FileSource src(path);
  return parse_npy_source(src, path, how);
}

NpyArray read_npy(const std::string& path, DType expected) {
  NpyArray a = read_npy(path);
  require_npy_dtype(a, expected);
  return a;
}

NpyArray parse_npy(std::span<const std::uint8_t> file, const std::string& name) {
  return parse_npy(file, name, NpyRead{});
}

NpyArray parse_npy(std::span<const std::uint8_t> file, const std::string& name, const NpyRead& how) {
  MemorySource src(file);
  return parse_npy_source(src, name, how);
}

std::vector<std::uint8_t> encode_npy(DType dtype, std::span<const std::uint64_t> shape,
                                     std::span<const std::uint8_t> bytes) {
  check_payload(dtype, shape, bytes.size(), "write_npy");
  const std::string header = npy_header(dtype, shape);
  std::vector<std::uint8_t> out(header.begin(), header.end());
  out.insert(out.end(), bytes.begin(), bytes.end());
  return out;
}

void write_npy(const std::string& path, DType dtype, std::span<const std::uint64_t> shape,
               std::span<const std::uint8_t> bytes, const OutputOptions& options) {
  check_payload(dtype, shape, bytes.size(), "write_npy");
  const std::string header = npy_header(dtype, shape);
  const std::array<std::span<const std::uint8_t>, 2> parts{as_bytes(header), bytes};
  write_output(path, parts, options);
}

void write_npy(const std::string& path, const Tensor& tensor, const OutputOptions& options) {
  write_npy(path, tensor.dtype, tensor.shape, tensor.bytes, options);
}

// ---- public: safetensors -------------------------------------------------------------------------

const Tensor& Safetensors::tensor(const std::string& name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) fail_key(path, name, "no such tensor in the file");
  return it->second;
}

const Tensor& Safetensors::tensor(const std::string& name, DType expected) const {
  const Tensor& t = tensor(name);
  if (t.dtype != expected)
    fail_key(path, name + ".dtype",
             "dtype mismatch: expected " + std::string{dtype_name(expected)} + ", the file holds " +
                 std::string{dtype_name(t.dtype)});
  return t;
}

std::optional<std::string> Safetensors::meta(const std::string& key) const {
  const auto it = metadata.find(key);
  if (it == metadata.end()) return std::nullopt;
  return it->second;
}

const std::string& Safetensors::meta_at(const std::string& key) const {
  const auto it = metadata.find(key);
  if (it == metadata.end()) fail_key(path, "__metadata__." + key, "missing from the file's metadata");
  return it->second;
}

Safetensors read_safetensors(const std::string& path) {
  FileSource src(path);
  return parse_safetensors_source(src, path);
}

Safetensors parse_safetensors(std::span<const std::uint8_t> file, const std::string& name) {
  MemorySource src(file);
  return parse_safetensors_source(src, name);
}

std::vector<std::uint8_t> encode_safetensors(const std::map<std::string, Tensor>& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  const Layout l = safetensors_layout(tensors, metadata);
  const auto n = le64(l.header.size());
  std::size_t total = n.size() + l.header.size();
  for (const auto& [name, t] : l.order) total += t->bytes.size();
  std::vector<std::uint8_t> out(total);
  std::size_t at = 0;
  const auto put = [&](const std::uint8_t* p, std::size_t k) {
    if (k) std::memcpy(out.data() + at, p, k);
    at += k;
  };
  put(n.data(), n.size());
  put(reinterpret_cast<const std::uint8_t*>(l.header.data()), l.header.size());
  for (const auto& [name, t] : l.order) put(t->bytes.data(), t->bytes.size());
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata, const OutputOptions& options) {
  const Layout l = safetensors_layout(tensors, metadata);
  const auto n = le64(l.header.size());
  std::vector<std::span<const std::uint8_t>> parts{std::span<const std::uint8_t>{n}, as_bytes(l.header)};
  for (const auto& [name, t] : l.order) parts.emplace_back(t->bytes);
  write_output(path, parts, options);
}

}  // namespace lowbit::io
