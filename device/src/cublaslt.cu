// cuBLASLt FP8 GEMM wrapper (lowbit/device/cublaslt.hpp).  Host code only.
#include <cstdint>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>

#include "lowbit/device/cublaslt.hpp"

namespace lowbit::device {

void check_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::string what = cublasLtGetStatusName(s);
    what += " (";
    what += cublasLtGetStatusString(s);
    what += ")";
    fail_call(call, file, line, what);
  }
}

namespace cublaslt {

const char* name(Type t) {
  switch (t) {
    case Type::e4m3: return "e4m3";
    case Type::e5m2: return "e5m2";
    case Type::f32: return "f32";
    case Type::bf16: return "bf16";
  }
  return "?";
}

std::size_t bytes(Type t) {
  switch (t) {
    case Type::e4m3:
    case Type::e5m2: return 1;
    case Type::bf16: return 2;
    case Type::f32: return 4;
  }
  return 0;
}

namespace {

cudaDataType_t cuda_type(Type t) {
  switch (t) {
    case Type::e4m3: return CUDA_R_8F_E4M3;
    case Type::e5m2: return CUDA_R_8F_E5M2;
    case Type::bf16: return CUDA_R_16BF;
    case Type::f32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}

bool is_fp8(Type t) { return t == Type::e4m3 || t == Type::e5m2; }

// C's type for a D type: D itself for f32 / bf16, bf16 for an FP8 D (cuBLASLt's FP8 type table).
Type c_type(Type d) { return is_fp8(d) ? Type::bf16 : d; }

// RAII holders for the descriptors.
struct MatmulDesc {
  cublasLtMatmulDesc_t h = nullptr;
  ~MatmulDesc() {
    if (h) cublasLtMatmulDescDestroy(h);
  }
};
struct LayoutDesc {
  cublasLtMatrixLayout_t h = nullptr;
  ~LayoutDesc() {
    if (h) cublasLtMatrixLayoutDestroy(h);
  }
};
struct Preference {
  cublasLtMatmulPreference_t h = nullptr;
  ~Preference() {
    if (h) cublasLtMatmulPreferenceDestroy(h);
  }
};

template <class T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& value) {
  LOWBIT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(value)));
}

}  // namespace

std::string validate(const Fp8Gemm& g) {
  std::ostringstream os;
  os << "lowbit::device::cublaslt: ";
  auto fail = [&](const std::string& what) {
    os << what;
    return os.str();
  };
  if (g.m <= 0 || g.n <= 0 || g.k <= 0)
    return fail("m, n, k = " + std::to_string(g.m) + ", " + std::to_string(g.n) + ", " + std::to_string(g.k) +
                " must be positive");
  // FP8 rules on Hopper: every dimension a multiple of 16, every pointer 16-byte aligned.
  if (g.m % 16) return fail("m = " + std::to_string(g.m) + " is not a multiple of 16 (cuBLASLt FP8 rule)");
  if (g.n % 16) return fail("n = " + std::to_string(g.n) + " is not a multiple of 16 (cuBLASLt FP8 rule)");
  if (g.k % 16) return fail("k = " + std::to_string(g.k) + " is not a multiple of 16 (cuBLASLt FP8 rule)");
  if (!is_fp8(g.a_type)) return fail(std::string("a_type = ") + name(g.a_type) + " is not an FP8 type");
  if (!is_fp8(g.b_type)) return fail(std::string("b_type = ") + name(g.b_type) + " is not an FP8 type");
  if (g.a_type == Type::e5m2 && g.b_type == Type::e5m2)
    return fail("a_type = b_type = e5m2: cuBLASLt has no e5m2 x e5m2 FP8 GEMM");
  if (g.d_type == Type::e5m2) return fail("d_type = e5m2 is not supported by this wrapper (f32, bf16 or e4m3)");
  auto pointer = [](const char* what, const void* p, bool required) -> std::string {
    if (!p) return required ? std::string(what) + " is null" : std::string();
    if (reinterpret_cast<std::uintptr_t>(p) % 16) {
      std::ostringstream s;
      s << what << " = " << p << " is not 16-byte aligned (cuBLASLt FP8 rule)";
      return s.str();
    }
    return {};
  };
  for (auto [what, p, req] : {std::tuple<const char*, const void*, bool>{"a", g.a, true},
                              {"b", g.b, true},
                              {"d", g.d, true},
                              {"c", g.c, false},
                              {"workspace", g.workspace, false}})
    if (auto e = pointer(what, p, req); !e.empty()) return fail(e);
  if (!g.c && g.beta != 0.0f) return fail("beta != 0 needs c");
  if (g.d_type == Type::e4m3 && !g.c)
    return fail("d_type = e4m3 needs c (an M x N bf16 buffer, zeros with beta = 0): cuBLASLt's C type is bf16 here");
  if (g.d_type != Type::e4m3 && (g.scale_d || g.amax_d))
    return fail(std::string("scale_d / amax_d are taken with an e4m3 D only, not d_type = ") + name(g.d_type));
  if (!g.workspace && g.workspace_bytes) return fail("workspace_bytes is set but workspace is null");
  return {};
}

