// Requests into Options, driven by the scheme rows of scale.hpp: the defaults a row gives, and a refusal
// naming the option for anything a row does not take.
#include <bit>
#include <string>

#include "lowbit/error.hpp"
#include "lowbit/scale.hpp"

namespace lowbit::scale {

namespace {

// "block, mx and nvfp4": the schemes whose rows satisfy `pred`.
template <class Pred>
std::string schemes_where(Pred pred) {
  std::string s;
  int n = 0;
  for (const SchemeRow& r : scheme_rows) n += pred(r) ? 1 : 0;
  int k = 0;
  for (const SchemeRow& r : scheme_rows) {
    if (!pred(r)) continue;
    if (k > 0) s += k + 1 == n ? " and " : ", ";
    s += name(r.scheme);
    ++k;
  }
  return s.empty() ? "no scheme" : s;
}

// "e4m3, e5m2 or e2m1".
std::string element_list(std::span<const Format* const> v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s += i + 1 == v.size() ? " or " : ", ";
    s += v[i]->name;
  }
  return s;
}

class Resolver {
 public:
  Resolver(const Request& r, Options& out) : r_(r), row_(scheme_row(r.scheme)), o_(out) {}

  std::optional<Refusal> run() {
    o_ = Options{};
    o_.scheme = r_.scheme;
    o_.element_policy = r_.element_policy;
    if (auto f = element()) return f;
    if (auto f = block_shape()) return f;
    if (auto f = choices()) return f;
    return variant_rules();
  }

 private:
  std::optional<Refusal> refuse(Option opt, const std::string& why) const { return Refusal{opt, why}; }

  // A named option the row does not take: which schemes do.
  std::optional<Refusal> not_taken(Option opt, const std::string& given) const {
    return refuse(opt, std::string("does not apply to the ") + name(r_.scheme) + " scheme (given " + given +
                           "; it applies to " +
                           schemes_where([&](const SchemeRow& s) { return s.takes.contains(opt); }) + ")");
  }
  bool takes(Option opt) const { return row_.takes.contains(opt); }

  std::optional<Refusal> element() {
    o_.element = r_.element != nullptr ? r_.element : row_.default_element;
    const Format& e = *o_.element;
    if (!row_.elements.empty()) {
      bool listed = false;
      for (const Format* f : row_.elements) listed = listed || f == &e;
      if (!listed)
        return refuse(Option::element,
                      std::string(row_.label) + " elements are " + element_list(row_.elements) + ", not " + e.name);
    }
    if (e.storage_bits() > 8)
      return refuse(Option::element, std::string("scheme elements are at most 8 bits, not ") + e.name);
    return std::nullopt;
  }

  std::string shape_given() const {
    std::string s;
    if (r_.block_rows) s = std::to_string(*r_.block_rows) + "x";
    return s + (r_.block ? std::to_string(*r_.block) : std::string("(default)"));
  }

  // One side of the block: the row's extent and the request's value; `out` receives the side's size in
  // Options' terms (0 where Options leaves it to quantize: a whole extent, or 1-D rows).
  std::optional<Refusal> side(const Extent& e, const std::optional<int>& given, const char* what, int& out) const {
    switch (e.kind) {
      case Extent::Kind::whole:
        if (given)
          return refuse(Option::block, std::string(row_.label) + " blocks span the tensor's " + what + "s, not " +
                                           std::to_string(*given) + " (given " + shape_given() + ")");
        out = 0;
        return std::nullopt;
      case Extent::Kind::fixed:
        if (given && *given != e.size)
          return refuse(Option::block, std::string(row_.label) + " blocks are " + std::to_string(e.size) + " " + what +
                                           (e.size == 1 ? "" : "s") + ", not " + std::to_string(*given));
        out = e.size == 1 && std::string_view(what) == "row" ? 0 : e.size;
        return std::nullopt;
      case Extent::Kind::chosen:
        if (given && *given < 1) return refuse(Option::block, "must be positive");
        if (given && *given > max_block_side)
          return refuse(Option::block, std::to_string(*given) + " is longer than the longest block side, " +
                                           std::to_string(max_block_side));
        out = given ? *given : e.size;
        return std::nullopt;
    }
    return std::nullopt;
  }

  std::optional<Refusal> block_shape() {
    if (!takes(Option::block)) {
      if (r_.block || r_.block_rows) return not_taken(Option::block, shape_given());
      return std::nullopt;  // Options leave the block to quantize (0, 0)
    }
    if (auto f = side(row_.block_cols, r_.block, "column", o_.block)) return f;
    return side(row_.block_rows, r_.block_rows, "row", o_.block_rows);
  }

