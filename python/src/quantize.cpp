// Scheme level: `lowbit quantize`'s options, scale::quantize with the interpreter's lock released, and the
// stored forms of its result (packing and the cuBLASLt scale layout, lowbit/pack.hpp).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "lowbit/names.hpp"
#include "lowbit/pack.hpp"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/scale.hpp"
#include "scheme_names.hpp"

namespace lowbit::python {

namespace {

namespace S = scale;

// The scheme names of `lowbit quantize --scheme`: the library's schemes, and two spellings of the block scheme
// with their block shapes.
struct SchemeName {
  const char* name;
  S::Scheme scheme;
  int block_rows;
  int block;
};
constexpr SchemeName scheme_names[] = {
    {"tensor", S::Scheme::tensor, 0, 0},       {"delayed", S::Scheme::delayed, 0, 0},
    {"channel", S::Scheme::channel, 0, 0},     {"token", S::Scheme::token, 0, 0},
    {"block1x128", S::Scheme::block, 0, 0},    {"block128x128", S::Scheme::block, 128, 128},
    {"block", S::Scheme::block, 0, 0},         {"mx", S::Scheme::mx, 0, 0},
    {"nvfp4", S::Scheme::nvfp4, 0, 0},         {"nvfp4-2d", S::Scheme::nvfp4_2d, 0, 0},
    {"nvfp4-1level", S::Scheme::nvfp4_1level, 0, 0},
};

std::string scheme_choices() {
  std::string s;
  for (const SchemeName& n : scheme_names) s += (s.empty() ? "" : ", ") + std::string(n.name);
  return s;
}

template <class E>
std::optional<E> parse_option(const char* argument, const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const std::optional<E> v = parse<E>(*text);
  if (!v) value_error(argument, "'" + *text + "' is not one of " + choices<E>());
  return v;
}

struct SchemeOptions {
  S::Options options;
  std::string scheme;   // as the caller spelled it (block1x128 and block128x128 included)
  std::string profile;  // the profile's name, or empty
};

// `lowbit quantize`'s option rules (tools/lowbit/quantize_cmd.cpp build_options), keyword for option.
SchemeOptions scheme_options(const std::string& scheme, const std::optional<std::string>& element, int block,
                             const std::optional<std::string>& scale_rule,
                             const std::optional<std::string>& scale_format,
                             const std::optional<std::string>& nonfinite, const std::string& variant,
                             const std::string& zero_scale, const std::optional<std::string>& profile_name,
                             const std::optional<std::string>& rounding, const std::string& amax_nan, bool hadamard,
                             int sr_bits) {
  SchemeOptions out;
  S::Options& so = out.options;
  const SchemeName* sn = nullptr;
  for (const SchemeName& n : scheme_names)
    if (scheme == n.name) sn = &n;
  if (!sn) value_error("scheme", "'" + scheme + "' is not one of " + scheme_choices());
  out.scheme = scheme;
  so.scheme = sn->scheme;
  so.block_rows = sn->block_rows;
  if (element) so.element = &require_format("element", *element);
  so.block = block != 0 ? block : sn->block;
  const Profile* prof = nullptr;
  if (profile_name) {
    prof = find_profile(*profile_name);
    if (!prof) value_error("profile", "'" + *profile_name + "' is not a profile");
    out.profile = prof->name;
  }
  // The te profile's scheme defaults (README "Scaling schemes"): rceil MX scales, power-of-two block scales,
  // the fmaxf amax for non-finite blocks.
  if (prof && std::string(prof->name) == "te") {
    so.mx_rule = S::MxRule::rceil;
    if (so.scheme == S::Scheme::block) so.scale_format = S::ScaleFormat::pow2;
    so.nonfinite = S::NonFinite::amax;
  }
  if (const auto r = parse_option<S::MxRule>("scale_rule", scale_rule)) {
    so.mx_rule = *r;
    if (so.scheme != S::Scheme::mx) value_error("scale_rule", "applies to the mx scheme");
  }
  if (const auto f = parse_option<S::ScaleFormat>("scale_format", scale_format)) so.scale_format = *f;
  if (const auto nf = parse_option<S::NonFinite>("nonfinite", nonfinite)) so.nonfinite = *nf;
  so.variant = *parse_option<S::Variant>("variant", variant);
  so.zero_scale = *parse_option<S::ZeroScale>("zero_scale", zero_scale);
  if (amax_nan == "propagate") so.amax_propagates_nan = true;
  else if (amax_nan != "ignore") value_error("amax_nan", "'" + amax_nan + "' is not one of ignore, propagate");
  so.hadamard = hadamard;
  if (const std::string e = S::normalize(so); !e.empty()) library_error(e);
  // The element policy: the profile's rounding and quirks; schemes always clamp to the element's range.
  PolicyRequest req;
  req.rounding = parse_option<Rounding>("rounding", rounding);
  req.overflow = Overflow::satfinite;
  req.sr_bits = sr_bits;
  std::string err;
  const auto resolved = resolve(prof, *so.element, req, err);
  if (!resolved) library_error(err);
  so.element = resolved->target;
  so.element_policy = resolved->policy;
  if ((so.variant == S::Variant::four_over_six || so.variant == S::Variant::four_over_six_mse) &&
      is_stochastic(so.element_policy.rounding))
    value_error("rounding", "the NVFP4 4over6 variant takes no stochastic rounding");
  return out;
}

std::vector<float> history_of(const nb::ndarray<const float, nb::c_contig, nb::device::cpu, nb::ndim<1>>& h) {
  return std::vector<float>(h.data(), h.data() + h.size());
}

using F32Matrix = nb::ndarray<const float, nb::c_contig, nb::device::cpu, nb::ndim<2>>;
using Bits = nb::ndarray<const std::uint32_t, nb::c_contig, nb::device::cpu, nb::ndim<1>>;

S::Quantized run_quantize(const F32Matrix& x, const SchemeOptions& o, std::optional<Bits> random_bits,
                          S::DelayedState* state) {
  const std::size_t rows = x.shape(0), cols = x.shape(1);
  if (rows < 1 || cols < 1 || rows > 0x7FFFFFFF || cols > 0x7FFFFFFF || rows * cols > 0x7FFFFFFF)
    value_error("x", std::to_string(rows) + "x" + std::to_string(cols) + " cannot be quantized");
  const bool stochastic = is_stochastic(o.options.element_policy.rounding);
  if (stochastic != random_bits.has_value())
    value_error("random_bits", stochastic ? "a stochastic rounding needs one value per element" : "only with a stochastic rounding");
  if (random_bits && random_bits->size() != rows * cols)
    value_error("random_bits", std::to_string(random_bits->size()) + " values for " + std::to_string(rows * cols) + " elements");
  S::Tensor t{static_cast<int>(rows), static_cast<int>(cols), std::vector<float>(x.data(), x.data() + rows * cols)};
  std::vector<std::uint32_t> bits;
  if (random_bits) bits.assign(random_bits->data(), random_bits->data() + random_bits->size());
  nb::gil_scoped_release unlocked;
  return S::quantize(t, o.options, random_bits ? &bits : nullptr, state);
}

std::vector<std::uint8_t> scale_bytes(const S::Quantized& q) { return {q.scales.begin(), q.scales.end()}; }

}  // namespace

void bind_quantize(nb::module_& m) {
  m.def(
      "scheme_names",
      [] {
        std::vector<std::string> out;
        for (const SchemeName& n : scheme_names) out.emplace_back(n.name);
        return out;
      },
      "The scheme names `lowbit quantize --scheme` takes.");

  nb::class_<SchemeOptions>(m, "SchemeOptions", "The options of one quantization (see scheme_options).")
      .def_prop_ro("scheme", [](const SchemeOptions& o) { return o.scheme; })
      .def_prop_ro("element", [](const SchemeOptions& o) { return std::string(o.options.element->name); })
      .def_prop_ro("stochastic", [](const SchemeOptions& o) { return is_stochastic(o.options.element_policy.rounding); })
      .def_prop_ro("sr_bits", [](const SchemeOptions& o) { return o.options.element_policy.sr_bits; })
      .def_prop_ro("amax_propagates_nan", [](const SchemeOptions& o) { return o.options.amax_propagates_nan; })
      .def_prop_ro("profile", [](const SchemeOptions& o) { return o.profile; });
  m.def("scheme_options", &scheme_options, nb::arg("scheme"), nb::arg("element").none(), nb::arg("block"),
        nb::arg("scale_rule").none(), nb::arg("scale_format").none(), nb::arg("nonfinite").none(),
        nb::arg("variant"), nb::arg("zero_scale"), nb::arg("profile").none(), nb::arg("rounding").none(),
        nb::arg("amax_nan"), nb::arg("hadamard"), nb::arg("sr_bits"),
        "Options of `lowbit quantize`, checked as it checks them; ValueError naming the keyword otherwise.");

  nb::class_<S::DelayedState>(m, "DelayedState",
                              "Delayed scaling's training state (TE delayed_scaling.cu): the amax history, slot 0 the "
                              "newest, and the scale the next step quantizes with.")
      .def(
          "__init__",
          [](S::DelayedState* s, std::optional<nb::ndarray<const float, nb::c_contig, nb::device::cpu, nb::ndim<1>>> history,
             float scale, const std::string& algorithm, int margin) {
            if (algorithm != "max" && algorithm != "most_recent")
              value_error("algorithm", "'" + algorithm + "' is not one of max, most_recent");
            new (s) S::DelayedState{history ? history_of(*history) : std::vector<float>{}, scale, algorithm == "max",
                                    margin};
          },
          nb::arg("history").none() = nb::none(), nb::arg("scale") = 1.0f, nb::arg("algorithm") = "max",
          nb::arg("margin") = 0,
          "history: f32 amaxes, newest first (None: 1024 zeros on first use, as `lowbit quantize --state` starts).")
      .def_prop_ro("history", [](const S::DelayedState& s) { return to_numpy(std::vector<float>(s.history)); },
                   nb::rv_policy::move)
      .def_prop_ro("scale", [](const S::DelayedState& s) { return s.scale; })
      .def_prop_ro("scale_bits", [](const S::DelayedState& s) { return std::bit_cast<std::uint32_t>(s.scale); })
      .def_prop_ro("algorithm", [](const S::DelayedState& s) { return std::string(s.max_algorithm ? "max" : "most_recent"); })
      .def_prop_ro("margin", [](const S::DelayedState& s) { return s.margin; })
      .def("__copy__", [](const S::DelayedState& s) { return S::DelayedState(s); });

  nb::class_<S::Quantized>(m, "QuantizedTensor", "scale::Quantized: codes, scales and block shape of one quantization.")
      .def_prop_ro("scheme", [](const S::Quantized& q) { return std::string(S::name(q.scheme)); })
      .def_prop_ro("element", [](const S::Quantized& q) { return std::string(q.element->name); })
      .def_prop_ro("rows", [](const S::Quantized& q) { return q.rows; })
      .def_prop_ro("cols", [](const S::Quantized& q) { return q.cols; })
      .def_prop_ro("block_rows", [](const S::Quantized& q) { return q.block_rows; })
      .def_prop_ro("block_cols", [](const S::Quantized& q) { return q.block_cols; })
      .def_prop_ro("scale_rows", [](const S::Quantized& q) { return q.scale_rows(); })
      .def_prop_ro("scale_cols", [](const S::Quantized& q) { return q.scale_cols(); })
      .def_prop_ro("scale_format", [](const S::Quantized& q) { return std::string(q.scale_format->name); })
      .def_prop_ro("tensor_scale_bits", [](const S::Quantized& q) { return q.tensor_scale; })
      .def("codes", [](const S::Quantized& q) { return to_numpy(std::vector<std::uint8_t>(q.codes)); },
           "One code per element, row-major.")
      .def(
          "scale_codes",
          [](const S::Quantized& q) -> nb::object {
            if (q.scale_format->storage_bits() == 32) {
              std::vector<std::uint32_t> w(q.scales.begin(), q.scales.end());
              return nb::cast(to_numpy(std::move(w)));
            }
            return nb::cast(to_numpy(scale_bytes(q)));
          },
          "The scale codes in block order: u32 f32 bit patterns, or u8 codes of e8m0 and e4m3 scales.")
      .def("packed_scales", [](const S::Quantized& q) { return to_numpy(std::vector<std::uint32_t>(q.packed_scales)); },
           "ue8m0-packed scales: four codes per word, the first in bits 7:0.")
      .def(
          "packed_codes",
          [](const S::Quantized& q) {
            return to_numpy(pack::pack_rows(q.element->bits == 4 ? 4 : q.element->bits == 6 ? 6 : 8, q.codes,
                                            static_cast<std::size_t>(q.rows), static_cast<std::size_t>(q.cols)));
          },
          "Codes packed row by row (lowbit/pack.hpp): FP4 two per byte, FP6 four per three bytes, 8-bit as they are.")
      .def(
          "cublaslt_scales",
          [](const S::Quantized& q) {
            // cuBLASLt's 1D block scaling factors layout holds 8-bit scales of 1-D blocks (VEC16_UE4M3,
            // VEC32_UE8M0), one row per tensor row (the rule of `lowbit quantize --scale-layout cublaslt`).
            if (q.scale_format->bits != 8 || q.block_rows != 1)
              value_error("layout", std::string("the cublaslt layout holds 8-bit scales of 1-D blocks (mx, nvfp4, "
                                                "nvfp4-1level), not ") +
                                        q.scale_format->name + " scales of " + std::to_string(q.block_rows) + "x" +
                                        std::to_string(q.block_cols) + " blocks");
            return to_numpy(pack::swizzle_cublaslt(scale_bytes(q), static_cast<std::size_t>(q.scale_rows()),
                                                   static_cast<std::size_t>(q.scale_cols())));
          },
          "The scales in cuBLASLt's 128x4-tiled layout (zero padding).")
      .def(
          "dequantize",
          [](const S::Quantized& q) {
            std::vector<double> v;
            {
              nb::gil_scoped_release unlocked;
              v = S::dequantize(q);
            }
            return to_numpy(std::move(v));
          },
          "code * scale (* tensor scale) per element, exact in f64.");

  m.def(
      "quantize",
      [](const F32Matrix& x, const SchemeOptions& o, std::optional<Bits> random_bits,
         std::optional<S::DelayedState> state) {
        S::DelayedState st = state.value_or(S::DelayedState{});
        S::Quantized q = run_quantize(x, o, random_bits, o.options.scheme == S::Scheme::delayed ? &st : nullptr);
        return nb::make_tuple(std::move(q), o.options.scheme == S::Scheme::delayed ? nb::cast(st) : nb::none());
      },
      nb::arg("x"), nb::arg("options"), nb::arg("random_bits").none(), nb::arg("state").none(),
      "scale::quantize on a C-contiguous f32 matrix; returns the result and, for the delayed scheme, the new state.");
  m.def(
      "amax",
      [](const nb::ndarray<const float, nb::c_contig, nb::device::cpu>& x, bool propagate_nan) {
        nb::gil_scoped_release unlocked;
        return S::amax(x.data(), x.size(), 1, propagate_nan);
      },
      nb::arg("x"), nb::arg("propagate_nan"), "The tensor's amax as the schemes compute it (fmaxf, or NaN-propagating).");
}

}  // namespace lowbit::python
