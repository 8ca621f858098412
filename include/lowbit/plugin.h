/* lowbit/plugin.h - the C ABI a subject library implements so that `lowbit gate --plugin lib.so` can
 * run the golden suites through it (vectors/SPEC.md, "The gate").
 *
 * A plugin is a shared library that exports one function, lowbit_plugin_entry.  lowbit calls it with
 * the ABI version it speaks; the plugin returns a table of optional entry points (a NULL entry means
 * "not implemented": the gate reports the suites that need it as skipped).  Everything crosses the
 * boundary as plain C: format and policy names are lowbit's spellings (`lowbit formats`,
 * `lowbit profiles`), codes are little-endian integers of the format's storage width, and recipes are
 * the JSON objects of the suites' manifests.
 *
 * The gate loads the library in a worker process of its own and makes the calls there, one at a time
 * (`--in-process` calls it in the gate itself); whatever the plugin prints is captured apart from the
 * report.  A crash, a hang past `--timeout`, exit(), a C++ exception, a write beyond an output buffer
 * (each ends at an inaccessible page) or a status other than the three below is an error of the file or
 * case being run, never a pass; the next call gets a new worker, which loads the library again.
 *
 * Versioning: LOWBIT_PLUGIN_ABI_VERSION grows when this header changes incompatibly.  A plugin returns
 * a table whose abi_version equals the host's version, or NULL when it cannot serve that version; the
 * gate refuses a table with another version (exit 2).  Fields are only ever appended, and
 * `struct_size` lets either side tell which fields the other knows: the gate refuses (exit 2) a table
 * whose struct_size is smaller than version 1's first table (LOWBIT_PLUGIN_TABLE_SIZE_V1: convert,
 * quantize, gemm, last_error), or whose function pointers lie in no loaded library; an entry appended
 * later is read only from a table whose struct_size covers it, so a plugin compiled against an older
 * header still loads, with the newer entries taken as NULL.
 */
#ifndef LOWBIT_PLUGIN_H
#define LOWBIT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOWBIT_PLUGIN_ABI_VERSION 1u

/* Return codes of every entry point. */
#define LOWBIT_PLUGIN_OK 0          /* ran; outputs written */
#define LOWBIT_PLUGIN_UNSUPPORTED 1 /* this conversion / recipe is not implemented: skipped, not failed */
#define LOWBIT_PLUGIN_ERROR 2       /* failed: the gate reports the case as failing, with last_error() */

/* TestFloat-style flag mask, as in the scalar vector files. */
#define LOWBIT_FLAG_INEXACT 1u
#define LOWBIT_FLAG_UNDERFLOW 2u
#define LOWBIT_FLAG_OVERFLOW 4u
#define LOWBIT_FLAG_INFINITE 8u
#define LOWBIT_FLAG_INVALID 16u

/* The policy of a conversion, as `lowbit convert` spells it. */
typedef struct lowbit_policy {
  const char* profile;    /* "ocp", "cuda", "ml_dtypes", "llvm", "te", "torchao", "microxcaling", "p3109" */
  const char* rounding;   /* "rne", "rna", "rtz", "rup", "rdn", "rto" */
  const char* overflow;   /* "satfinite", "satpropagate", "nosat" */
  const char* subnormals; /* "keep", "ftz", "daz", "ftz-daz" */
  const char* tininess;   /* "after", "before" */
} lowbit_policy;

/* One array of a tensor case, exactly as the suite's .npy file holds it. */
typedef struct lowbit_array {
  const char* name;      /* "x", "rbits", "history_in", "a", "b", "c", "a_scales", ... / "codes", "scales", "d" */
  const char* format;    /* lowbit format of the elements ("f32", "e4m3", "e8m0", ...) or "uint32" */
  const char* dtype;     /* numpy descr: "<f4", "<f2", "<f8", "|u1", "<u2", "<u4", "<u8" */
  uint32_t element_bytes;
  uint32_t rank;
  const uint64_t* shape; /* rank entries */
  uint64_t count;        /* elements (the product of the shape) */
  void* data;            /* count * element_bytes bytes, little-endian, C order; inputs are read-only */
} lowbit_array;

