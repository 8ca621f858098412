// Golden vectors and the gate (lowbit/vectors.hpp, lowbit/gate.hpp) for lowbit.vectors and lowbit.testing.gate.
//
// A Python subject runs in this process: its entry points are gate::Subject callables that call the
// package's adapter (python/lowbit/_gate.py) with the interpreter's lock held, the plugin ABI's arguments as
// Python values.  The worker-process isolation of `lowbit gate --plugin` is for shared libraries; a Python
// subject that crashes the interpreter crashes the test run, as any Python code does.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common.hpp"
#include "lowbit/error.hpp"
#include "lowbit/gate.hpp"
#include "lowbit/registry.hpp"
#include "lowbit/vectors.hpp"

namespace lowbit::python {

namespace {

namespace V = lowbit::vectors;

// The reports of one gate run and what it must meet to pass.
struct GateReports {
  std::vector<V::SuiteReport> reports;
  V::Requirements req;
  std::string subject;
};

// A suite generated at `seed` with the on-demand shape options (`lowbit vectors generate --shape / --layout`:
// a shape of "" asks for the default shapes); ValueError naming `suite`, `shape` or `layout`.
V::Suite generate_suite(const std::string& name, std::uint64_t seed, const std::optional<std::string>& shape,
                        const std::optional<std::string>& layout) {
  try {
    return V::generate(name, seed, V::ShapeRequest{shape, layout});
  } catch (const ArgumentError& e) {
    value_error(e.argument, e.what());
  } catch (const std::invalid_argument& e) {
    value_error("suite", e.what());
  }
}

void write_suite(const std::string& name, const std::string& out, std::uint64_t seed,
                 const std::optional<std::string>& shape, const std::optional<std::string>& layout) {
  const V::Suite s = generate_suite(name, seed, shape, layout);
  try {
    V::write_suite(s, out);
  } catch (const std::exception& e) {
    value_error("out", e.what());
  }
}

// (name, manifest JSON text, {path: bytes}) of a verified golden suite folder; ValueError listing the damage.
nb::tuple load_suite(const std::string& dir) {
  std::vector<std::string> damage;
  const std::optional<V::Golden> g = V::load_golden(V::folder_reader(dir), dir, damage);
  if (!g) {
    std::string why = "'" + dir + "' is not an intact golden suite:";
    for (const std::string& d : damage) why += "\n  " + d;
    value_error("path", why);
  }
  nb::dict files;
  for (const auto& [path, bytes] : g->files) files[nb::str(path.c_str())] = nb::bytes(bytes.data(), bytes.size());
  return nb::make_tuple(g->name, g->manifest.dump(), files);
}

// The text `lowbit gate` prints after its first line, with the package's keyword for the report's length.
std::string report_text(const GateReports& r, std::size_t max_report) {
  std::ostringstream text;
  std::streambuf* const saved = std::cout.rdbuf(text.rdbuf());
  try {
    V::print_reports(r.reports, max_report, r.req);
  } catch (...) {
    std::cout.rdbuf(saved);
    throw;
  }
  std::cout.rdbuf(saved);
  std::string s = text.str();
  const std::string option = "--max-report N", keyword = "max_report=N";
  for (std::size_t at = s.find(option); at != std::string::npos; at = s.find(option, at + keyword.size()))
    s.replace(at, option.size(), keyword);
  return s;
}

nb::list units_of(const V::SuiteReport& r) {
  nb::list units;
  for (const V::Unit& u : r.units) {
    nb::dict d;
    d["name"] = u.name;
    d["cases"] = u.cases;
    d["mismatches"] = u.mismatches;
    d["skipped"] = u.skipped;
    d["skip_reason"] = u.skip_reason;
    d["error"] = u.error;
    d["details"] = u.details;
    units.append(d);
  }
  return units;
}

// The subject's entry points as the gate's callables, each calling `adapter` (python/lowbit/_gate.py).
gate::Subject python_subject(const std::string& name, nb::object adapter, std::vector<std::string> entries) {
  auto last = std::make_shared<std::string>("(no message)");
  auto has = [&](const char* e) { return std::find(entries.begin(), entries.end(), e) != entries.end(); };
  gate::Subject s;
  s.name = name;
  s.last_error = [last] { return *last; };
  if (has("convert"))
    s.convert = [adapter, last](const char* from, const char* to, const lowbit_policy* p, const void* in,
                                std::uint64_t n, void* out, std::uint8_t* flags, int* flags_written) -> int {
      const std::size_t wi = storage_bytes(*find_format(from)), wo = storage_bytes(*find_format(to));
      nb::dict policy;
      policy["profile"] = p->profile;
      policy["rounding"] = p->rounding;
      policy["overflow"] = p->overflow;
      policy["subnormals"] = p->subnormals;
      policy["tininess"] = p->tininess;
      const nb::tuple r = nb::cast<nb::tuple>(adapter.attr("convert")(
          from, to, policy, nb::bytes(static_cast<const char*>(in), static_cast<std::size_t>(n) * wi), n));
      const int status = nb::cast<int>(r[0]);
      if (status != LOWBIT_PLUGIN_OK) {
        *last = nb::cast<std::string>(r[3]);
        return status;
      }
      const nb::bytes codes = nb::cast<nb::bytes>(r[1]);
      if (codes.size() != n * wo) {
        *last = "returned " + std::to_string(codes.size()) + " bytes of codes, not " + std::to_string(n * wo);
        return LOWBIT_PLUGIN_ERROR;
      }
      std::memcpy(out, codes.c_str(), codes.size());
      *flags_written = 0;
      if (!r[2].is_none()) {
        const nb::bytes f = nb::cast<nb::bytes>(r[2]);
        if (f.size() != n) {
          *last = "returned " + std::to_string(f.size()) + " flags for " + std::to_string(n) + " elements";
          return LOWBIT_PLUGIN_ERROR;
        }
        std::memcpy(flags, f.c_str(), n);
        *flags_written = 1;
      }
      return LOWBIT_PLUGIN_OK;
    };
  auto tensor = [&](const char* kind) -> decltype(s.quantize) {
    if (!has(kind)) return {};
    return [adapter, last, kind = std::string(kind)](const char* recipe, const lowbit_array* in, std::uint32_t n_in,
                                                     lowbit_array* out, std::uint32_t n_out) -> int {
      auto describe = [](const lowbit_array& a) {
        std::vector<std::uint64_t> shape(a.shape, a.shape + a.rank);
        return nb::make_tuple(a.name, a.format, a.dtype, shape);
      };
      nb::list inputs, outputs;
      for (std::uint32_t i = 0; i < n_in; ++i)
        inputs.append(nb::make_tuple(describe(in[i]), nb::bytes(static_cast<const char*>(in[i].data),
                                                                 in[i].count * in[i].element_bytes)));
      for (std::uint32_t i = 0; i < n_out; ++i) outputs.append(describe(out[i]));
      const nb::tuple r = nb::cast<nb::tuple>(adapter.attr("tensor")(kind, recipe, inputs, outputs));
      const int status = nb::cast<int>(r[0]);
      if (status != LOWBIT_PLUGIN_OK) {
        *last = nb::cast<std::string>(r[2]);
        return status;
      }
      const nb::dict results = nb::cast<nb::dict>(r[1]);
      for (std::uint32_t i = 0; i < n_out; ++i) {
        const std::size_t size = out[i].count * out[i].element_bytes;
        if (!results.contains(out[i].name) && kind == "contract") {
          out[i].count = 0;  // a stage the subject did not give: not supplied (plugin.h)
          continue;
        }
        if (!results.contains(out[i].name)) {
          *last = std::string("gave no ") + out[i].name;
          return LOWBIT_PLUGIN_ERROR;
        }
        const nb::bytes b = nb::cast<nb::bytes>(results[out[i].name]);
        if (b.size() != size) {
          *last = std::string(out[i].name) + ": " + std::to_string(b.size()) + " bytes, not " + std::to_string(size);
          return LOWBIT_PLUGIN_ERROR;
        }
        std::memcpy(out[i].data, b.c_str(), size);
      }
      return LOWBIT_PLUGIN_OK;
    };
  };
  s.quantize = tensor("quantize");
  s.gemm = tensor("gemm");
  s.contract = tensor("contract");
  return s;
}

GateReports run_gate(const std::string& name, nb::object adapter, std::vector<std::string> entries,
                     const std::vector<std::string>& suites, std::uint64_t seed, const std::vector<std::string>& require,
                     std::uint64_t min_cases, std::size_t max_details, const std::optional<std::string>& shape,
                     const std::optional<std::string>& layout) {
  if (min_cases < 1) value_error("min_cases", "must be a positive integer");
  GateReports r;
  r.req = {require, min_cases};
  r.subject = name;
  std::vector<V::Suite> generated;
  for (const std::string& n : suites) generated.push_back(generate_suite(n, seed, shape, layout));
  const std::vector<std::string> unmatched = V::unmatched_requirements(r.req, suites);
  if (!unmatched.empty()) value_error("require", "'" + unmatched.front() + "' matches no suite of this run");
  const gate::Subject subject = python_subject(name, std::move(adapter), std::move(entries));
  for (const V::Suite& s : generated)
    r.reports.push_back(gate::run_suite(subject, V::golden_from(s), std::max<std::size_t>(max_details, 1)));
  return r;
}

}  // namespace

void bind_vectors(nb::module_& m) {
  m.def("vector_suites", [] {
    std::vector<nb::tuple> out;
    for (const V::SuiteInfo& s : V::suites()) out.push_back(nb::make_tuple(s.name, s.description, s.committed));
    return out;
  });
  m.def("vector_default_seed", [] { return V::default_seed; });
  m.def("write_suite", &write_suite, nb::arg("suite"), nb::arg("out"), nb::arg("seed"), nb::arg("shape").none(),
        nb::arg("layout").none());
  m.def("load_suite", &load_suite, nb::arg("path"));

  nb::class_<GateReports>(m, "GateReports")
      .def_ro("subject", &GateReports::subject)
      .def("text", &report_text, nb::arg("max_report"))
      .def("junit", [](const GateReports& r, const std::string& name) { return V::junit_xml(r.reports, name); })
      .def("json",
           [](const GateReports& r, std::size_t max_report) {
             return V::report_json(r.reports, "gate", r.subject, max_report, r.req).dump(2) + "\n";
           })
      .def("verdict", [](const GateReports& r) { return V::verdict(r.reports, r.req); })
      .def("suites", [](const GateReports& r) {
        nb::list out;
        for (const V::SuiteReport& s : r.reports) {
          nb::dict d;
          d["name"] = s.name;
          d["cases"] = s.cases();
          d["mismatches"] = s.mismatches();
          d["errors"] = s.errors();
          d["skipped"] = s.skipped();
          d["compared"] = s.compared();
          d["units"] = units_of(s);
          out.append(d);
        }
        return out;
      });
  m.def("run_gate", &run_gate, nb::arg("name"), nb::arg("adapter"), nb::arg("entries"), nb::arg("suites"),
        nb::arg("seed"), nb::arg("require"), nb::arg("min_cases"), nb::arg("max_details"), nb::arg("shape").none(),
        nb::arg("layout").none());
}

}  // namespace lowbit::python
