// What the checkpoint readers share (checkpoint_formats.cpp: tensor sets, compressed-tensors;
// checkpoint_modelopt.cpp: ModelOpt's export; checkpoint_gguf.cpp: GGUF files).  Not installed.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lowbit/checkpoint.hpp"

namespace lowbit::checkpoint::detail {

// A JSON file of at most 64 MiB; FileError naming the file otherwise.
nlohmann::json read_json(const std::string& path);
// FileError(path, key "KEY", why).
io::FileError key_error(const std::string& path, const std::string& key, const std::string& why);

std::string leaf_of(const std::string& module);    // the last dotted component
std::string parent_of(const std::string& module);  // all but the last, or empty
// The f32 bits of each value of a BF16, F16 or F32 tensor.
std::optional<std::vector<std::uint64_t>> float_bits(const io::Tensor& t);
scale::Compute compute_of(io::DType d);
float amax_of(const std::vector<float>& v);
// a is within 2% of 1 / b, and not within 2% of b: one scale stored as the other's reciprocal.
bool near_inverse(float a, float b);
std::string f32_text(std::uint32_t bits);  // "0x3f800000 (1)"
// A quantized weight's codes as stored (key `key`, of the `source_shape` weight, rows x cols): two FP4 codes a
// byte along each row (U8 [rows, ceil(cols / 2)]) when `packed`, else one F8_E4M3 (or U8) code each.  nullopt
// with `why` naming the key, its dtype and shape and what was expected, for a tensor that does not fit.
std::optional<std::vector<std::uint8_t>> stored_codes(const io::Tensor& t, const std::string& key,
                                                      const std::vector<std::uint64_t>& source_shape, bool packed,
                                                      std::string& why);
// Whether packed FP4 bytes (rows x cols codes) with each byte's halves swapped hold exactly `codes`: the
// even column stored in the high nibble.
bool nibbles_swapped(const std::vector<std::uint8_t>& bytes, std::size_t rows, std::size_t cols,
                     const std::vector<std::uint8_t>& codes);
// The projections of `fused` that m belongs with and that `present` says are there, m among them; empty when
// fewer than two.
std::vector<std::string> fused_group(const std::string& m, const std::vector<std::vector<std::string>>& fused,
                                     const std::function<bool(const std::string&)>& present);

// The ModelOpt reader (checkpoint_modelopt.cpp): `dir` holds hf_quant_config.json.
CheckpointReport verify_modelopt(const std::string& source, const std::string& dir, const CheckpointOptions& options);
// The GGUF reader (checkpoint_gguf.cpp): `path` is a GGUF file.
CheckpointReport verify_gguf(const std::string& source, const std::string& path, const CheckpointOptions& options);
// The weight_scale_inv reader (checkpoint_fp8block.cpp): `dir`'s config.json has quant_method "fp8".
CheckpointReport verify_fp8_block(const std::string& source, const std::string& dir);

}  // namespace lowbit::checkpoint::detail
