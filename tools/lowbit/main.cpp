// The `lowbit` command line.  Its contract (subcommands, output formats, exit codes) is stable and
// documented in README.md; scripts and CI depend on it.  Exit codes: 0 success, 1 checked and found
// mismatches, 2 usage or input error with a message on stderr naming the culprit.
//
// Every subcommand lives in its own file (commands.hpp) and is registered here; nothing else happens here but
// parsing and the last word on errors.
#include <algorithm>
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "commands.hpp"
#include "lowbit/io.hpp"

#ifndef LOWBIT_VERSION
#define LOWBIT_VERSION "0.0.0"
#endif

namespace {

// What an error that no subcommand foresaw prints: it is lowbit's bug, never the input's, and the user is
// asked for what reproduces it.
int internal_error(const char* what) {
  std::fflush(stdout);
  std::cerr << "lowbit: internal error: " << lowbit::echo_text(what, lowbit::cli::max_message_bytes)
            << "\nlowbit: this is a bug in lowbit " LOWBIT_VERSION
               "; please report it with the command line and the input that caused it\n";
  return 2;
}

// Standard output is an output like any file: a write that failed (a full disk, /dev/full, a closed
// descriptor) is an error, exit 2, even when the command itself succeeded.
int finish(int code) {
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || !std::cout;
  if (!failed) return code;
  const int e = errno;
  std::cerr << "lowbit: standard output: write failed" << (e != 0 ? std::string(": ") + std::strerror(e) : "")
            << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lowbit: bit-exact emulator and conformance suite for low-precision ML number formats"};
  app.set_version_flag("--version", std::string("lowbit ") + LOWBIT_VERSION);
  app.require_subcommand(1);

  namespace C = lowbit::cli;
  for (auto add : {C::add_formats, C::add_profiles, C::add_decode, C::add_table, C::add_convert, C::add_conform,
                   C::add_gemm, C::add_quantize, C::add_verify_checkpoint, C::add_vectors, C::add_report,
                   C::add_merge, C::add_contract, C::add_state})
    add(app);
  // The commands that read files or stdin take --max-bytes (cli_util.hpp); a build that leaves a command out
  // (the fuzzed command line registers no report or merge) skips it.
  const std::vector<std::string> reading = {"gemm", "quantize", "dequantize", "verify-checkpoint", "check", "report",
                                            "merge"};
  for (CLI::App* sub : app.get_subcommands({}))
    if (std::find(reading.begin(), reading.end(), sub->get_name()) != reading.end()) C::add_max_bytes(sub);

  // CLI11 reports a stray word as "a subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->check_name(argv[1])) known = true;
    if (!known) {
      lowbit::cli::print_error(std::string("unknown subcommand '") + lowbit::echo_text(argv[1]) +
                               "' (see lowbit --help)");
      return 2;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return finish(e.get_exit_code());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return finish(app.exit(e));
    lowbit::cli::print_error(e.what());
    return 2;
  } catch (const lowbit::io::FileError& e) {
    // A file error no subcommand worded: it names the file (and the byte) itself.
    std::fflush(stdout);
    lowbit::cli::print_error(e.what());
    return 2;
  } catch (const std::exception& e) {
    return internal_error(e.what());
  } catch (...) {
    return internal_error("an exception of unknown type");
  }
  return finish(0);
}
