// A gate subject on a GPU: cuBLASLt's FP8 GEMM (include/lowbit/plugin.h's gemm entry point), driven through
// lowbit's device code (lowbit::device::cublaslt, device/src/cublaslt.cu) with one pinned algorithm and no
// split-K, so that every case of a suite runs the same kernel with the same summation order.
//
// Recipes it takes (the gemm-* suites' keys): model "hopper-fp8" runs cuBLASLt with fast accumulation, the
// mode an H200 showed equal to that model bit for bit; "hopper-fp8-promote128" runs it without, the mode
// that showed equal to promotion every 128 of K except for the sign and payload of NaN results
// (reports/device/2026-11-30-nvidia-h200.log); a_format / b_format e4m3 or e5m2 (not both e5m2: cuBLASLt has
// no such kernel), d_format f32.  Anything else is LOWBIT_PLUGIN_UNSUPPORTED.
//
// Layout: the suite's A ([M, K] row-major) is what lowbit::device::cublaslt takes as A; its B ([K, N]
// row-major) is transposed to K-contiguous columns.  M, N and K are padded with zeros to multiples of 16
// (cuBLASLt's FP8 rule): zero products leave every sum as it was, the models pad K with zeros within the
// same groups (a multiple of 16 never crosses a further 32 or 128 boundary), and the padded rows and
// columns are cut from D.  C: cuBLASLt adds beta * C (beta = 1) in its epilogue after the accumulation,
// where the gemm-* suites' models start the accumulator at C; cases whose two orders round differently
// are reported by the gate as mismatches, which is what they are.
//
// The algorithm: for each operand-type pair and accumulation mode, the heuristic's first candidate without
// split-K for a 256 x 256 x 256 problem (Handle::choose_pinned), then that algorithm for every case
// (Handle::run_pinned); the choice is printed once to stderr.
//
// Without a GPU every gemm call returns LOWBIT_PLUGIN_ERROR and last_error() says "no GPU: ..." (the
// device's probe names the cause), so `lowbit gate` reports each case as failed with that reason.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "lowbit/device/check.hpp"
#include "lowbit/device/cublaslt.hpp"
#include "lowbit/plugin.h"
#include "../recipe_lookup.hpp"

