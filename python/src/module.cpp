// The extension module `lowbit._lowbit`: the library's entry points for the package in python/lowbit/,
// which turns numpy, ml_dtypes and DLPack inputs into the contiguous code arrays these functions take.
#include "common.hpp"

#ifndef LOWBIT_VERSION
#define LOWBIT_VERSION "0.0.0"
#endif

NB_MODULE(_lowbit, m) {
  m.doc() = "lowbit's library (lowbit::reference) for the Python package; use the package `lowbit`, not this module.";
  m.attr("__version__") = LOWBIT_VERSION;
  lowbit::python::bind_elements(m);
  lowbit::python::bind_quantize(m);
  lowbit::python::bind_gemm(m);
  lowbit::python::bind_vectors(m);
  lowbit::python::bind_contract(m);
  lowbit::python::bind_state(m);
}
