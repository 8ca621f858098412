// A gate subject with a planted bug: lowbit's own fast-path conversions, except that f32 into e4m3 under
// rne returns one ulp too little for a result that rounded away from zero in the binade [8, 16).  The
// gate's tests prove that `lowbit gate` catches it and names the element; every other conversion
// passes.  It also runs the f32-sequential GEMM (acc = fl(acc + fl(a * b)) from C, in K order) to
// exercise the gemm entry point, and leaves quantize out (those suites are reported as skipped).
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

#include "lowbit/convert.hpp"
#include "lowbit/plugin.h"
#include "lowbit/profile.hpp"
#include "lowbit/registry.hpp"

namespace {

std::size_t width(const lowbit::Format& f) {
  const int b = f.storage_bits();
  return b <= 8 ? 1 : b <= 16 ? 2 : b <= 32 ? 4 : 8;
}

std::uint64_t load(const void* p, std::size_t i, std::size_t w) {
  std::uint64_t v = 0;
  const auto* b = static_cast<const std::uint8_t*>(p) + i * w;
  for (std::size_t k = 0; k < w; ++k) v |= std::uint64_t{b[k]} << (8 * k);
  return v;
}

void store(void* p, std::size_t i, std::size_t w, std::uint64_t v) {
  auto* b = static_cast<std::uint8_t*>(p) + i * w;
  for (std::size_t k = 0; k < w; ++k) b[k] = static_cast<std::uint8_t>(v >> (8 * k));
}

std::string last;

int convert(const char* from, const char* to, const lowbit_policy* policy, const void* in, uint64_t n, void* out,
            uint8_t* flags, int* flags_written) {
  const lowbit::Format* f = lowbit::find_format(from);
  const lowbit::Format* t = lowbit::find_format(to);
  const lowbit::Profile* prof = lowbit::find_profile(policy->profile ? policy->profile : "");
  if (!f || !t || !prof) return LOWBIT_PLUGIN_UNSUPPORTED;
  lowbit::PolicyRequest req;
  req.rounding = lowbit::parse_rounding(policy->rounding);
  req.overflow = lowbit::parse_overflow(policy->overflow);
  req.subnormals = lowbit::parse_subnormals(policy->subnormals);
  req.tininess = lowbit::parse_tininess(policy->tininess);
  if (!req.rounding || !req.overflow || !req.subnormals || !req.tininess) return LOWBIT_PLUGIN_UNSUPPORTED;
  std::string error;
  const auto resolved = lowbit::resolve(prof, *t, req, error);
  if (!resolved) {
    last = error;
    return LOWBIT_PLUGIN_UNSUPPORTED;
  }
  const bool planted = std::strcmp(from, "f32") == 0 && std::strcmp(to, "e4m3") == 0 &&
                       resolved->policy.rounding == lowbit::Rounding::rne;
  const std::size_t wi = width(*f), wo = width(*resolved->target);
  for (uint64_t i = 0; i < n; ++i) {
    const std::uint64_t code = load(in, i, wi);
    lowbit::Result r = lowbit::convert(*f, code, *resolved->target, resolved->policy);
    // The planted bug: |x| in [8, 16) (f32 biased exponent 130) that rounded away from zero.
    const bool away = (code >> 31) ? r.ternary < 0 : r.ternary > 0;
    if (planted && ((code >> 23) & 0xff) == 130 && away && (r.code & 0x7f) != 0) r.code -= 1;
    store(out, i, wo, r.code);
    flags[i] = static_cast<std::uint8_t>(r.flags & 0x1f);
  }
  *flags_written = 1;
  return LOWBIT_PLUGIN_OK;
}

float as_float(const lowbit_array& a, std::uint64_t i) {
  const std::uint64_t v = load(a.data, i, a.element_bytes);
  if (std::strcmp(a.format, "f32") == 0) return std::bit_cast<float>(static_cast<std::uint32_t>(v));
  if (std::strcmp(a.format, "bf16") == 0) return std::bit_cast<float>(static_cast<std::uint32_t>(v << 16));
  // f16 widens exactly into f32.
  const lowbit::Result r = lowbit::convert(lowbit::formats::f16, v, lowbit::formats::f32, lowbit::Policy{});
  return std::bit_cast<float>(static_cast<std::uint32_t>(r.code));
}

const lowbit_array* find(const lowbit_array* v, uint32_t n, const char* name) {
  for (uint32_t i = 0; i < n; ++i)
    if (std::strcmp(v[i].name, name) == 0) return &v[i];
  return nullptr;
}

int gemm(const char* recipe, const lowbit_array* in, uint32_t n_in, lowbit_array* out, uint32_t n_out) {
  const std::string r = recipe;
  if (r.find("\"model\":\"f32-sequential\"") == std::string::npos) return LOWBIT_PLUGIN_UNSUPPORTED;
  const lowbit_array* a = find(in, n_in, "a");
  const lowbit_array* b = find(in, n_in, "b");
  const lowbit_array* c = find(in, n_in, "c");
  lowbit_array* d = n_out == 1 ? out : nullptr;
  if (!a || !b || !c || !d || a->rank != 2 || b->rank != 2) {
    last = "f32-sequential: expected a, b, c and d";
    return LOWBIT_PLUGIN_ERROR;
  }
  const std::uint64_t m = a->shape[0], k = a->shape[1], nn = b->shape[1];
  for (std::uint64_t i = 0; i < m; ++i)
    for (std::uint64_t j = 0; j < nn; ++j) {
      float acc = as_float(*c, i * nn + j);
      for (std::uint64_t p = 0; p < k; ++p) {
        const float prod = as_float(*a, i * k + p) * as_float(*b, p * nn + j);
        acc = acc + prod;
      }
      store(d->data, i * nn + j, 4, std::bit_cast<std::uint32_t>(acc));
    }
  return LOWBIT_PLUGIN_OK;
}

const char* last_error() { return last.c_str(); }

const lowbit_plugin table = {LOWBIT_PLUGIN_ABI_VERSION, sizeof(lowbit_plugin), "planted-bug (lowbit fast path, one "
                             "planted ulp in f32->e4m3 rne [8, 16))", convert, nullptr, gemm, last_error};

}  // namespace

extern "C" LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_entry(uint32_t host_abi_version) {
  return host_abi_version == LOWBIT_PLUGIN_ABI_VERSION ? &table : nullptr;
}
