// Every subcommand lives in its own translation unit and is registered by main.cpp through one of these.
#pragma once
#include <CLI/CLI.hpp>

namespace lowbit::cli {

// `lowbit formats`, `profiles`, `decode`, `table`, `convert`: formats_cmd.cpp, profiles_cmd.cpp, decode_cmd.cpp,
// table_cmd.cpp, convert_cmd.cpp.
void add_formats(CLI::App& app);
void add_profiles(CLI::App& app);
void add_decode(CLI::App& app);
void add_table(CLI::App& app);
void add_convert(CLI::App& app);
// `lowbit conform`: defined in conform.cpp.
void add_conform(CLI::App& app);
// `lowbit gemm`: gemm_cmd.cpp.
void add_gemm(CLI::App& app);
// `lowbit quantize` and `lowbit dequantize`: quantize_cmd.cpp.
void add_quantize(CLI::App& app);
// `lowbit verify-checkpoint`: checkpoint_cmd.cpp.
void add_verify_checkpoint(CLI::App& app);
// `lowbit vectors`, `lowbit check` and `lowbit gate`: vectors_cmd.cpp.
void add_vectors(CLI::App& app);
// `lowbit report`: report_cmd.cpp.
void add_report(CLI::App& app);
// `lowbit merge`: merge_cmd.cpp.
void add_merge(CLI::App& app);
// `lowbit contract`: contract_cmd.cpp.
void add_contract(CLI::App& app);
// `lowbit state`: state_cmd.cpp.
void add_state(CLI::App& app);

}  // namespace lowbit::cli
