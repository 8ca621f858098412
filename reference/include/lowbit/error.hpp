// The library's one error shape for bad arguments: a structured argument id and a message that does not
// spell any front end's option.  The command line words the id as its flag or JSON key (`--a-format`,
// `"a_format"`), the Python package as its keyword; both print the message after it.
#pragma once
#include <stdexcept>
#include <string>

namespace lowbit {

struct ArgumentError : std::invalid_argument {
  // `argument`: what is wrong, as a path into the call's arguments: "a_format", "block", "epilogue[2].format".
  ArgumentError(std::string argument, const std::string& message)
      : std::invalid_argument(message), argument(std::move(argument)) {}
  std::string argument;
};

}  // namespace lowbit