Handle::Handle() { LOWBIT_CUBLAS_CHECK(cublasLtCreate(&handle_)); }
Handle::~Handle() {
  if (handle_) cublasLtDestroy(handle_);
}

void Handle::run(const Fp8Gemm& g) {
  const cublasStatus_t s = try_run(g);
  if (s != CUBLAS_STATUS_SUCCESS)
    fail_call("cublasLtMatmulAlgoGetHeuristic / cublasLtMatmul", __FILE__, __LINE__,
              std::string(cublasLtGetStatusName(s)) + ": no candidate algorithm runs m, n, k = " + std::to_string(g.m) +
                  ", " + std::to_string(g.n) + ", " + std::to_string(g.k) + " (" + name(g.a_type) + " x " +
                  name(g.b_type) + " -> " + name(g.d_type) + ", fast_accum " + (g.fast_accum ? "on" : "off") + ")");
}

namespace {
// The largest power of two (<= 256) dividing the address: cuBLASLt's heuristic assumes 256-byte aligned
// operands unless told otherwise, and cublasLtMatmul refuses an algorithm whose assumption fails.
std::uint32_t alignment_of(const void* p) {
  std::uint32_t a = 256;
  while (a > 1 && reinterpret_cast<std::uintptr_t>(p) % a) a /= 2;
  return a;
}
}  // namespace

// The descriptors of one problem (validated first), as every run builds them.
struct Handle::Problem {
  MatmulDesc op;
  LayoutDesc la, lb, lc, ld;
  Preference pref;
  std::size_t ws = 0;
  const void* c = nullptr;
  std::uint32_t align[4] = {};
  explicit Problem(const Fp8Gemm& g) {
    if (std::string e = validate(g); !e.empty()) throw std::invalid_argument(e);
    LOWBIT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op.h, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    // cuBLASLt's view: D^T (N x M) = op(B_ours stored K x N)^T * (A_ours stored K x M).
    set(op.h, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    set(op.h, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    const std::int8_t fast = g.fast_accum ? 1 : 0;
    set(op.h, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast);
    // Our B is cuBLASLt's A and our A its B: the scales follow the operands.
    if (g.scale_b) set(op.h, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(g.scale_b));
    if (g.scale_a) set(op.h, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(g.scale_a));
    if (g.scale_c) set(op.h, CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, static_cast<const void*>(g.scale_c));
    if (g.scale_d) set(op.h, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, static_cast<const void*>(g.scale_d));
    if (g.amax_d) set(op.h, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, static_cast<void*>(g.amax_d));
    LOWBIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la.h, cuda_type(g.b_type), g.k, g.n, g.k));
    LOWBIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb.h, cuda_type(g.a_type), g.k, g.m, g.k));
    LOWBIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc.h, cuda_type(c_type(g.d_type)), g.n, g.m, g.n));
    LOWBIT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld.h, cuda_type(g.d_type), g.n, g.m, g.n));
    LOWBIT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.h));
    ws = g.workspace ? g.workspace_bytes : 0;
    LOWBIT_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // C: the caller's, or D itself for an f32 / bf16 D with beta = 0 (same type and layout, never read).
    c = g.c ? g.c : g.d;
    // cuBLASLt's A is our B, its B our A.
    const std::uint32_t a[4] = {alignment_of(g.b), alignment_of(g.a), alignment_of(c), alignment_of(g.d)};
    const cublasLtMatmulPreferenceAttributes_t attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i) {
      align[i] = a[i];
      LOWBIT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.h, attr[i], &align[i], sizeof(align[i])));
    }
  }
  cublasStatus_t launch(cublasLtHandle_t h, const Fp8Gemm& g, const cublasLtMatmulAlgo_t& algo) const {
    return cublasLtMatmul(h, op.h, &g.alpha, g.b, la.h, g.a, lb.h, &g.beta, c, lc.h, g.d, ld.h, &algo, g.workspace, ws,
                          g.stream);
  }
};

