// Host-side argument checks and layout helpers of the CUTLASS FP8 GEMM (no CUDA code: the quick tier
// tests them without a GPU).
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "lowbit/device/gemm.hpp"

namespace lowbit::device::gemm {

const char* name(Fp8 t) { return t == Fp8::e4m3 ? "e4m3" : "e5m2"; }
const char* name(Out t) { return t == Out::f32 ? "f32" : "bf16"; }
const char* name(Mode m) {
  switch (m) {
    case Mode::fast_accum: return "fast_accum";
    case Mode::promoted: return "promoted";
    case Mode::blockwise: return "blockwise";
    case Mode::promoted_blockwise: return "promoted_blockwise";
  }
  return "?";
}

namespace {

int round_up(int x, int to) { return x <= 0 ? to : (x + to - 1) / to * to; }
bool blockwise_mainloop(Mode mode) { return mode == Mode::blockwise || mode == Mode::promoted_blockwise; }
int k_multiple(Mode mode) { return blockwise_mainloop(mode) ? kScaleBlock : 16; }

}  // namespace

Shape padded_shape(Mode mode, int m, int n, int k) {
  return {round_up(m, kTileM), round_up(n, kTileN), round_up(k, k_multiple(mode))};
}

std::size_t sfa_count(int m, int k) { return static_cast<std::size_t>(m) * static_cast<std::size_t>(k / kScaleBlock); }
std::size_t sfb_count(int n, int k) {
  return static_cast<std::size_t>(n / kTileN) * static_cast<std::size_t>(k / kScaleBlock);
}

std::string validate(const Fp8Gemm& g) {
  std::ostringstream os;
  os << "lowbit::device::gemm (" << name(g.mode) << "): ";
  const Shape p = padded_shape(g.mode, g.m, g.n, g.k);
  auto fail = [&](const std::string& what) {
    os << what;
    return os.str();
  };
  if (g.m <= 0) return fail("m = " + std::to_string(g.m) + " must be positive");
  if (g.n <= 0) return fail("n = " + std::to_string(g.n) + " must be positive");
  if (g.k <= 0) return fail("k = " + std::to_string(g.k) + " must be positive");
  if (g.m % kTileM)
    return fail("m = " + std::to_string(g.m) + " is not a multiple of the " + std::to_string(kTileM) +
                "-row CTA tile; pad A and D with rows to m = " + std::to_string(p.m));
  if (g.n % kTileN)
    return fail("n = " + std::to_string(g.n) + " is not a multiple of the " + std::to_string(kTileN) +
                "-column CTA tile; pad B and D with columns to n = " + std::to_string(p.n));
  if (blockwise_mainloop(g.mode) && g.k % kScaleBlock)
    return fail("k = " + std::to_string(g.k) + " is not a multiple of " + std::to_string(kScaleBlock) +
                " (one scale per 128 elements of K); pad A and B with zeros to k = " + std::to_string(p.k));
  if (g.k % 16)
    return fail("k = " + std::to_string(g.k) +
                " is not a multiple of 16 (rows of A and columns of B must be 16-byte aligned for TMA); pad A and B "
                "with zeros to k = " +
                std::to_string(p.k));
  auto misaligned = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % kAlignment != 0; };
  auto pointer = [&](const char* what, const void* ptr) -> std::string {
    if (!ptr) return std::string(what) + " is null";
    if (misaligned(ptr)) {
      std::ostringstream p;
      p << what << " = " << ptr << " is not " << kAlignment << "-byte aligned";
      return p.str();
    }
    return {};
  };
  for (auto [what, ptr] : {std::pair<const char*, const void*>{"a", g.a}, {"b", g.b}, {"d", g.d}})
    if (auto e = pointer(what, ptr); !e.empty()) return fail(e);
  if (g.mode == Mode::blockwise) {
    if (auto e = pointer("sfa", g.sfa); !e.empty()) return fail(e + " (blockwise mode needs A's 1x128 scales)");
    if (auto e = pointer("sfb", g.sfb); !e.empty()) return fail(e + " (blockwise mode needs B's 128x128 scales)");
  } else if (g.sfa || g.sfb) {
    return fail(std::string("sfa / sfb are set but only blockwise mode takes block scales") +
                (g.mode == Mode::promoted_blockwise ? " (promoted_blockwise brings its own unit scales)" : ""));
  }
  if (blockwise_mainloop(g.mode)) {
    if (g.b_type != Fp8::e4m3)
      return fail(std::string("b_type = ") + name(g.b_type) + " is not built for " + name(g.mode) + " mode (e4m3 only)");
  } else {
    if (g.b_type == Fp8::e5m2 && g.d_type != Out::f32)
      return fail(std::string("b_type = e5m2 is built with d_type = f32 only, not ") + name(g.d_type));
  }
  if (g.swizzle != 1 && g.swizzle != 2 && g.swizzle != 4 && g.swizzle != kMaxSwizzle)
    return fail("swizzle = " + std::to_string(g.swizzle) + " is not 1, 2, 4 or 8");
  if (g.cluster_m != 1 && g.cluster_m != 2) return fail("cluster_m = " + std::to_string(g.cluster_m) + " is not 1 or 2");
  if (g.cluster_m == 2) {
    if (g.mode == Mode::fast_accum) return fail("cluster_m = 2 is not built for fast_accum mode");
    if (g.b_type != Fp8::e4m3 || g.d_type != Out::bf16)
      return fail(std::string("cluster_m = 2 is built for e4m3 x e4m3 -> bf16 only, not e4m3 x ") + name(g.b_type) +
                  " -> " + name(g.d_type));
    if (g.m % (2 * kTileM))
      return fail("m = " + std::to_string(g.m) + " is not a multiple of 256 (two 128-row tiles per cluster_m = 2 "
                  "cluster); pad A and D with rows to m = " + std::to_string(round_up(g.m, 2 * kTileM)));
  }
  if (g.workspace && misaligned(g.workspace)) return fail(pointer("workspace", g.workspace));
  if (!g.workspace && g.workspace_bytes) return fail("workspace_bytes is set but workspace is null");
  return {};
}

void check(const Fp8Gemm& g) {
  if (std::string e = validate(g); !e.empty()) throw std::invalid_argument(e);
}

}  // namespace lowbit::device::gemm