  template <class E>
  std::optional<Refusal> choice(Option opt, const std::optional<E>& given, E& field) const {
    if (!given) return std::nullopt;
    if (!takes(opt)) return not_taken(opt, name(*given));
    field = *given;
    return std::nullopt;
  }

  std::optional<Refusal> choices() {
    if (auto f = choice(Option::scale_format, r_.scale_format, o_.scale_format)) return f;
    if (r_.scale_format && !row_.scale_formats.contains(*r_.scale_format))
      return refuse(Option::scale_format,
                    std::string(name(*r_.scale_format)) + " does not apply to the " + name(r_.scheme) +
                        " scheme (it applies to " + schemes_where([&](const SchemeRow& s) {
                          return s.takes.contains(Option::scale_format) && s.scale_formats.contains(*r_.scale_format);
                        }) +
                        ")");
    if (auto f = choice(Option::mx_rule, r_.mx_rule, o_.mx_rule)) return f;
    if (auto f = choice(Option::nonfinite, r_.nonfinite, o_.nonfinite)) return f;
    AmaxNan amax_nan = AmaxNan::ignore;
    if (auto f = choice(Option::amax_nan, r_.amax_nan, amax_nan)) return f;
    o_.amax_propagates_nan = amax_nan == AmaxNan::propagate;
    if (r_.eps) {
      if (!takes(Option::eps)) return not_taken(Option::eps, std::to_string(*r_.eps));
      // DeepGEMM's packed scales floor the amax at 1e-4 themselves (rules::packed_block_scale).
      if (o_.scale_format == ScaleFormat::ue8m0_packed)
        return refuse(Option::eps, "ue8m0-packed scales take no eps (their amax floor is DeepGEMM's 1e-4)");
      o_.eps = *r_.eps;
    }
    if (auto f = choice(Option::zero_scale, r_.zero_scale, o_.zero_scale)) return f;
    if (auto f = choice(Option::variant, r_.variant, o_.variant)) return f;
    if (r_.variant && !row_.variants.contains(*r_.variant))
      return refuse(Option::variant,
                    std::string(name(*r_.variant)) + " does not apply to the " + name(r_.scheme) + " scheme");
    if (r_.hadamard != Hadamard::none) {
      if (!takes(Option::hadamard)) return not_taken(Option::hadamard, name(r_.hadamard));
      o_.hadamard = r_.hadamard;
    }
    if (auto f = choice(Option::compute, r_.compute, o_.compute)) return f;
    if (r_.tensor_amax) {
      if (row_.family != Family::nvfp4) return not_taken(Option::variant, "a shared tensor amax");
      o_.tensor_amax = r_.tensor_amax;
    }
    return std::nullopt;
  }