cublasStatus_t Handle::try_run(const Fp8Gemm& g) {
  const Problem pr(g);
  // Everything the heuristic's answer depends on.
  const std::vector<long long> key{g.m,
                                   g.n,
                                   g.k,
                                   static_cast<long long>(g.a_type),
                                   static_cast<long long>(g.b_type),
                                   static_cast<long long>(g.d_type),
                                   g.fast_accum,
                                   g.scale_a != nullptr,
                                   g.scale_b != nullptr,
                                   g.scale_c != nullptr,
                                   g.scale_d != nullptr,
                                   g.amax_d != nullptr,
                                   g.c != nullptr,
                                   static_cast<long long>(pr.align[0]),
                                   static_cast<long long>(pr.align[1]),
                                   static_cast<long long>(pr.align[2]),
                                   static_cast<long long>(pr.align[3]),
                                   static_cast<long long>(pr.ws)};
  if (auto it = choices_.find(key); it != choices_.end()) {
    last_workspace_ = it->second.workspace;
    last_algo_id_ = it->second.id;
    LOWBIT_CUBLAS_CHECK(pr.launch(handle_, g, it->second.algo));
    return CUBLAS_STATUS_SUCCESS;
  }
  // The heuristic's candidates, best first; cublasLtMatmul may still refuse one (NOT_SUPPORTED is returned
  // before anything is launched), so try them in order.
  constexpr int kCandidates = 16;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  const cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(handle_, pr.op.h, pr.la.h, pr.lb.h, pr.lc.h, pr.ld.h,
                                                                  pr.pref.h, kCandidates, results, &found);
  // No algorithm at all: NOT_SUPPORTED (the heuristic's own answer for an empty list).
  if (heuristic == CUBLAS_STATUS_NOT_SUPPORTED || (heuristic == CUBLAS_STATUS_SUCCESS && found == 0))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  LOWBIT_CUBLAS_CHECK(heuristic);
  cublasStatus_t last = CUBLAS_STATUS_NOT_SUPPORTED;
  for (int r = 0; r < found; ++r) {
    if (results[r].state != CUBLAS_STATUS_SUCCESS) continue;
    last = pr.launch(handle_, g, results[r].algo);
    if (last == CUBLAS_STATUS_NOT_SUPPORTED) continue;
    LOWBIT_CUBLAS_CHECK(last);
    int id = -1;
    std::size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&results[r].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &written) !=
        CUBLAS_STATUS_SUCCESS)
      id = -1;
    choices_.emplace(key, Choice{results[r].algo, results[r].workspaceSize, id});
    last_workspace_ = results[r].workspaceSize;
    last_algo_id_ = id;
    return CUBLAS_STATUS_SUCCESS;
  }
  return last;
}

// ---- one pinned algorithm ------------------------------------------------------------------------------

namespace {

// The configuration attributes that name a cuBLASLt algorithm, in PinnedAlgo's order.
constexpr cublasLtMatmulAlgoConfigAttributes_t k_pin_attributes[] = {
    CUBLASLT_ALGO_CONFIG_TILE_ID,       CUBLASLT_ALGO_CONFIG_STAGES_ID,      CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING,
    CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID};

// The width cublasLt.h declares for each attribute: the inner and cluster shape ids are uint16_t, the rest
// 32-bit (cuBLASLt checks the size it is given).
bool is_16_bit(cublasLtMatmulAlgoConfigAttributes_t attr) {
  return attr == CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID || attr == CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID;
}

std::uint32_t get_u32(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  std::size_t written = 0;
  if (is_16_bit(attr)) {
    std::uint16_t v = 0;
    LOWBIT_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written));
    return v;
  }
  std::uint32_t v = 0;
  LOWBIT_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written));
  return v;
}

