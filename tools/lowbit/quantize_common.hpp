// Shared by `lowbit quantize` / `dequantize` (quantize_cmd.cpp) and `lowbit verify-checkpoint`
// (checkpoint_cmd.cpp): the command line's quantization options and how the library's recipe and stored-form
// errors (lowbit/recipe.hpp, lowbit/quantized.hpp; ArgumentError) are worded here.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "lowbit/error.hpp"
#include "lowbit/quantized.hpp"
#include "lowbit/recipe.hpp"

namespace lowbit::cli {

using quantized::Packing;
using quantized::ScaleLayout;
using quantized::float_values;
using quantized::load_scales;
using quantized::matrix_dims;
using quantized::packed_shape;
using quantized::packing_bits;
using quantized::packing_for;
using quantized::quantized_json_version;
using quantized::store_codes;
using quantized::store_scales;

// The recipe (its fields as the command line's options; empty when not given) and the options of the
// command's modes.
struct QuantizeOptions : Recipe {
  std::string direction = "row", sr_bits_file, state, in, out, shape, in_format, scale_layout = "row-major";
  int axis = -1;
  long long sr_seed = -1;
  std::string hadamard_text;  // --hadamard[=exact|te-bf16], read into Recipe::hadamard
  bool pack = false;
  std::vector<std::string> tensors;  // checkpoint mode: the tensors to quantize (empty: every float tensor)
  // checkpoint mode, --export: an exporter's layout (checkpoint::export_checkpoint)
  std::string export_format, recipe, input_scales;
  std::vector<std::string> ignore;
};

// The recipe's options and element policy, and its profile's name; InputError naming the option at fault
// (--scheme, --element, --block, --scale-rule, ...; an element the profile cannot convert into is --element).
inline scale::Options build_options(const Recipe& o, std::string& profile_name) {
  try {
    BuiltRecipe b = build(o);
    profile_name = b.profile;
    return b.options;
  } catch (const ArgumentError& e) {
    throw InputError(flag_of(e.argument == "to" ? "element" : e.argument) + ": " + e.what());
  }
}
// A recipe read from keys (checkpoint metadata W.<key>, quantized.json's "recipe"); InputError naming the key
// as `key "<prefix><key>"`.
inline Recipe options_from_recipe(const std::function<std::optional<std::string>(const std::string&)>& get,
                                  const std::string& prefix) {
  try {
    return recipe_from_keys(get);
  } catch (const ArgumentError& e) {
    throw InputError("key \"" + prefix + e.argument + "\": " + e.what());
  }
}
// build_options for a recipe read from keys: the error names the recipe key.
inline scale::Options build_recipe_options(const Recipe& o, const std::string& prefix) {
  try {
    return build(o).options;
  } catch (const ArgumentError& e) {
    throw InputError("key \"" + prefix + recipe_key(e.argument) + "\": " + e.what());
  }
}
inline std::map<std::string, std::string> recipe_keys(const Recipe& o, const scale::Options& so,
                                                      const scale::Quantized& q, const std::string& profile_name) {
  return lowbit::recipe_keys(o, BuiltRecipe{so, profile_name}, q);
}
// InputError (naming `what`) unless `q`'s scales can be stored in `layout`.
inline void check_layout(const scale::Quantized& q, ScaleLayout layout, const std::string& what) {
  try {
    quantized::check_layout(q, layout);
  } catch (const ArgumentError& e) {
    throw InputError(what + ": " + e.what());
  }
}

}  // namespace lowbit::cli