typedef struct lowbit_plugin {
  uint32_t abi_version; /* LOWBIT_PLUGIN_ABI_VERSION */
  uint32_t struct_size; /* sizeof(lowbit_plugin) as the plugin was compiled */
  const char* name;     /* shown in reports */

  /* Convert n codes of `from` into `to`.  `in` holds n codes of from's storage width rounded up to 1,
   * 2, 4 or 8 bytes; `out` receives n codes of to's width.  When the plugin computes IEEE flags it
   * writes n masks to `flags` and sets *flags_written = 1 (the gate then compares them); otherwise it
   * leaves *flags_written = 0.  NULL: the plugin converts nothing. */
  int (*convert)(const char* from, const char* to, const lowbit_policy* policy, const void* in, uint64_t n,
                 void* out, uint8_t* flags, int* flags_written);

  /* Quantize one tensor case of a scheme suite.  `recipe_json` is the case's "recipe" object from the
   * manifest (vectors/SPEC.md lists the keys); inputs are "x" (f32, [rows, cols]) and, for some
   * recipes, "rbits", "history_in", "scale_in"; outputs are preallocated with the expected shapes:
   * "codes", "scales", and where the scheme has them "tensor_scale", "history_out", "scale_out". */
  int (*quantize)(const char* recipe_json, const lowbit_array* inputs, uint32_t n_inputs, lowbit_array* outputs,
                  uint32_t n_outputs);

  /* Run one GEMM case: inputs "a", "b" and optionally "c", "a_scales", "b_scales"; output "d".  The
   * recipe's "layout" key (on-demand suites, `lowbit gate --shape ... --layout nt`) names how A and B are
   * stored: its first letter A's, its second B's, "n" row-major ([M, K], [K, N]) and "t" transposed
   * ([K, M], [N, K]), with the scales following their operand; no "layout" key means "nn".  C and D are
   * [M, N] row-major.  vectors/SPEC.md says where C enters each procedure's accumulation. */
  int (*gemm)(const char* recipe_json, const lowbit_array* inputs, uint32_t n_inputs, lowbit_array* outputs,
              uint32_t n_outputs);

  /* Optional: a message for the last LOWBIT_PLUGIN_ERROR (static storage, may be NULL). */
  const char* (*last_error)(void);

  /* ---- appended: read only when struct_size covers it (a table of LOWBIT_PLUGIN_TABLE_SIZE_V1 lacks it) */

  /* Run one pass of a precision contract (docs/contract.md) as a fused kernel would, for `lowbit contract
   * check --plugin`.  `request_json` is {"contract": the contract's document, "pass": "fprop" | "dgrad" |
   * "wgrad", "sr_seed": N (only when a recipe rounds stochastically), "state": the delayed-scaling state
   * the run was given, `lowbit state`'s JSON (only when it was given)}; inputs are the tensors the pass
   * reads, named "x", "w", "dy", "bias", "residual" (an operand stored quantized as its parts "w.codes",
   * "w.scales", "w.tensor_scale"), as `lowbit contract run` wrote them (bf16 as "<u2" codes); outputs are every stage of the run, preallocated and named as its files without ".npy"
   * ("x.quantized.codes", "accumulator", "epilogue[1].bias", "amax", "output").  The plugin writes
   * "output" and whichever intermediates it computes, and sets `count` to 0 on each output it leaves
   * unwritten: those are not compared.  NULL: the plugin runs no contract. */
  int (*contract)(const char* request_json, const lowbit_array* inputs, uint32_t n_inputs, lowbit_array* outputs,
                  uint32_t n_outputs);
} lowbit_plugin;

/* The size of ABI version 1's first table (through last_error), the smallest struct_size the gate takes. */
#define LOWBIT_PLUGIN_TABLE_SIZE_V1 (offsetof(lowbit_plugin, last_error) + sizeof(const char* (*)(void)))
/* Whether a table of `struct_size` bytes holds the entry `field` (a field appended after version 1's first). */
#define LOWBIT_PLUGIN_HAS(table, field) \
  ((table)->struct_size >= offsetof(lowbit_plugin, field) + sizeof((table)->field))

/* The one exported symbol.  Returns NULL when the plugin cannot serve `host_abi_version`. */
typedef const lowbit_plugin* (*lowbit_plugin_entry_fn)(uint32_t host_abi_version);
#define LOWBIT_PLUGIN_ENTRY_SYMBOL "lowbit_plugin_entry"

#if defined(_WIN32)
#define LOWBIT_PLUGIN_EXPORT __declspec(dllexport)
#else
#define LOWBIT_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
}
#endif

#endif /* LOWBIT_PLUGIN_H */