namespace {

namespace lt = lowbit::device::cublaslt;

std::string last;

// The flat recipe objects of the gemm suites (../recipe_lookup.hpp).
using lowbit_example::recipe_value;

const lowbit_array* find(const lowbit_array* v, std::uint32_t n, const char* name) {
  for (std::uint32_t i = 0; i < n; ++i)
    if (std::strcmp(v[i].name, name) == 0) return &v[i];
  return nullptr;
}

int round16(std::uint64_t v) { return static_cast<int>((v + 15) / 16 * 16); }

// A device buffer.
struct Buffer {
  void* p = nullptr;
  explicit Buffer(std::size_t bytes) { LOWBIT_CUDA_CHECK(cudaMalloc(&p, bytes < 16 ? 16 : bytes)); }
  ~Buffer() { cudaFree(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

constexpr std::size_t k_workspace = 32u << 20;

// The GPU state: the handle, the workspace and the pinned algorithm of each (a, b, fast accumulation).
struct Gpu {
  lt::Handle handle;
  Buffer workspace{k_workspace};
  std::map<std::tuple<lt::Type, lt::Type, bool>, lt::PinnedAlgo> pins;

  const lt::PinnedAlgo& pin(lt::Type a, lt::Type b, bool fast) {
    const auto key = std::make_tuple(a, b, fast);
    if (auto it = pins.find(key); it != pins.end()) return it->second;
    constexpr int n = 256;
    Buffer da(n * n), db(n * n), dc(n * n * 4), dd(n * n * 4);
    lt::Fp8Gemm g;
    g.m = g.n = g.k = n;
    g.a = da.p, g.a_type = a;
    g.b = db.p, g.b_type = b;
    g.c = dc.p;
    g.d = dd.p, g.d_type = lt::Type::f32;
    g.beta = 1.0f;
    g.fast_accum = fast;
    g.workspace = workspace.p, g.workspace_bytes = k_workspace;
    const lt::PinnedAlgo p = handle.choose_pinned(g);
    std::fprintf(stderr, "[cublaslt-gate] %s x %s, fast accumulation %s: pinned %s\n", lt::name(a), lt::name(b),
                 fast ? "on" : "off", lt::describe(p).c_str());
    return pins.emplace(key, p).first->second;
  }
};

// The GPU state, made on the first call that needs it; nullptr (and `last` says why) without a GPU.
Gpu* gpu() {
  static std::unique_ptr<Gpu> state;
  static std::string why;
  if (state) return state.get();
  if (why.empty()) {
    const lowbit::device::GpuProbe probe = lowbit::device::probe_gpu();
    if (!probe.present) {
      why = "no GPU: the cuBLASLt gate needs a CUDA GPU (" + probe.why + ")";
    } else if (probe.info.capability() < 90) {
      why = probe.info.name + " (sm_" + std::to_string(probe.info.capability()) +
            "): the models this plugin stands for are Hopper's (sm_90)";
    } else {
      state = std::make_unique<Gpu>();
      return state.get();
    }
  }
  last = why;
  return nullptr;
}

bool fp8_type(const std::string& f, lt::Type& t) {
  if (f == "e4m3") t = lt::Type::e4m3;
  else if (f == "e5m2") t = lt::Type::e5m2;
  else return false;
  return true;
}

int gemm_entry(const char* recipe_json, const lowbit_array* in, std::uint32_t n_in, lowbit_array* out,
               std::uint32_t n_out) {
  const std::string recipe = recipe_json ? recipe_json : "";
  std::string model, af, bf, df;
  if (!recipe_value(recipe, "model", model) || !recipe_value(recipe, "a_format", af) ||
      !recipe_value(recipe, "b_format", bf))
    return LOWBIT_PLUGIN_UNSUPPORTED;
  if (model != "hopper-fp8" && model != "hopper-fp8-promote128") return LOWBIT_PLUGIN_UNSUPPORTED;
  if (recipe_value(recipe, "d_format", df) && df != "f32") return LOWBIT_PLUGIN_UNSUPPORTED;
  lt::Type at, bt;
  if (!fp8_type(af, at) || !fp8_type(bf, bt) || (at == lt::Type::e5m2 && bt == lt::Type::e5m2))
    return LOWBIT_PLUGIN_UNSUPPORTED;
  if (recipe.find("scale") != std::string::npos) return LOWBIT_PLUGIN_UNSUPPORTED;  // block scales: not this GEMM
  const lowbit_array* a = find(in, n_in, "a");
  const lowbit_array* b = find(in, n_in, "b");
  const lowbit_array* c = find(in, n_in, "c");
  lowbit_array* d = n_out == 1 && std::strcmp(out[0].name, "d") == 0 ? out : nullptr;
  if (!a || !b || !d || a->rank != 2 || b->rank != 2 || a->element_bytes != 1 || b->element_bytes != 1 ||
      a->shape[1] != b->shape[0] || d->element_bytes != 4 || d->count != a->shape[0] * b->shape[1] ||
      (c && (c->element_bytes != 4 || c->count != d->count))) {
    last = "cublaslt-gate: expected a [M, K] and b [K, N] of one-byte codes, optionally c, and an f32 d [M, N]";
    return LOWBIT_PLUGIN_ERROR;
  }
  Gpu* g = gpu();
  if (!g) return LOWBIT_PLUGIN_ERROR;
  try {
    const std::uint64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    const int mp = round16(m), np = round16(n), kp = round16(k);
    // Host copies in cuBLASLt's "TN" layout, zero padded.
    std::vector<std::uint8_t> ha(static_cast<std::size_t>(mp) * kp, 0), hb(static_cast<std::size_t>(np) * kp, 0);
    const auto* pa = static_cast<const std::uint8_t*>(a->data);
    const auto* pb = static_cast<const std::uint8_t*>(b->data);
    for (std::uint64_t i = 0; i < m; ++i)
      for (std::uint64_t p = 0; p < k; ++p) ha[i * kp + p] = pa[i * k + p];
    for (std::uint64_t p = 0; p < k; ++p)
      for (std::uint64_t j = 0; j < n; ++j) hb[j * kp + p] = pb[p * n + j];
    std::vector<float> hc(static_cast<std::size_t>(mp) * np, 0.0f);
    if (c)
      for (std::uint64_t i = 0; i < m; ++i) std::memcpy(&hc[i * np], static_cast<const float*>(c->data) + i * n, n * 4);
    Buffer da(ha.size()), db(hb.size()), dc(hc.size() * 4), dd(hc.size() * 4);
    LOWBIT_CUDA_CHECK(cudaMemcpy(da.p, ha.data(), ha.size(), cudaMemcpyHostToDevice));
    LOWBIT_CUDA_CHECK(cudaMemcpy(db.p, hb.data(), hb.size(), cudaMemcpyHostToDevice));
    LOWBIT_CUDA_CHECK(cudaMemcpy(dc.p, hc.data(), hc.size() * 4, cudaMemcpyHostToDevice));
    LOWBIT_CUDA_CHECK(cudaMemset(dd.p, 0xFF, hc.size() * 4));
    lt::Fp8Gemm op;
    op.m = mp, op.n = np, op.k = kp;
    op.a = da.p, op.a_type = at;
    op.b = db.p, op.b_type = bt;
    op.c = c ? dc.p : nullptr;
    op.beta = c ? 1.0f : 0.0f;
    op.d = dd.p, op.d_type = lt::Type::f32;
    op.fast_accum = model == "hopper-fp8";
    op.workspace = g->workspace.p, op.workspace_bytes = k_workspace;
    g->handle.run_pinned(op, g->pin(at, bt, op.fast_accum));
    LOWBIT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> hd(hc.size());
    LOWBIT_CUDA_CHECK(cudaMemcpy(hd.data(), dd.p, hd.size() * 4, cudaMemcpyDeviceToHost));
    for (std::uint64_t i = 0; i < m; ++i) std::memcpy(static_cast<float*>(d->data) + i * n, &hd[i * np], n * 4);
    return LOWBIT_PLUGIN_OK;
  } catch (const std::exception& e) {
    last = std::string("cublaslt-gate: ") + e.what();
    return LOWBIT_PLUGIN_ERROR;
  }
}

const char* last_error() { return last.c_str(); }

const lowbit_plugin table = {LOWBIT_PLUGIN_ABI_VERSION,
                             sizeof(lowbit_plugin),
                             "cublaslt-gate (cuBLASLt FP8 GEMM through lowbit::device::cublaslt, one pinned algorithm, "
                             "no split-K)",
                             nullptr,
                             nullptr,
                             gemm_entry,
                             last_error,
                             nullptr};

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_entry(uint32_t host_abi_version) {
  return host_abi_version == LOWBIT_PLUGIN_ABI_VERSION ? &table : nullptr;
}
