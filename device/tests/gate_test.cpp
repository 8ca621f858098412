// The cuBLASLt gate plugin (plugins/cublaslt_gate), loaded the way `lowbit gate` loads a subject.
//
// Without a GPU (quick tier): it loads, speaks the ABI, declines the recipes it does not implement, and each
// GEMM it does implement fails with LOWBIT_PLUGIN_ERROR and a message that starts "no GPU".  On a Hopper GPU
// (device tier): at the adoption issue's default kernel shapes (M, N in {64, 129, 256}, K in {128, 4112}),
// without C, its results equal the hopper-fp8 model (fast accumulation) and promotion every 128 of K
// (without) bit for bit on finite operands; with C, both C orders are reported (C added by cuBLASLt's
// epilogue, lowbit::gemm::apply_epilogue; C starting the accumulator, the gemm-* suites' models) and the
// numbers recorded, nothing asserted: the hardware says which.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lowbit/format.hpp"
#include "lowbit/gemm.hpp"
#include "lowbit/plugin.h"
#include "support.hpp"

namespace {

namespace gemm = lowbit::gemm;

// The module beside this binary, or $LOWBIT_CUBLASLT_GATE.
std::string plugin_path() {
  if (const char* e = std::getenv("LOWBIT_CUBLASLT_GATE")) return e;
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<std::size_t>(n)) : std::string("./x");
  dir = dir.substr(0, dir.rfind('/'));
  return dir + "/" + LOWBIT_CUBLASLT_GATE_NAME;
}

const lowbit_plugin* plugin() {
  static const lowbit_plugin* table = []() -> const lowbit_plugin* {
    void* h = dlopen(plugin_path().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::printf("cannot load %s: %s\n", plugin_path().c_str(), dlerror());
      return nullptr;
    }
    void* sym = dlsym(h, LOWBIT_PLUGIN_ENTRY_SYMBOL);
    if (!sym) return nullptr;
    lowbit_plugin_entry_fn entry;
    static_assert(sizeof entry == sizeof sym);
    std::memcpy(&entry, &sym, sizeof entry);
    return entry(LOWBIT_PLUGIN_ABI_VERSION);
  }();
  return table;
}

// One GEMM case as the gate hands it over: a [M, K], b [K, N] (one-byte codes), c [M, N] f32, d [M, N] f32.
struct Case {
  std::uint64_t m, n, k;
  std::vector<std::uint8_t> a, b;
  std::vector<float> c, d;
  std::uint64_t sa[2], sb[2], sc[2];
};

Case make_case(std::uint64_t m, std::uint64_t n, std::uint64_t k, const lowbit::Format& fa, const lowbit::Format& fb,
               std::uint64_t seed) {
  Case x{m,
         n,
         k,
         std::vector<std::uint8_t>(m * k),
         std::vector<std::uint8_t>(k * n),
         std::vector<float>(m * n),
         std::vector<float>(m * n, 0.0f),
         {m, k},
         {k, n},
         {m, n}};
  std::mt19937_64 g(seed);
  // Finite codes (the NaN sign and payload of the promoted mode are a known difference, not this test's).
  auto code = [&](const lowbit::Format& f) {
    for (;;) {
      const auto c = static_cast<std::uint8_t>(g());
      if (!f.is_nan_code(c) && !f.is_inf_code(c)) return c;
    }
  };
  for (auto& v : x.a) v = code(fa);
  for (auto& v : x.b) v = code(fb);
  for (auto& v : x.c) v = static_cast<float>(static_cast<std::int64_t>(g() % 2001) - 1000) * 0.25f;
  return x;
}

int run(Case& x, const std::string& recipe, bool with_c, const char* af = "e4m3", const char* bf = "e4m3") {
  lowbit_array in[3] = {{"a", af, "|u1", 1, 2, x.sa, x.m * x.k, x.a.data()},
                        {"b", bf, "|u1", 1, 2, x.sb, x.k * x.n, x.b.data()},
                        {"c", "f32", "<f4", 4, 2, x.sc, x.m * x.n, x.c.data()}};
  lowbit_array out[1] = {{"d", "f32", "<f4", 4, 2, x.sc, x.m * x.n, x.d.data()}};
  return plugin()->gemm(recipe.c_str(), in, with_c ? 3 : 2, out, 1);
}

std::string recipe(const char* model, const char* af = "e4m3", const char* bf = "e4m3") {
  return std::string("{\"a_format\":\"") + af + "\",\"b_format\":\"" + bf +
         "\",\"c\":true,\"d_format\":\"f32\",\"model\":\"" + model + "\"}";
}

TEST(CublasLtGate, LoadsAndDeclinesOtherRecipes) {
  const lowbit_plugin* p = plugin();
  ASSERT_NE(p, nullptr) << plugin_path();
  EXPECT_EQ(p->abi_version, LOWBIT_PLUGIN_ABI_VERSION);
  EXPECT_EQ(p->convert, nullptr);
  EXPECT_EQ(p->quantize, nullptr);
  ASSERT_NE(p->gemm, nullptr);
  Case x = make_case(2, 3, 5, lowbit::formats::e4m3, lowbit::formats::e4m3, 1);
  EXPECT_EQ(run(x, recipe("exact"), true), LOWBIT_PLUGIN_UNSUPPORTED);
  EXPECT_EQ(run(x, recipe("hopper-f16"), true), LOWBIT_PLUGIN_UNSUPPORTED);
  EXPECT_EQ(run(x, recipe("hopper-fp8", "e5m2", "e5m2"), true, "e5m2", "e5m2"), LOWBIT_PLUGIN_UNSUPPORTED);
  EXPECT_EQ(run(x, recipe("hopper-fp8", "bf16", "bf16"), true), LOWBIT_PLUGIN_UNSUPPORTED);
}