  // What the chosen variant's row excludes.
  std::optional<Refusal> variant_rules() const {
    const VariantRow& v = variant_row(o_.variant);
    if (o_.hadamard != Hadamard::none && !v.takes_hadamard)
      return refuse(Option::variant, std::string(name(o_.variant)) + " is not combined with the Hadamard transform");
    if (is_stochastic(o_.element_policy.rounding) && !v.takes_stochastic_rounding)
      return refuse(Option::variant, std::string(name(o_.variant)) + " is not combined with stochastic rounding");
    if (v.order == Order::torchao && row_.family == Family::mx) {
      // torchao's to_mx has its own NaN and Inf rule (torch.amax propagates NaN; see Reference::mx_torchao)
      // and the four ScaleCalculationModes.
      if (r_.nonfinite) return refuse(Option::nonfinite, "the torchao variant has torchao's own NaN and Inf rule");
      if (r_.amax_nan) return refuse(Option::amax_nan, "the torchao variant's amax is torch.amax, which propagates NaN");
      if (o_.mx_rule == MxRule::rne) return refuse(Option::mx_rule, "torchao has floor, ceil, even and rceil, not rne");
      if (o_.element == &formats::int8 || o_.element == &formats::int8sm)
        return refuse(Option::element, "torchao's MX elements are e4m3, e5m2, e2m3, e3m2 and e2m1");
      if (is_stochastic(o_.element_policy.rounding)) return refuse(Option::variant, "torchao's to_mx rounds to nearest");
    }
    if (v.order == Order::gguf) {
      // gguf-py's MXFP4 (ggml type 39) is one arithmetic: e2m1 in blocks of 32, its own scale rule, NaN and Inf
      // handling and nearest-element choice (Reference::mx_gguf), in f32.
      if (r_.element == nullptr) o_.element = &formats::e2m1;  // the only element it has
      if (o_.element != &formats::e2m1)
        return refuse(Option::element,
                      std::string("the gguf variant's elements are e2m1 (GGUF MXFP4), not ") + o_.element->name);
      if (o_.block != 32 || o_.block_rows > 1)
        return refuse(Option::block, "the gguf variant's blocks are 32 elements of a row (GGUF MXFP4)");
      if (r_.mx_rule) return refuse(Option::mx_rule, "the gguf variant has gguf-py's own scale rule");
      if (r_.nonfinite) return refuse(Option::nonfinite, "the gguf variant has gguf-py's own NaN and Inf rule");
      if (r_.amax_nan) return refuse(Option::amax_nan, "the gguf variant's amax is numpy's max, which propagates NaN");
      if (o_.compute != Compute::f32) return refuse(Option::compute, "gguf-py quantizes in f32 (numpy float32)");
      const Policy plain{.rounding = Rounding::rne, .overflow = Overflow::satfinite};
      if (o_.element_policy.rounding != plain.rounding || o_.element_policy.overflow != plain.overflow)
        return refuse(Option::variant,
                      "gguf-py picks each element as the nearest kvalue (argmin): no other "
                      "rounding or overflow policy");
    }
    if (!v.exporter && o_.compute != Compute::f32)
      return refuse(Option::compute, std::string(name(o_.compute)) + " applies to the exporters' variants only (" +
                                         name(o_.variant) + " computes in f32)");
    if (v.exporter) {
      // The exporters have none of these: compressed-tensors' scale is amax / max in the weight's dtype, an
      // all-zero block's scale that dtype's eps (0.125 for an e4m3 scale); ModelOpt's amax / max in f32, an
      // all-zero NVFP4 block's scale 1.
      const std::string variant = std::string("the ") + name(o_.variant) + " variant";
      if (o_.eps != 0.0f) return refuse(Option::eps, variant + " takes no eps");
      if (o_.scale_format != ScaleFormat::f32) return refuse(Option::scale_format, variant + " keeps f32 scales");
      if (o_.zero_scale != ZeroScale::kernel)
        return refuse(Option::zero_scale, variant + " has its own zero block scale");
      if (o_.amax_propagates_nan) return refuse(Option::amax_nan, variant + " takes no amax-nan");
    }
    if (v.order == Order::modelopt && row_.family == Family::nvfp4 && o_.compute != Compute::f32)
      return refuse(Option::compute, "ModelOpt's NVFP4 computes in f32 whatever the weight's dtype");
    if (v.order == Order::transformers && o_.compute != Compute::f32)
      return refuse(Option::compute, "transformers' FineGrainedFP8 computes in f32 whatever the weight's dtype");
    return std::nullopt;
  }

  const Request& r_;
  const SchemeRow& row_;
  Options& o_;
};

}  // namespace

std::optional<Refusal> resolve(const Request& r, Options& out) {
  Options o;
  if (auto f = Resolver(r, o).run()) return f;
  out = o;
  return std::nullopt;
}

Request request_of(const Options& o) {
  const Options d{};
  Request r;
  r.scheme = o.scheme;
  r.element = o.element;
  if (o.block != d.block) r.block = o.block;
  if (o.block_rows != d.block_rows) r.block_rows = o.block_rows;
  if (o.scale_format != d.scale_format) r.scale_format = o.scale_format;
  if (o.mx_rule != d.mx_rule) r.mx_rule = o.mx_rule;
  if (o.nonfinite != d.nonfinite) r.nonfinite = o.nonfinite;
  if (o.amax_propagates_nan) r.amax_nan = AmaxNan::propagate;
  if (std::bit_cast<std::uint32_t>(o.eps) != std::bit_cast<std::uint32_t>(d.eps)) r.eps = o.eps;
  if (o.zero_scale != d.zero_scale) r.zero_scale = o.zero_scale;
  if (o.variant != d.variant) r.variant = o.variant;
  r.hadamard = o.hadamard;
  if (o.compute != d.compute) r.compute = o.compute;
  r.tensor_amax = o.tensor_amax;
  r.element_policy = o.element_policy;
  return r;
}

std::string normalize(Options& o) {
  Options out;
  if (const auto f = resolve(request_of(o), out)) return argument_of(f->option) + ": " + f->message;
  o = out;
  return "";
}

std::string argument_of(Option o) {
  std::string s = name(o);
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

void require_resolved(Options& o) {
  Options out;
  if (const auto f = resolve(request_of(o), out)) throw ArgumentError(argument_of(f->option), f->message);
  o = out;
}

}  // namespace lowbit::scale
