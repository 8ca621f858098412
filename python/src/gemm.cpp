// GEMM: gemm::run (lowbit/procedure.hpp) on code matrices, as `lowbit gemm` runs it, with the interpreter's lock
// released; and the procedure rows for lowbit.models().
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "lowbit/error.hpp"
#include "lowbit/names.hpp"
#include "lowbit/procedure.hpp"

namespace lowbit::python {

namespace {

// The package's keyword for a library argument id (the ids are `lowbit gemm`'s JSON keys).
std::string keyword(const std::string& argument) { return argument == "d_format" ? "out_format" : argument; }

gemm::Matrix matrix(const char* argument, const Codes& codes, const std::string& format, int rows, int cols) {
  const Format& f = require_format(std::string(argument) + "_format", format);
  if (codes.itemsize() != storage_bytes(f)) type_error(argument, "item width does not match " + std::string(f.name));
  if (codes.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols))
    value_error(argument, std::to_string(codes.size()) + " codes, the procedure reads " + std::to_string(rows) + "x" +
                              std::to_string(cols));
  gemm::Matrix m{&f, rows, cols, std::vector<std::uint64_t>(codes.size())};
  for (std::size_t i = 0; i < codes.size(); ++i) m.codes[i] = load(codes, i);
  return m;
}

// The procedure's scale matrices' shape for D = A (m x k) B (k x n), ValueError naming the keyword otherwise.
gemm::ScaleShape scale_shape_of(const gemm::Procedure& p, int m, int n, int k, const std::optional<std::string>& format,
                                int block) {
  const Format* sf = format ? &require_format("scale_format", *format) : nullptr;
  try {
    return gemm::scale_shape(p, m, n, k, sf, block);
  } catch (const ArgumentError& e) {
    value_error(keyword(e.argument), e.what());
  }
}

nb::tuple run(const std::string& model, const Codes& a, const std::string& a_format, int m, int k, const Codes& b,
              const std::string& b_format, int n, std::optional<Codes> c, const std::optional<std::string>& c_format,
              std::optional<Codes> a_scales, std::optional<Codes> b_scales,
              const std::optional<std::string>& scale_format, int scale_block, std::uint32_t alpha,
              std::optional<std::uint32_t> beta, std::uint32_t scale_a, std::uint32_t scale_b, std::uint32_t scale_c,
              std::uint32_t scale_d, const std::optional<std::string>& out_format) {
  const gemm::Procedure* p = gemm::find_procedure(model);
  if (!p) value_error("model", "'" + model + "' is not a GEMM procedure (see lowbit.models())");
  const gemm::Matrix ma = matrix("a", a, a_format, m, k), mb = matrix("b", b, b_format, k, n);
  std::optional<gemm::Matrix> mc, sa, sb;
  if (c) mc = matrix("c", *c, c_format.value_or("f32"), m, n);
  gemm::Operands ops{.a = &ma, .b = &mb, .c = mc ? &*mc : nullptr};
  const bool required = gemm::needs_block_scales(*p);
  if (a_scales.has_value() != b_scales.has_value()) value_error(a_scales ? "b_scales" : "a_scales", "both scales or neither");
  if (required || (p->scales == gemm::ScaleLayout::optional_k && a_scales)) {
    if (!a_scales) value_error("a_scales", std::string(p->name) + " reads block scales of A and B");
    const gemm::ScaleShape sh = scale_shape_of(*p, m, n, k, scale_format, scale_block);
    sa = matrix("a_scales", *a_scales, sh.format->name, sh.a_rows, sh.a_cols);
    sb = matrix("b_scales", *b_scales, sh.format->name, sh.b_rows, sh.b_cols);
    ops.a_scales = &*sa;
    ops.b_scales = &*sb;
    ops.scale_block = sh.block;
  } else if (a_scales || scale_format || scale_block) {
    value_error(a_scales ? "a_scales" : scale_format ? "scale_format" : "scale_block",
                std::string(p->name) + " takes no block scales");
  }
  gemm::Epilogue& e = ops.epilogue;
  e.alpha = alpha;
  e.beta = beta;
  e.scale_a = scale_a;
  e.scale_b = scale_b;
  e.scale_c = scale_c;
  e.scale_d = scale_d;
  if (out_format) e.d_format = &require_format("out_format", *out_format);
  gemm::RunResult r;
  try {
    nb::gil_scoped_release unlocked;
    r = gemm::run(*p, ops);
  } catch (const ArgumentError& err) {
    value_error(keyword(err.argument), err.what());
  }
  nb::object quantized = nb::none(), quantized_format = nb::none();
  if (r.quantized_format) {
    quantized = nb::cast(to_numpy(std::move(r.quantized)));
    quantized_format = nb::cast(std::string(r.quantized_format->name));
  }
  return nb::make_tuple(to_numpy(std::move(r.d)), std::string(r.format->name), quantized, quantized_format);
}

// The rows of `lowbit gemm --list-models --json` (tools/lowbit/gemm_cmd.cpp list_models).
nb::list procedure_infos() {
  nb::list out;
  for (const gemm::Procedure& p : gemm::procedures()) {
    nb::dict d;
    d["name"] = p.name;
    d["kind"] = name(p.kind);
    d["description"] = p.description;
    d["scales"] = name(p.scales);
    std::vector<std::string> operands;
    for (const Format* f : p.operands) operands.emplace_back(f->name);
    d["operands"] = operands;
    d["converts_exactly"] = p.conversion == gemm::Conversion::exact;
    d["operand_rule"] = gemm::operand_text(p);
    if (p.model) {
      const gemm::TensorCoreModel& m = *p.model;
      nb::dict md;
      md["name"] = m.name;
      md["group"] = m.group;
      md["fraction_bits"] = m.fraction_bits;
      md["output"] = name(m.output);
      md["block_scale"] = name(m.scale);
      md["scale_block"] = m.scale_block;
      md["datapath"] = name(m.datapath);
      d["model"] = md;
    } else {
      d["model"] = nb::none();
    }
    d["interval"] = p.interval ? nb::cast(p.interval) : nb::none();
    nb::list golden;
    for (const gemm::OperandPair& g : p.golden) {
      nb::dict gd;
      gd["a_format"] = g.a->name;
      gd["b_format"] = g.b->name;
      if (g.scale) {
        gd["scale_format"] = g.scale->name;
        gd["scale_block"] = g.scale_block;
      }
      golden.append(gd);
    }
    d["golden"] = golden;
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_gemm(nb::module_& m) {
  m.def("procedures", &procedure_infos, "Every GEMM procedure as the rows of `lowbit gemm --list-models --json`.");
  m.def("gemm", &run, nb::arg("model"), nb::arg("a"), nb::arg("a_format"), nb::arg("m"), nb::arg("k"), nb::arg("b"),
        nb::arg("b_format"), nb::arg("n"), nb::arg("c").none(), nb::arg("c_format").none(), nb::arg("a_scales").none(),
        nb::arg("b_scales").none(), nb::arg("scale_format").none(), nb::arg("scale_block"), nb::arg("alpha"),
        nb::arg("beta").none(), nb::arg("scale_a"), nb::arg("scale_b"), nb::arg("scale_c"), nb::arg("scale_d"),
        nb::arg("out_format").none(),
        "gemm::run on row-major code matrices (1-D contiguous); returns (d codes, d format, quantized codes or None, "
        "their format or None).  f32 epilogue values are f32 bit patterns.");
}

}  // namespace lowbit::python
