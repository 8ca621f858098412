// A quantization recipe as people write it down: the keys a checkpoint or a quantized directory records
// (W.quantization_format, W.block_size, ...), the command line's options and the Python package's keywords
// name the same fields, and this is the one place they become the library's scale::Options.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lowbit/scale.hpp"

namespace lowbit {

// Every field as text, empty (or 0, false) when not given: the scheme's row then supplies its default, and a
// given option the scheme does not take is refused (scale::resolve).
struct Recipe {
  std::string scheme;  // a scheme name, or block1x128 / block128x128 (the block scheme with that shape)
  std::string element, scale_rule, scale_format, nonfinite, variant, zero_scale, amax_nan, profile, rounding;
  std::string compute;  // f32, bf16, f16: the compressed-tensors variant's precision
  int block = 0;       // elements along a row
  int block_rows = 0;  // rows of a 2-D block (a recipe's "RxN")
  // The random Hadamard transform: the key "hadamard" is "false" (none), "true" (exact, as files written before
  // the te-bf16 arithmetic record it), "exact" or "te-bf16".
  scale::Hadamard hadamard = scale::Hadamard::none;
  int sr_bits = 0;  // random bits per element of a stochastic rounding
};

// The scheme spellings a recipe takes: the schemes' names and the two block shapes' ("tensor, ..., block1x128,
// block128x128").
std::string scheme_choices();
std::vector<std::string> scheme_spellings();

// The scheme options and element policy of a recipe, and the profile's own name ("" without one).  Throws
// ArgumentError whose argument is the recipe field at fault: scheme, element, block, scale_rule, scale_format,
// nonfinite, variant, zero_scale, amax_nan, eps, hadamard, compute, profile, rounding (and "to" for an element the
// profile has no conversion into).
struct BuiltRecipe {
  scale::Options options;
  std::string profile;
};
BuiltRecipe build(const Recipe& r);

// The recipe keys of a quantization (checkpoint metadata W.<key>, quantized.json "recipe"): quantization_format,
// element, block_size, scale_rule, scale_format, nonfinite, variant, zero_scale, hadamard, amax_nan, compute,
// profile, rounding, each where the scheme takes it (variant on the FP8 rows and compute only where not TE's).  Packing and layout are the file's own keys.
std::map<std::string, std::string> recipe_keys(const Recipe& r, const BuiltRecipe& built, const scale::Quantized& q);

// The inverse: a recipe from keys, `get(key)` returning a value or nullopt.  Throws ArgumentError whose argument
// is the key ("quantization_format", "block_size", "hadamard", ...).
Recipe recipe_from_keys(const std::function<std::optional<std::string>(const std::string&)>& get);

// The recipe key that names a field (ArgumentError's argument of build): scheme is "quantization_format", block
// "block_size", the others their own name.
std::string recipe_key(std::string_view field);

}  // namespace lowbit
