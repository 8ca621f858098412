// The CUTLASS FP8 GEMMs of lowbit/device/gemm.hpp: kernels assembled with CUTLASS 3.x/4.x collective
// builders (cutlass::gemm::collective::CollectiveBuilder, cutlass::epilogue::collective::CollectiveBuilder),
// sm_90a only.
//
// This translation unit is compiled with --fmad=true (gemm.cmake): the blockwise mainloop promotes with
// `acc += partial * scale`, which DeepGEMM (and the model run_block_scaled) computes as one fused
// multiply-add; with contraction off it would round twice.  Nothing else here has a multiply feeding an
// add: the fast and promoted mainloops only add, and the ScaledAcc epilogue only multiplies.
#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowbit/device/check.hpp"
#include "lowbit/device/gemm.hpp"

// The CUTLASS headers are SYSTEM includes (gemm.cmake).
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/numeric_types.h"
#include "cutlass/util/packed_stride.hpp"

namespace lowbit::device::gemm {
namespace {

using namespace cute;

// One tile shape for every kernel.  The promoted and blockwise mainloops keep two f32 accumulators per
// thread (the wgmma's and the promoted one): at 128 x 128 with two consumer warpgroups that is 64 + 64
// registers per thread; 128 x 256 (or a 128 x 128 ping-pong tile owned by one warpgroup) would need 256
// and spill past the 232 registers a consumer warpgroup gets.  The levers left for large problems are
// the cluster (2 x 1 x 1: B multicast to both CTAs) and the scheduler's swizzle (L2 reuse), both in
// Fp8Gemm; the benchmark measures them side by side.
using TileShape = cute::Shape<_128, _128, _128>;
template <int ClusterM>
using ClusterShape = cute::Shape<cute::Int<ClusterM>, _1, _1>;
static_assert(size<0>(TileShape{}) == kTileM && size<1>(TileShape{}) == kTileN && size<2>(TileShape{}) == kTileK);
static_assert(kPromotionMmas * kInstructionK == kPromotionInterval);
static_assert(
    kTileK / kInstructionK == kPromotionMmas,
    "CUTLASS promotes after whole mainloop iterations: the interval must be a multiple of the k-blocks per tile");

// The three mainloops by kernel schedule.
template <Mode M>
struct ScheduleOf;
template <>
struct ScheduleOf<Mode::fast_accum> {
  using type = cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum;
};
template <>
struct ScheduleOf<Mode::promoted> {
  using type = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
};
template <>
struct ScheduleOf<Mode::blockwise> {
  using type = cutlass::gemm::KernelTmaWarpSpecializedCooperativeFP8Blockwise;
};

// DeepSeek's scales: A per (row, 128 of K), B per (128 of N, 128 of K).  A's scales MN-major (M fastest),
// B's K-major, as CUTLASS's example 67 (groupwise) configures them.
using ScaleConfig =
    cutlass::detail::Sm90BlockwiseScaleConfig<1, kScaleBlock, kScaleBlock, cute::GMMA::Major::MN, cute::GMMA::Major::K>;
using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

template <Mode M, class ElementB, class ElementD, int ClusterM = 1>
struct Kernel {
  using ElementA = cutlass::float_e4m3_t;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignA = 16;
  static constexpr int kAlignB = 16;
  static constexpr int kAlignD = 16 / static_cast<int>(sizeof(ElementD));

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape<ClusterM>,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlignD,  // no C operand
      ElementD, LayoutD, kAlignD, cutlass::epilogue::TmaWarpSpecializedCooperative,
      cutlass::epilogue::fusion::ScaledAcc<ElementD, float, float>>::CollectiveOp;

