// The text inputs of the command line: `lowbit convert` (hex bits, text literals, random bits, --raw),
// `lowbit quantize` (text mode), `lowbit dequantize` (the JSON quantize writes) and `lowbit gemm` (one JSON
// object), run in-process on fuzzed stdin.  The command must finish with 0 (or 1), or with 2 and a
// "lowbit: ..." message naming the culprit; never a crash, a hang, a sanitizer report or another
// exception.  The first byte picks the command line; the rest is stdin.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "fuzz_support.hpp"

int lowbit_cli_main(int argc, char** argv);  // tools/lowbit/main.cpp, compiled with main renamed

namespace fuzz = lowbit::fuzz;

namespace {

const std::vector<std::vector<const char*>> kCommands = {
    {"convert", "--from", "text", "--to", "e4m3", "--flags"},
    {"convert", "--from", "text", "--to", "e2m1", "--rounding", "sr-a", "--sr-bits", "8", "--flags"},
    {"convert", "--from", "text", "--to", "bf16", "--trace"},
    {"convert", "--to", "e4m3", "--profile", "cuda", "--flags"},
    {"convert", "--from", "bf16", "--to", "e5m2", "--rounding", "sr-c", "--sr-bits", "32"},
    {"convert", "--from", "f64", "--to", "binary8p3se", "--subnormals", "ftz-daz", "--trace"},
    {"convert", "--from", "text", "--to", "e8m0", "--profile", "cuda", "--rounding", "rup", "--trace"},
    {"convert", "--from", "text", "--to", "e2m1", "--profile", "llvm"},
    {"convert", "--from", "e4m3", "--to", "f16"},
    {"convert", "--to", "e4m3", "--profile", "cuda", "--raw"},
    {"convert", "--from", "bf16", "--to", "e2m1", "--raw"},
    {"convert", "--from", "e3m2", "--to", "bf16", "--raw"},
    {"quantize", "--scheme", "mx", "--element", "e2m1", "--block", "4", "--in", "-", "--out", "-"},
    {"quantize", "--scheme", "tensor", "--in", "-", "--out", "-"},
    {"quantize", "--scheme", "nvfp4", "--in", "-", "--out", "-"},
    {"quantize", "--scheme", "block", "--block", "4", "--shape", "2,8", "--in", "-", "--out", "-"},
    {"quantize", "--scheme", "channel", "--shape", "2,2", "--in-format", "bf16", "--in", "-", "--out", "-"},
    {"quantize", "--scheme", "mx", "--element", "e4m3", "--rounding", "sr-b", "--sr-bits", "8", "--sr-seed", "7",
     "--in", "-", "--out", "-"},
    {"quantize", "--scheme", "nvfp4", "--variant", "4over6", "--in-format", "f16", "--in", "-", "--out", "-"},
    {"dequantize", "--in", "-", "--out", "-"},
    {"dequantize", "--exact", "--in", "-", "--out", "-"},
    {"gemm", "--model", "exact", "--a", "-", "--out", "-"},
    {"gemm", "--model", "hopper-fp8", "--a", "-", "--out", "-"},
    {"gemm", "--model", "blackwell-mxf8f6f4", "--a", "-", "--out", "-"},
    {"gemm", "--model", "blackwell-mxf4nvf4", "--a", "-", "--out", "-"},
    {"gemm", "--model", "ampere-f16-f16acc", "--a", "-", "--out", "-"},
    {"gemm", "--model", "f32-sequential", "--a", "-", "--out", "-"},
    {"gemm", "--model", "hopper-fp8-mma-sync", "--a", "-", "--out", "-"},
};

struct Capture : std::stringbuf {};

int stdin_fd = -1;
Capture* err_capture = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  stdin_fd = memfd_create("lowbit-fuzz-stdin", 0);
  if (stdin_fd < 0) fuzz::fail("memfd_create");
  // Command output goes nowhere; messages are captured and checked.
  if (!std::freopen("/dev/null", "w", stdout)) fuzz::fail("freopen /dev/null");
  err_capture = new Capture;
  std::cerr.rdbuf(err_capture);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::vector<const char*>& cmd = kCommands[data[0] % kCommands.size()];
  // stdin: a fresh file holding the rest of the input.
  if (ftruncate(stdin_fd, 0) != 0 || pwrite(stdin_fd, data + 1, size - 1, 0) != static_cast<ssize_t>(size - 1))
    fuzz::fail("writing stdin");
  if (dup2(stdin_fd, 0) < 0) fuzz::fail("dup2");
  std::fseek(stdin, 0, SEEK_SET);
  std::clearerr(stdin);
  std::cin.clear();
  err_capture->str("");

  std::vector<char*> argv;
  std::vector<std::string> words{"lowbit"};
  for (const char* w : cmd) words.emplace_back(w);
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const int rc = lowbit_cli_main(static_cast<int>(words.size()), argv.data());
  std::fflush(stdout);
  const std::string msg = err_capture->str();
  std::string line = words[1];
  for (std::size_t i = 2; i < words.size(); ++i) line += " " + words[i];
  if (rc != 0 && rc != 1 && rc != 2) fuzz::fail("lowbit " + line + ": exit status " + std::to_string(rc));
  if (rc == 2 && msg.rfind("lowbit: ", 0) != 0) fuzz::fail("lowbit " + line + ": exit 2 without a message: '" + msg + "'");
  if (rc == 2 && msg.size() < 12) fuzz::fail("lowbit " + line + ": exit 2 with an empty message: '" + msg + "'");
  if (rc == 0 && !msg.empty() && msg.find("lowbit:") != std::string::npos)
    fuzz::fail("lowbit " + line + ": exit 0 after an error message: '" + msg + "'");
  return 0;
}
