# The `sanitize` subset: what scripts/run-sanitize.sh runs in its ASan + UBSan build (LOWBIT_SANITIZE=ON).
# Parsers, bad files and bad command lines (where memory errors would hide), packing, the scheme and GEMM
# drivers (vector kernels, tails, threads).  The exhaustive sweeps are left out: they are long and
# exercise one small loop each.  Only in sanitizer builds; the tier labels (quick, full) are unchanged.
if(NOT LOWBIT_SANITIZE)
  return()
endif()
# Whole GoogleTest binaries (their discovered tests keep their own labels).
foreach(_bin test_io test_pack lowbit_unit_test test_scale test_gemm test_checkpoint_write)
  if(TARGET ${_bin})
    add_test(NAME sanitize.${_bin} COMMAND ${_bin})
    set_tests_properties(sanitize.${_bin} PROPERTIES LABELS sanitize TIMEOUT 900)
  endif()
endforeach()
# The command-line error cases, through the sanitized `lowbit` (LOWBIT_SANITIZED: the memory-limit cases
# bound allocations through ASan's options, since an address-space limit cannot hold an ASan process).
foreach(_t cli_contract malformed_cli checkpoint_gguf)
  if(TEST ${_t})
    set_property(TEST ${_t} APPEND PROPERTY LABELS sanitize)
    set_property(TEST ${_t} APPEND PROPERTY ENVIRONMENT LOWBIT_SANITIZED=1)
  endif()
endforeach()
