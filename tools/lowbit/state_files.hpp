// Training-state files for `lowbit state` and `lowbit verify-checkpoint --state`: JSON, or safetensors by the
// name's extension (.safetensors), as lowbit/training_state.hpp defines them.
#pragma once
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "lowbit/training_state.hpp"

namespace lowbit::cli {

inline bool is_safetensors_name(const std::string& path) {
  const std::string ext = ".safetensors";
  return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

inline nlohmann::json read_json_file(const std::string& path, const std::string& option) {
  try {
    return parse_json(read_all(path, option), option);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(option + ": '" + path + "': malformed JSON at byte " + std::to_string(e.byte));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(option + ": '" + path + "': malformed JSON: " + e.what());
  }
}

inline training::TrainingState read_state_file(const std::string& path, const std::string& option,
                                               const Format& element) {
  try {
    if (is_safetensors_name(path)) return training::state_from_safetensors(io::read_safetensors(path));
    return training::state_from_json(read_json_file(path, option), path, element);
  } catch (const io::FileError& e) { throw InputError(option + ": " + e.what()); }
}

inline std::vector<training::Step> read_steps_file(const std::string& path, const std::string& option) {
  try {
    return training::steps_from_json(read_json_file(path, option), path);
  } catch (const io::FileError& e) { throw InputError(option + ": " + e.what()); }
}

// Writes the state as `path`'s extension says ("-": JSON on stdout), through the one writer.
inline void write_state_file(const std::string& path, const training::TrainingState& s, const std::string& option,
                             const std::vector<std::string>& inputs) {
  if (path != "-" && is_safetensors_name(path)) {
    std::map<std::string, io::Tensor> tensors;
    std::map<std::string, std::string> metadata;
    training::state_tensors(s, tensors, metadata);
    try {
      io::write_safetensors(path, tensors, metadata, io::OutputOptions{inputs});
    } catch (const io::FileError& e) { throw InputError(option + ": " + e.what()); }
    return;
  }
  write_all(path, training::state_json(s).dump(1) + "\n", option, inputs);
}

}  // namespace lowbit::cli
