#include "contract_layout.hpp"

namespace lowbit::contract::layout {

namespace {
namespace S = scale;
using gemm::Kind;
using gemm::ScaleLayout;

bool per_tensor_or_none(const ScaleInfo& s) {
  return s.arrangement == Arrangement::none || s.arrangement == Arrangement::per_tensor;
}

std::string scale_text(const ScaleInfo& s) {
  switch (s.arrangement) {
    case Arrangement::none: return "no scales";
    case Arrangement::per_tensor: return "one scale per tensor";
    case Arrangement::k_blocks:
      return std::string(s.format->name) + " scales per 1x" + std::to_string(s.block_k) + " block";
    case Arrangement::tiles:
      return std::string(s.format->name) + " scales per " + std::to_string(s.block_rows) + "x" +
             std::to_string(s.block_k) + " block";
    case Arrangement::unsupported: return s.why;
  }
  return "";
}
}  // namespace

bool blocked(const ScaleInfo& s) {
  return s.arrangement == Arrangement::k_blocks || s.arrangement == Arrangement::tiles;
}

ScaleInfo scale_info(const Quantization& q) {
  ScaleInfo s;
  if (!q.recipe) return s;
  const S::Options& o = q.options;
  switch (o.scheme) {
    case S::Scheme::tensor:
      s.arrangement = Arrangement::per_tensor;
      s.format = &formats::f32;
      return s;
    case S::Scheme::delayed:
      // One f32 scale per tensor, from the run's delayed-scaling state (Inputs::delayed).
      s.arrangement = Arrangement::per_tensor;
      s.format = &formats::f32;
      return s;
    case S::Scheme::channel:
      s.arrangement = Arrangement::unsupported;
      s.why = "per-channel scales run along the reduction dimension, where no GEMM can apply them";
      return s;
    case S::Scheme::token:
      s.arrangement = Arrangement::unsupported;
      s.why = "per-token scales (a vector in the epilogue) are not modelled by a contract";
      return s;
    case S::Scheme::block:
      if (o.scale_format == S::ScaleFormat::ue8m0_packed) {
        s.arrangement = Arrangement::unsupported;
        s.why = "ue8m0-packed scales are read by no procedure here";
        return s;
      }
      s.format = &formats::f32;
      s.block_k = o.block;
      s.block_rows = o.block_rows > 1 ? o.block_rows : 1;
      s.arrangement = s.block_rows > 1 ? Arrangement::tiles : Arrangement::k_blocks;
      return s;
    case S::Scheme::mx:
      s.arrangement = Arrangement::k_blocks;
      s.format = &formats::e8m0;
      s.block_k = o.block;
      return s;
    case S::Scheme::nvfp4:
    case S::Scheme::nvfp4_2d:
    case S::Scheme::nvfp4_1level:
      // The block scales are e4m3 codes of positive values; the MMA reads them as ue4m3 (the same codes).
      s.format = &formats::ue4m3;
      s.block_k = 16;
      s.block_rows = o.scheme == S::Scheme::nvfp4_2d ? 16 : 1;
      s.arrangement = s.block_rows > 1 ? Arrangement::tiles : Arrangement::k_blocks;
      s.tensor_scale = o.scheme != S::Scheme::nvfp4_1level;
      return s;
  }
  return s;
}

std::optional<std::pair<int, std::string>> scale_problem(const PassContract& p) {
  const ScaleInfo sa = scale_info(p.a), sb = scale_info(p.b);
  const gemm::Procedure& proc = *p.procedure;
  const std::string name = proc.name;
  for (const auto& [i, s] : {std::pair{0, sa}, std::pair{1, sb}})
    if (s.arrangement == Arrangement::unsupported) return std::pair{i, std::string(s.why)};
  auto refuse = [&](int i, const std::string& what) {
    return std::optional<std::pair<int, std::string>>{
        std::pair{i, name + " " + what + ", not " + scale_text(i == 0 ? sa : sb)}};
  };
  const bool takes_blocks = proc.scales != ScaleLayout::none;
  if (!takes_blocks) {
    for (const auto& [i, s] : {std::pair{0, sa}, std::pair{1, sb}})
      if (!per_tensor_or_none(s)) return refuse(i, "takes no block scales: operands with one scale per tensor or none");
    return std::nullopt;
  }
  switch (proc.scales) {
    case ScaleLayout::none: break;
    case ScaleLayout::optional_k: {
      // The exact reference: per-tensor scales (applied by the epilogue) or block scales on both operands.
      if (per_tensor_or_none(sa) && per_tensor_or_none(sb)) return std::nullopt;
      if (!blocked(sa)) return refuse(0, "takes block scales on both operands or on neither");
      if (!blocked(sb)) return refuse(1, "takes block scales on both operands or on neither");
      if (!same_format(*sa.format, *sb.format))
        return refuse(1, std::string("needs A's scale format, ") + sa.format->name);
      if (sa.block_k != sb.block_k) return refuse(1, "needs A's block along K, " + std::to_string(sa.block_k));
      if (same_format(*sa.format, formats::f32)) {
        // f32 block scales: A per 1x128, B per 128x128 (DeepGEMM's layout, gemm::scale_shape).
        if (sa.arrangement != Arrangement::k_blocks || sa.block_k != 128)
          return refuse(0, "takes f32 block scales with A per 1x128");
        if (sb.arrangement != Arrangement::tiles || sb.block_rows != 128 || sb.block_k != 128)
          return refuse(1, "takes f32 block scales with B per 128x128");
      }
      return std::nullopt;
    }
    case ScaleLayout::per_k_block: {
      const gemm::TensorCoreModel& m = *proc.model;
      const Format& want = m.scale_block == 16 ? formats::ue4m3 : formats::e8m0;
      for (const auto& [i, s] : {std::pair{0, sa}, std::pair{1, sb}})
        if (!blocked(s) || !same_format(*s.format, want) || s.block_k != m.scale_block)
          return refuse(
              i, std::string("takes ") + want.name + " scales per " + std::to_string(m.scale_block) + " elements of K");
      return std::nullopt;
    }
    case ScaleLayout::deepgemm_1x128:
      if (sa.arrangement != Arrangement::k_blocks || !same_format(*sa.format, formats::f32) || sa.block_k != 128)
        return refuse(0, "takes A with f32 scales per 1x128 block");
      if (sb.arrangement != Arrangement::tiles || !same_format(*sb.format, formats::f32) || sb.block_k != 128 ||
          sb.block_rows != 128)
        return refuse(1, "takes B with f32 scales per 128x128 block");
      return std::nullopt;
    case ScaleLayout::deepgemm_1d1d:
      for (const auto& [i, s] : {std::pair{0, sa}, std::pair{1, sb}})
        if (s.arrangement != Arrangement::k_blocks || !same_format(*s.format, formats::f32) || s.block_k != 128)
          return refuse(i, std::string("takes ") + (i == 0 ? "A" : "B") + " with f32 scales per 1x128 block");
      return std::nullopt;
  }
  return std::nullopt;
}

bool scales_left_for_epilogue(const PassContract& p) {
  const ScaleInfo sa = scale_info(p.a), sb = scale_info(p.b);
  const bool promoted = p.procedure->kind == Kind::promoted;
  for (const ScaleInfo& s : {sa, sb})
    if ((s.arrangement == Arrangement::per_tensor && !promoted) || s.tensor_scale) return true;
  return false;
}

}  // namespace lowbit::contract::layout
