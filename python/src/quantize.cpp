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
#include "lowbit/error.hpp"
#include "lowbit/recipe.hpp"

namespace lowbit::python {

namespace {

namespace S = scale;

struct SchemeOptions {
  S::Options options;
  std::string scheme;   // as the caller spelled it (block1x128 and block128x128 included)
  std::string profile;  // the profile's name, or empty
};

// `lowbit quantize`'s option rules: the library's recipe (lowbit/recipe.hpp), keyword for option.  A library
// ArgumentError names the recipe field, which is the keyword ("to": the element the profile lacks).
SchemeOptions scheme_options(const std::string& scheme, const std::optional<std::string>& element, int block,
                             const std::optional<std::string>& scale_rule,
                             const std::optional<std::string>& scale_format,
                             const std::optional<std::string>& nonfinite, const std::optional<std::string>& variant,
                             const std::optional<std::string>& zero_scale,
                             const std::optional<std::string>& profile_name,
                             const std::optional<std::string>& rounding, const std::optional<std::string>& amax_nan,
                             const std::string& hadamard, int sr_bits) {
  Recipe r;
  r.scheme = scheme;
  r.element = element.value_or("");
  r.block = block;
  r.scale_rule = scale_rule.value_or("");
  r.scale_format = scale_format.value_or("");
  r.nonfinite = nonfinite.value_or("");
  r.variant = variant.value_or("");
  r.zero_scale = zero_scale.value_or("");
  r.profile = profile_name.value_or("");
  r.rounding = rounding.value_or("");
  r.amax_nan = amax_nan.value_or("");
  const auto h = parse<scale::Hadamard>(hadamard);  // the Python side maps True / False to exact / none
  if (!h) value_error("hadamard", "'" + hadamard + "' is not True, False, " + choices<scale::Hadamard>());
  r.hadamard = *h;
  r.sr_bits = sr_bits;
  try {
    BuiltRecipe b = build(r);
    return {std::move(b.options), scheme, std::move(b.profile)};
  } catch (const ArgumentError& e) {
    value_error(e.argument == "to" ? "element" : e.argument, e.what());
  }
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
      [] { return scheme_spellings(); },
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
      .def_prop_ro("scheme", [](const S::Quantized& q) { return std::string(lowbit::name(q.scheme)); })
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
        return S::amax(x.data(), x.size(), 1, propagate_nan ? S::AmaxNan::propagate : S::AmaxNan::ignore);
      },
      nb::arg("x"), nb::arg("propagate_nan"), "The tensor's amax as the schemes compute it (fmaxf, or NaN-propagating).");
}

}  // namespace lowbit::python