TEST(CublasLtGate, NoGpuMeansAClearError) {
  ASSERT_NE(plugin(), nullptr) << plugin_path();
  if (lowbit::device::testing::gpu().present) GTEST_SKIP() << "a GPU is present: the device test runs the plugin";
  Case x = make_case(4, 3, 17, lowbit::formats::e4m3, lowbit::formats::e4m3, 2);
  for (const char* model : {"hopper-fp8", "hopper-fp8-promote128"}) {
    EXPECT_EQ(run(x, recipe(model), true), LOWBIT_PLUGIN_ERROR) << model;
    const std::string why = plugin()->last_error();
    EXPECT_EQ(why.rfind("no GPU: ", 0), 0u) << why;
  }
  for (float v : x.d) EXPECT_EQ(v, 0.0f);  // nothing written
}

gemm::Matrix matrix(const lowbit::Format& f, std::uint64_t rows, std::uint64_t cols, const std::uint8_t* p) {
  gemm::Matrix m{&f, static_cast<int>(rows), static_cast<int>(cols), {}};
  m.codes.assign(p, p + rows * cols);
  return m;
}

TEST(CublasLtGate, MatchesTheModelsOnHopper) {
  LOWBIT_REQUIRE_GPU(90);
  ASSERT_NE(plugin(), nullptr) << plugin_path();
  const gemm::TensorCoreModel* hopper = gemm::find_model("hopper-fp8");
  ASSERT_NE(hopper, nullptr);
  struct Shape {
    std::uint64_t m, n, k;
  };
  std::uint64_t compared = 0, mismatches = 0, c_epilogue = 0, c_first = 0, c_compared = 0;
  std::uint64_t seed = 100;
  for (const Shape s : {Shape{64, 129, 128}, Shape{129, 256, 4112}, Shape{256, 64, 4112}, Shape{256, 256, 128}})
    for (const lowbit::Format* fa : {&lowbit::formats::e4m3, &lowbit::formats::e5m2})
      for (bool fast : {true, false}) {
        Case x = make_case(s.m, s.n, s.k, *fa, lowbit::formats::e4m3, seed++);
        const char* model = fast ? "hopper-fp8" : "hopper-fp8-promote128";
        const gemm::Matrix a = matrix(*fa, s.m, s.k, x.a.data()),
                           b = matrix(lowbit::formats::e4m3, s.k, s.n, x.b.data());
        gemm::Matrix c{&lowbit::formats::f32, static_cast<int>(s.m), static_cast<int>(s.n), {}};
        for (float v : x.c) c.codes.push_back(std::bit_cast<std::uint32_t>(v));
        const auto want =
            fast ? gemm::run_model(*hopper, a, b, nullptr) : gemm::run_promoted(*hopper, 128, a, b, nullptr);
        ASSERT_EQ(run(x, recipe(model, fa->name), false, fa->name), LOWBIT_PLUGIN_OK) << plugin()->last_error();
        std::uint64_t bad = 0;
        for (std::size_t i = 0; i < want.size(); ++i) bad += std::bit_cast<std::uint32_t>(x.d[i]) != want[i];
        compared += want.size();
        mismatches += bad;
        std::printf("[gate] %s %s x e4m3 %llux%llux%llu without C: %llu / %zu differ from the model\n", model, fa->name,
                    static_cast<unsigned long long>(s.m), static_cast<unsigned long long>(s.n),
                    static_cast<unsigned long long>(s.k), static_cast<unsigned long long>(bad), want.size());
        // With C: which order the hardware has.
        const auto epilogue = gemm::apply_epilogue(want, &c, 0x3F800000u, 0x3F800000u, 0x3F800000u, 0x3F800000u);
        const auto first = fast ? gemm::run_model(*hopper, a, b, &c) : gemm::run_promoted(*hopper, 128, a, b, &c);
        ASSERT_EQ(run(x, recipe(model, fa->name), true, fa->name), LOWBIT_PLUGIN_OK) << plugin()->last_error();
        for (std::size_t i = 0; i < want.size(); ++i) {
          const std::uint32_t got = std::bit_cast<std::uint32_t>(x.d[i]);
          c_epilogue += got != epilogue[i];
          c_first += got != first[i];
        }
        c_compared += want.size();
      }
  RecordProperty("gate.without_c.compared", std::to_string(compared));
  RecordProperty("gate.without_c.mismatches", std::to_string(mismatches));
  RecordProperty("gate.with_c.compared", std::to_string(c_compared));
  RecordProperty("gate.with_c.mismatches_vs_epilogue_c", std::to_string(c_epilogue));
  RecordProperty("gate.with_c.mismatches_vs_c_first", std::to_string(c_first));
  std::printf(
      "[gate] with C (%llu outputs): %llu differ from C added in the epilogue, %llu from C starting the "
      "accumulator\n",
      static_cast<unsigned long long>(c_compared), static_cast<unsigned long long>(c_epilogue),
      static_cast<unsigned long long>(c_first));
  EXPECT_EQ(mismatches, 0u) << "cuBLASLt through the gate plugin differs from the models without C";
}

}  // namespace
