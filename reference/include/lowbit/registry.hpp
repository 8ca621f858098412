// Format names: the built-in rows with their aliases, the IEEE P3109 family by name, and
// parametric formats.  Host only.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lowbit/format.hpp"

namespace lowbit {

struct FormatEntry {
  const Format* format;
  std::vector<std::string_view> aliases;
};

// The built-in rows, in table order, with the spellings users know (LLVM, ml_dtypes, PyTorch).
std::span<const FormatEntry> builtin_format_entries();

// Look a format up by name, case-insensitively: a built-in name or alias, a P3109 name
// (binary8p3se, binary8p4sf, binary6p3uf, ...; also gfloat's p3109_k8p3se), or a parametric
// e<E>m<M>[b<bias>][u][-ieee|-fn|-fnuz|-finite] (default bias 2^(E-1)-1, default -ieee).
// Returns nullptr when the name means nothing.  Returned pointers stay valid for the program's life.
const Format* find_format(std::string_view name);

// The P3109 row for K bits and precision P (signed/unsigned, extended/finite); nullptr when invalid.
const Format* p3109_format(int k, int p, bool is_signed, bool extended);

// A short human description of the non-finite encoding ("ieee", "fn", "fnuz", ...).
std::string specials_name(const Format& f);

}  // namespace lowbit
