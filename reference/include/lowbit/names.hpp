// Names of enum values: one table per enum, written once beside the enum, that every printer, parser,
// loop, fuzzer and generator iterates.  No enum count is written by hand anywhere: a new value is one row.
//
// An enum E takes part by declaring, in its own namespace, a constexpr function found by argument-
// dependent lookup:
//
//   constexpr std::span<const Named<E>> names_of(E) { return e_names; }
//
// where e_names is an array of {value, name, help} rows in declaration order.  `name(v)`, `parse<E>(s)`,
// `all<E>()` and `choices<E>()` then work for E.  The rows must name every value once (checked for each
// table by conformance/tests/names_test.cpp).
#pragma once
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "lowbit/named.hpp"

namespace lowbit {

// The rows of E's table.
template <class E>
constexpr std::span<const Named<E>> names_table() {
  return names_of(E{});
}

// Every value of E, in table order.
template <class E>
constexpr auto all() {
  struct Values {
    std::span<const Named<E>> rows;
    struct It {
      const Named<E>* p;
      constexpr E operator*() const { return p->value; }
      constexpr It& operator++() {
        ++p;
        return *this;
      }
      constexpr bool operator!=(const It& o) const { return p != o.p; }
    };
    constexpr It begin() const { return {rows.data()}; }
    constexpr It end() const { return {rows.data() + rows.size()}; }
    constexpr std::size_t size() const { return rows.size(); }
    constexpr E operator[](std::size_t i) const { return rows[i].value; }
  };
  return Values{names_table<E>()};
}

// How many values E has.
template <class E>
constexpr std::size_t count() {
  return names_table<E>().size();
}

// The row of a value (nullptr for a value outside the table, which a static_cast can make).
template <class E>
constexpr const Named<E>* row_of(E v) {
  for (const Named<E>& r : names_table<E>())
    if (r.value == v) return &r;
  return nullptr;
}

// The name of a value as the command line spells it ("?" for a value outside the table).
template <class E>
  requires std::is_enum_v<E> && requires(E e) { names_of(e); }
constexpr const char* name(E v) {
  const Named<E>* r = row_of(v);
  return r ? r->name : "?";
}

// The value a name spells, or nullopt.
template <class E>
constexpr std::optional<E> parse(std::string_view s) {
  for (const Named<E>& r : names_table<E>())
    if (s == r.name) return r.value;
  return std::nullopt;
}

// "a, b, c": the names of E for messages and help texts.
template <class E>
std::string choices(std::string_view separator = ", ") {
  std::string s;
  for (const Named<E>& r : names_table<E>()) {
    if (!s.empty()) s += separator;
    s += r.name;
  }
  return s;
}

// The i-th value modulo the count: how fuzzers and generators draw a value from an integer.
template <class E>
constexpr E nth(std::size_t i) {
  const auto rows = names_table<E>();
  return rows[i % rows.size()].value;
}

}  // namespace lowbit
