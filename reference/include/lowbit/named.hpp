// One row of an enum's name table (names.hpp): the value, its command-line spelling, and one line of help.
// Kept apart from names.hpp so that headers shared with device code can hold their tables without the
// standard library's string types.
#pragma once

namespace lowbit {

template <class E>
struct Named {
  E value;
  const char* name;
  const char* help = "";
};

}  // namespace lowbit