  using TagA = cute::conditional_t<M == Mode::blockwise, cute::tuple<LayoutA, LayoutSFA>, LayoutA>;
  using TagB = cute::conditional_t<M == Mode::blockwise, cute::tuple<LayoutB, LayoutSFB>, LayoutB>;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, TagA, kAlignA, ElementB, TagB, kAlignB, float,
      TileShape, ClusterShape<ClusterM>,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      typename ScheduleOf<M>::type>::CollectiveOp;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

int sm_count() {
  static int count = [] {
    int dev = 0, n = 0;
    LOWBIT_CUDA_CHECK(cudaGetDevice(&dev));
    LOWBIT_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return count;
}

void check_cutlass(cutlass::Status s, const char* call, const char* file, int line) {
  if (s != cutlass::Status::kSuccess) fail_call(call, file, line, cutlassGetStatusString(s));
}
#define LOWBIT_CUTLASS_CHECK(call) check_cutlass((call), #call, __FILE__, __LINE__)

template <Mode M, class ElementB, class ElementD, int ClusterM>
typename Kernel<M, ElementB, ElementD, ClusterM>::Gemm::Arguments arguments(const Fp8Gemm& g) {
  using K = Kernel<M, ElementB, ElementD, ClusterM>;
  using GK = typename K::GemmKernel;
  auto sa = cutlass::make_cute_packed_stride(typename GK::StrideA{}, cute::make_shape(g.m, g.k, 1));
  auto sb = cutlass::make_cute_packed_stride(typename GK::StrideB{}, cute::make_shape(g.n, g.k, 1));
  auto sd = cutlass::make_cute_packed_stride(typename GK::StrideD{}, cute::make_shape(g.m, g.n, 1));
  auto sc = cutlass::make_cute_packed_stride(typename GK::StrideC{}, cute::make_shape(g.m, g.n, 1));
  typename K::Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {g.m, g.n, g.k, 1};
  using MainloopArgs = typename GK::MainloopArguments;
  if constexpr (M == Mode::blockwise) {
    args.mainloop = MainloopArgs{static_cast<const cutlass::float_e4m3_t*>(g.a),
                                 sa,
                                 static_cast<const ElementB*>(g.b),
                                 sb,
                                 g.sfa,
                                 ScaleConfig::tile_atom_to_shape_SFA(cute::make_shape(g.m, g.n, g.k, 1)),
                                 g.sfb,
                                 ScaleConfig::tile_atom_to_shape_SFB(cute::make_shape(g.m, g.n, g.k, 1))};
  } else if constexpr (M == Mode::promoted) {
    args.mainloop = MainloopArgs{static_cast<const cutlass::float_e4m3_t*>(g.a), sa, static_cast<const ElementB*>(g.b),
                                 sb, static_cast<std::uint32_t>(kPromotionMmas)};
  } else {
    args.mainloop =
        MainloopArgs{static_cast<const cutlass::float_e4m3_t*>(g.a), sa, static_cast<const ElementB*>(g.b), sb};
  }
  args.epilogue.thread.alpha = g.alpha;
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = sc;
  args.epilogue.ptr_D = static_cast<ElementD*>(g.d);
  args.epilogue.dD = sd;
  args.hw_info.device_id = 0;
  LOWBIT_CUDA_CHECK(cudaGetDevice(&args.hw_info.device_id));
  args.hw_info.sm_count = sm_count();
  args.scheduler.max_swizzle_size = g.swizzle;
  return args;
}

template <Mode M, class ElementB, class ElementD, int ClusterM>
std::size_t workspace_of(const Fp8Gemm& g) {
  return Kernel<M, ElementB, ElementD, ClusterM>::Gemm::get_workspace_size(arguments<M, ElementB, ElementD, ClusterM>(g));
}

template <Mode M, class ElementB, class ElementD, int ClusterM>
void launch(const Fp8Gemm& g) {
  using Gemm = typename Kernel<M, ElementB, ElementD, ClusterM>::Gemm;
  const auto args = arguments<M, ElementB, ElementD, ClusterM>(g);
  Gemm gemm;
  const cutlass::Status can = Gemm::can_implement(args);
  if (can != cutlass::Status::kSuccess)
    throw std::invalid_argument(
        std::string("lowbit::device::gemm (") + name(g.mode) + "): CUTLASS cannot implement m = " + std::to_string(g.m) +
        ", n = " + std::to_string(g.n) + ", k = " + std::to_string(g.k) + ": " + cutlassGetStatusString(can));
  const std::size_t need = Gemm::get_workspace_size(args);
  void* ws = g.workspace;
  bool owned = false;
  if (need > 0 && ws == nullptr) {
    LOWBIT_CUDA_CHECK(cudaMallocAsync(&ws, need, g.stream));
    owned = true;
  } else if (need > g.workspace_bytes && ws != nullptr) {
    throw std::invalid_argument("lowbit::device::gemm: workspace_bytes = " + std::to_string(g.workspace_bytes) +
                                " is smaller than the " + std::to_string(need) + " bytes workspace_size() asks for");
  }
  LOWBIT_CUTLASS_CHECK(gemm.initialize(args, ws, g.stream));
  LOWBIT_CUTLASS_CHECK(gemm.run(g.stream));
  LOWBIT_CUDA_CHECK_LAUNCH();
  if (owned) LOWBIT_CUDA_CHECK(cudaFreeAsync(ws, g.stream));
}

// Dispatch over the built combinations (validate() rejects the others first).
template <template <Mode, class, class, int> class Fn, class R>
R dispatch(const Fp8Gemm& g) {
  using e4m3 = cutlass::float_e4m3_t;
  using e5m2 = cutlass::float_e5m2_t;
  using bf16 = cutlass::bfloat16_t;
  const bool f32 = g.d_type == Out::f32;
  const bool b5 = g.b_type == Fp8::e5m2;
  // cluster_m = 2 exists for promoted / blockwise, e4m3 x e4m3 -> bf16 (validate() rejects the rest).
  const bool c2 = g.cluster_m == 2;
  switch (g.mode) {
    case Mode::fast_accum:
      if (b5) return Fn<Mode::fast_accum, e5m2, float, 1>::call(g);
      return f32 ? Fn<Mode::fast_accum, e4m3, float, 1>::call(g) : Fn<Mode::fast_accum, e4m3, bf16, 1>::call(g);
    case Mode::promoted:
      if (b5) return Fn<Mode::promoted, e5m2, float, 1>::call(g);
      if (c2) return Fn<Mode::promoted, e4m3, bf16, 2>::call(g);
      return f32 ? Fn<Mode::promoted, e4m3, float, 1>::call(g) : Fn<Mode::promoted, e4m3, bf16, 1>::call(g);
    case Mode::blockwise:
    case Mode::promoted_blockwise:  // the blockwise kernels; run() gives them unit scales
      if (c2) return Fn<Mode::blockwise, e4m3, bf16, 2>::call(g);
      return f32 ? Fn<Mode::blockwise, e4m3, float, 1>::call(g) : Fn<Mode::blockwise, e4m3, bf16, 1>::call(g);
  }
  throw std::invalid_argument("lowbit::device::gemm: unknown mode");
}

template <Mode M, class B, class D, int ClusterM>
struct Launch {
  static int call(const Fp8Gemm& g) {
    launch<M, B, D, ClusterM>(g);
    return 0;
  }
};
template <Mode M, class B, class D, int ClusterM>
struct Workspace {
  static std::size_t call(const Fp8Gemm& g) { return workspace_of<M, B, D, ClusterM>(g); }
};

// A device buffer of at least `count` f32 ones on the current device, for Mode::promoted_blockwise.  Kept
// for the life of the process, and a larger one added when needed without freeing the old one (a kernel
// still running on any stream may read it).  Filled and synchronized before it is first returned, so a
// launch on any stream, blocking or not, reads ones.  (The first call on a device, and a call that needs a
// larger buffer, allocates and synchronizes the device: make it while no thread is capturing a CUDA graph.)
const float* unit_scales(std::size_t count) {
  static std::mutex mutex;
  static std::map<int, std::pair<float*, std::size_t>> buffers;  // device -> largest buffer so far
  int dev = 0;
  LOWBIT_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mutex);
  auto& [ptr, size] = buffers[dev];
  if (size < count) {
    const std::size_t n = std::max(count, 2 * size);
    float* p = nullptr;
    LOWBIT_CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)));
    const std::vector<float> ones(n, 1.0f);
    LOWBIT_CUDA_CHECK(cudaMemcpy(p, ones.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    LOWBIT_CUDA_CHECK(cudaDeviceSynchronize());
    ptr = p;
    size = n;
  }
  return ptr;
}

}  // namespace

bool available() { return true; }

std::size_t workspace_size(const Fp8Gemm& g) {
  check(g);
  return dispatch<Workspace, std::size_t>(g);
}

void run(const Fp8Gemm& g) {
  check(g);
  if (g.mode == Mode::promoted_blockwise) {
    Fp8Gemm u = g;
    u.sfa = u.sfb = unit_scales(std::max(sfa_count(g.m, g.k), sfb_count(g.n, g.k)));
    dispatch<Launch, int>(u);
    return;
  }
  dispatch<Launch, int>(g);
}

}  // namespace lowbit::device::gemm
