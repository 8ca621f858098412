// Shared by the extension's translation units: argument errors in the package's one shape, and numpy
// arrays that own a vector.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lowbit/format.hpp"

namespace lowbit::python {

namespace nb = nanobind;

// Every bad argument is a ValueError (a value the function cannot take) or a TypeError (an object of the
// wrong kind) whose message starts with the keyword the caller wrote: "rounding: ...", "x: ...".
[[noreturn]] inline void value_error(std::string_view argument, std::string_view why) {
  throw nb::value_error((std::string(argument) + ": " + std::string(why)).c_str());
}
[[noreturn]] inline void type_error(std::string_view argument, std::string_view why) {
  throw nb::type_error((std::string(argument) + ": " + std::string(why)).c_str());
}

// The library's messages name the command line's options ("--rounding: ...", "--variant fast-math: ...");
// the package's name its keywords ("rounding: ...", "variant='fast-math': ...").
[[noreturn]] void library_error(const std::string& message);

// The format a name means, or a ValueError naming the argument (the package has already offered the
// closest names for a misspelling, so this is the last line of defence).
const Format& require_format(std::string_view argument, const std::string& name);

// A 1-D numpy array that owns `v`.
template <class T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> to_numpy(std::vector<T>&& v) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(owned->data(), {owned->size()}, owner);
}

// Bytes per code of a format as stored in memory (1, 2, 4 or 8).
std::size_t storage_bytes(const Format& f);

// Inputs may be read-only (a read-only numpy array, a DLPack view); outputs are written.
using Codes = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu, nb::ndim<1>>;
using Out = nb::ndarray<nb::c_contig, nb::device::cpu, nb::ndim<1>>;

// Element i of 1-, 2-, 4- or 8-byte unsigned codes.
std::uint64_t load(const Codes& codes, std::size_t i);

void bind_elements(nb::module_& m);
void bind_quantize(nb::module_& m);
void bind_gemm(nb::module_& m);
void bind_vectors(nb::module_& m);
void bind_contract(nb::module_& m);
void bind_state(nb::module_& m);

}  // namespace lowbit::python
