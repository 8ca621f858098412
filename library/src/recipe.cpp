#include "lowbit/recipe.hpp"

#include <string>

#include "lowbit/error.hpp"
#include "lowbit/names.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"

namespace lowbit {

namespace {

namespace S = scale;

// The block scheme's two shape spellings (TE's Float8BlockScaling: 1x128 activations, 128x128 weights).
struct BlockSpelling {
  const char* name;
  int block_rows;
  int block;
};
constexpr BlockSpelling block_spellings[] = {{"block1x128", 0, 0}, {"block128x128", 128, 128}};

// The value a field names (nullopt when not given); ArgumentError for a name the table lacks.
template <class E>
std::optional<E> field_value(const std::string& text, const char* field) {
  if (text.empty()) return std::nullopt;
  const auto v = parse<E>(text);
  if (!v) throw ArgumentError(field, "unknown '" + text + "' (" + choices<E>() + ")");
  return v;
}

// Profile defaults for the schemes (README "Scaling schemes"), where the scheme takes the option and the
// recipe left it: te uses rceil MX scales, power-of-two block scales and its fmaxf amax for non-finite blocks;
// torchao and ocp use floor; torchao's two-level NVFP4 is its own (Variant::torchao), its amax torch.amax,
// which propagates NaN.
void profile_defaults(const Profile& prof, S::Request& req) {
  const S::SchemeRow& row = S::scheme_row(req.scheme);
  if (std::string(prof.name) == "torchao" && req.scheme == S::Scheme::nvfp4) {
    if (!req.variant) req.variant = S::Variant::torchao;
    if (!req.amax_nan) req.amax_nan = S::AmaxNan::propagate;
  }
  // torchao's to_mx, unless the recipe names a non-finite rule or amax rule of its own (the torchao variant
  // has torchao's).
  if (std::string(prof.name) == "torchao" && req.scheme == S::Scheme::mx && !req.variant && !req.nonfinite &&
      !req.amax_nan)
    req.variant = S::Variant::torchao;
  if (std::string(prof.name) != "te") return;
  if (!req.mx_rule && row.takes.contains(S::Option::mx_rule)) req.mx_rule = S::MxRule::rceil;
  if (!req.scale_format && req.scheme == S::Scheme::block) req.scale_format = S::ScaleFormat::pow2;
  if (!req.nonfinite && row.takes.contains(S::Option::nonfinite)) req.nonfinite = S::NonFinite::amax;
}

}  // namespace

std::vector<std::string> scheme_spellings() {
  std::vector<std::string> v;
  for (S::Scheme s : all<S::Scheme>()) v.emplace_back(name(s));
  for (const BlockSpelling& b : block_spellings) v.emplace_back(b.name);
  return v;
}

std::string scheme_choices() {
  std::string s;
  for (const std::string& n : scheme_spellings()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

BuiltRecipe build(const Recipe& r) {
  S::Request req;
  const BlockSpelling* spelling = nullptr;
  for (const BlockSpelling& b : block_spellings)
    if (r.scheme == b.name) spelling = &b;
  const auto scheme = parse<S::Scheme>(spelling ? "block" : r.scheme);
  if (!scheme) throw ArgumentError("scheme", "unknown scheme '" + r.scheme + "' (" + scheme_choices() + ")");
  req.scheme = *scheme;
  if (spelling && spelling->block_rows) req.block_rows = spelling->block_rows;
  if (r.block_rows > 0) req.block_rows = r.block_rows;
  if (!r.element.empty()) {
    req.element = find_format(r.element);
    if (!req.element) throw ArgumentError("element", "unknown format '" + r.element + "'");
  }
  if (r.block != 0) req.block = r.block;
  BuiltRecipe out;
  const Profile* prof = nullptr;
  if (!r.profile.empty()) {
    prof = find_profile(r.profile);
    if (!prof) throw ArgumentError("profile", "unknown profile '" + r.profile + "'");
    out.profile = prof->name;
  }
  req.mx_rule = field_value<S::MxRule>(r.scale_rule, "scale_rule");
  req.scale_format = field_value<S::ScaleFormat>(r.scale_format, "scale_format");
  req.nonfinite = field_value<S::NonFinite>(r.nonfinite, "nonfinite");
  req.variant = field_value<S::Variant>(r.variant, "variant");
  req.zero_scale = field_value<S::ZeroScale>(r.zero_scale, "zero_scale");
  req.amax_nan = field_value<S::AmaxNan>(r.amax_nan, "amax_nan");
  req.compute = field_value<S::Compute>(r.compute, "compute");
  req.hadamard = r.hadamard;
  if (prof) profile_defaults(*prof, req);
  S::Options& so = out.options;
  if (const auto refused = S::resolve(req, so)) throw ArgumentError(S::argument_of(refused->option), refused->message);
  // The element policy: the profile's rounding and quirks; schemes always clamp to the element's range.
  PolicyRequest policy;
  if (!r.rounding.empty()) {
    policy.rounding = parse<Rounding>(r.rounding);
    if (!policy.rounding) throw ArgumentError("rounding", "unknown rounding mode '" + r.rounding + "'");
  }
  policy.overflow = Overflow::satfinite;
  policy.sr_bits = r.sr_bits;
  std::string error, argument;
  const auto resolved = resolve(prof, *so.element, policy, error, &argument);
  if (!resolved) throw ArgumentError(argument, error);
  so.element = resolved->target;
  so.element_policy = resolved->policy;
  if (!S::variant_row(so.variant).takes_stochastic_rounding && is_stochastic(so.element_policy.rounding))
    throw ArgumentError("rounding",
                        std::string("the NVFP4 ") + name(so.variant) + " variant takes no stochastic rounding");
  return out;
}

std::map<std::string, std::string> recipe_keys(const Recipe& r, const BuiltRecipe& built, const S::Quantized& q) {
  const S::Options& so = built.options;
  std::map<std::string, std::string> m;
  m["quantization_format"] = r.scheme;
  m["element"] = so.element->name;
  const S::SchemeRow& row = S::scheme_row(so.scheme);
  auto takes = [&](S::Option opt) { return row.takes.contains(opt); };
  if (takes(S::Option::block))
    m["block_size"] = q.block_rows > 1 ? std::to_string(q.block_rows) + "x" + std::to_string(q.block_cols)
                                       : std::to_string(q.block_cols);
  if (takes(S::Option::mx_rule)) m["scale_rule"] = name(so.mx_rule);
  // torchao's to_mx has its own NaN and Inf rule: no nonfinite key (the variant names it).
  if (takes(S::Option::nonfinite) && so.variant != S::Variant::torchao) m["nonfinite"] = name(so.nonfinite);
  if (takes(S::Option::scale_format)) m["scale_format"] = name(so.scale_format);
  // The FP8 rows' files keep no variant key for TE's own arithmetic, as before they took a variant.
  if (takes(S::Option::variant) && (row.family == S::Family::nvfp4 || so.variant != S::Variant::standard))
    m["variant"] = name(so.variant);
  if (so.compute != S::Compute::f32) m["compute"] = name(so.compute);
  if (takes(S::Option::zero_scale)) m["zero_scale"] = name(so.zero_scale);
  if (takes(S::Option::hadamard) && so.hadamard != S::Hadamard::none)
    m["hadamard"] = so.hadamard == S::Hadamard::exact ? "true" : name(so.hadamard);
  if (so.amax_propagates_nan) m["amax_nan"] = name(S::AmaxNan::propagate);
  if (!built.profile.empty()) m["profile"] = built.profile;
  if (!r.rounding.empty()) m["rounding"] = r.rounding;
  return m;
}

Recipe recipe_from_keys(const std::function<std::optional<std::string>(const std::string&)>& get) {
  Recipe r;
  const auto scheme = get("quantization_format");
  if (!scheme) throw ArgumentError("quantization_format", "missing");
  r.scheme = *scheme;
  auto copy = [&](const char* key, std::string& field) {
    if (const auto v = get(key)) field = *v;
  };
  copy("element", r.element);
  copy("scale_rule", r.scale_rule);
  copy("scale_format", r.scale_format);
  copy("nonfinite", r.nonfinite);
  copy("variant", r.variant);
  copy("compute", r.compute);
  copy("zero_scale", r.zero_scale);
  copy("profile", r.profile);
  copy("rounding", r.rounding);
  copy("amax_nan", r.amax_nan);
  if (const auto h = get("hadamard")) {
    if (*h == "true" || *h == "false") {
      r.hadamard = *h == "true" ? S::Hadamard::exact : S::Hadamard::none;
    } else if (const auto v = parse<S::Hadamard>(*h)) {
      r.hadamard = *v;
    } else {
      throw ArgumentError("hadamard", "'" + *h + "' is not true, false, " + choices<S::Hadamard>());
    }
  }
  if (const auto b = get("block_size")) {
    // "N" (1-D blocks of N along a row) or "RxN".
    auto number = [&](const std::string& t) {
      if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos || std::stoi(t) < 1)
        throw ArgumentError("block_size", "'" + *b + "' is not N or RxN with positive N and R");
      return std::stoi(t);
    };
    const auto x = b->find('x');
    if (x == std::string::npos) {
      r.block = number(*b);
    } else {
      r.block_rows = number(b->substr(0, x));
      r.block = number(b->substr(x + 1));
    }
  }
  return r;
}

std::string recipe_key(std::string_view field) {
  if (field == "scheme") return "quantization_format";
  if (field == "block") return "block_size";
  if (field == "to") return "element";
  return std::string(field);
}

}  // namespace lowbit
