/* A `lowbit gate` subject in plain C: f32 -> bf16, round to nearest even, no saturation, subnormals kept,
 * the conversion a kernel writes by hand.  It answers only the policies where that is what OCP's rules
 * give (profile ocp); every other conversion is LOWBIT_PLUGIN_UNSUPPORTED, which the gate reports as
 * skipped.  It computes no flags. */
#include "lowbit/plugin.h"

#include <stdint.h>
#include <string.h>

static uint16_t f32_to_bf16_rne(uint32_t u) {
  /* A NaN keeps its sign and top payload bits with the quiet bit set (IEEE 754-2019 6.2.3). */
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  /* Add half an ulp of bf16 less one, plus the kept last bit: ties go to even; a carry out of the largest
   * finite value gives infinity, which is the unsaturated overflow. */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static int convert(const char* from, const char* to, const lowbit_policy* policy, const void* in, uint64_t n, void* out,
                   uint8_t* flags, int* flags_written) {
  (void)flags;
  if (strcmp(from, "f32") != 0 || strcmp(to, "bf16") != 0) return LOWBIT_PLUGIN_UNSUPPORTED;
  if (!policy->profile || strcmp(policy->profile, "ocp") != 0 || strcmp(policy->rounding, "rne") != 0 ||
      strcmp(policy->overflow, "nosat") != 0 || strcmp(policy->subnormals, "keep") != 0)
    return LOWBIT_PLUGIN_UNSUPPORTED;
  const unsigned char* src = (const unsigned char*)in;
  unsigned char* dst = (unsigned char*)out;
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t u;
    memcpy(&u, src + 4 * i, 4); /* little-endian hosts, as the ABI's codes are */
    const uint16_t b = f32_to_bf16_rne(u);
    memcpy(dst + 2 * i, &b, 2);
  }
  *flags_written = 0;
  return LOWBIT_PLUGIN_OK;
}

static const lowbit_plugin table = {
    .abi_version = LOWBIT_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(lowbit_plugin),
    .name = "consumer-bf16 (f32 -> bf16 rne in C)",
    .convert = convert,
};

LOWBIT_PLUGIN_EXPORT const lowbit_plugin* lowbit_plugin_entry(uint32_t host_abi_version) {
  return host_abi_version == LOWBIT_PLUGIN_ABI_VERSION ? &table : NULL;
}