void set_u32(cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, std::uint32_t value) {
  if (is_16_bit(attr)) {
    const auto v = static_cast<std::uint16_t>(value);
    LOWBIT_CUBLAS_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &v, sizeof(v)));
  } else {
    LOWBIT_CUBLAS_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &value, sizeof(value)));
  }
}

}  // namespace

std::string describe(const PinnedAlgo& a) {
  std::ostringstream s;
  s << "cuBLASLt algorithm " << a.id << " (tile " << a.config[0] << ", stages " << a.config[1] << ", CTA swizzling "
    << a.config[2] << ", custom option " << a.config[3] << ", inner shape " << a.config[4] << ", cluster shape "
    << a.config[5] << "), split-K 1, no reduction, workspace " << a.workspace << " bytes";
  return s.str();
}

PinnedAlgo Handle::choose_pinned(const Fp8Gemm& g) {
  const Problem pr(g);
  constexpr int kCandidates = 32;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  LOWBIT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, pr.op.h, pr.la.h, pr.lb.h, pr.lc.h, pr.ld.h, pr.pref.h,
                                                     kCandidates, results, &found));
  for (int r = 0; r < found; ++r) {
    if (results[r].state != CUBLAS_STATUS_SUCCESS) continue;
    const cublasLtMatmulAlgo_t& algo = results[r].algo;
    // No split-K: one K slice, nothing reduced afterwards (the sum order is the kernel's alone).
    if (get_u32(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) > 1) continue;
    if (get_u32(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME) != CUBLASLT_REDUCTION_SCHEME_NONE) continue;
    PinnedAlgo p;
    p.id = static_cast<int>(get_u32(algo, CUBLASLT_ALGO_CONFIG_ID));
    for (std::size_t i = 0; i < std::size(k_pin_attributes); ++i) p.config[i] = get_u32(algo, k_pin_attributes[i]);
    p.workspace = results[r].workspaceSize;
    return p;
  }
  fail_call("cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__,
            "no candidate without split-K for m, n, k = " + std::to_string(g.m) + ", " + std::to_string(g.n) + ", " +
                std::to_string(g.k));
}

void Handle::run_pinned(const Fp8Gemm& g, const PinnedAlgo& pin) {
  const Problem pr(g);
  cublasLtMatmulAlgo_t algo{};
  LOWBIT_CUBLAS_CHECK(cublasLtMatmulAlgoInit(handle_, CUBLAS_COMPUTE_32F, CUDA_R_32F, cuda_type(g.b_type),
                                             cuda_type(g.a_type), cuda_type(c_type(g.d_type)), cuda_type(g.d_type),
                                             pin.id, &algo));
  for (std::size_t i = 0; i < std::size(k_pin_attributes); ++i) set_u32(algo, k_pin_attributes[i], pin.config[i]);
  set_u32(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 1);
  set_u32(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, CUBLASLT_REDUCTION_SCHEME_NONE);
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t ok =
      cublasLtMatmulAlgoCheck(handle_, pr.op.h, pr.la.h, pr.lb.h, pr.lc.h, pr.ld.h, &algo, &check);
  if (ok != CUBLAS_STATUS_SUCCESS || check.state != CUBLAS_STATUS_SUCCESS)
    fail_call("cublasLtMatmulAlgoCheck", __FILE__, __LINE__,
              std::string(cublasLtGetStatusName(ok != CUBLAS_STATUS_SUCCESS ? ok : check.state)) + ": the pinned " +
                  describe(pin) + " does not run m, n, k = " + std::to_string(g.m) + ", " + std::to_string(g.n) + ", " +
                  std::to_string(g.k));
  if (check.workspaceSize > pr.ws)
    fail_call("cublasLtMatmulAlgoCheck", __FILE__, __LINE__,
              "the pinned algorithm needs " + std::to_string(check.workspaceSize) + " bytes of workspace, " +
                  std::to_string(pr.ws) + " given");
  LOWBIT_CUBLAS_CHECK(pr.launch(handle_, g, algo));
  last_workspace_ = check.workspaceSize;
  last_algo_id_ = pin.id;
}

}  // namespace cublaslt
}  // namespace lowbit::device
