// The example plugins' reading of a recipe: the suites' recipe objects are flat JSON objects whose values
// are strings without escapes (vectors/SPEC.md section 3: nlohmann::json::dump of the manifest's recipe),
// e.g. {"block_size":"32","element":"e4m3","quantization_format":"mx",...}, so a key's value is the text
// between `"key":"` and the next quote.  A real plugin may use any JSON parser instead.
#pragma once
#include <string>

namespace lowbit_example {

inline bool recipe_value(const std::string& recipe, const char* key, std::string& value) {
  const std::string k = std::string("\"") + key + "\":\"";
  const auto at = recipe.find(k);
  if (at == std::string::npos) return false;
  const auto end = recipe.find('"', at + k.size());
  if (end == std::string::npos) return false;
  value = recipe.substr(at + k.size(), end - at - k.size());
  return true;
}

}  // namespace lowbit_example
