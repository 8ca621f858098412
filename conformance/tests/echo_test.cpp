// lowbit::echo_text / echo_at (text.hpp): input echoed in messages has its control characters escaped and
// is cut to a bounded length.  Expected strings are written out by hand from the escaping rules.
#include <gtest/gtest.h>

#include <string>

#include "lowbit/text.hpp"

namespace {

using lowbit::echo_at;
using lowbit::echo_text;

TEST(EchoText, PlainTextUnchanged) {
  EXPECT_EQ(echo_text("0x3c 1.5e-3 nan"), "0x3c 1.5e-3 nan");
  EXPECT_EQ(echo_text("caf\xc3\xa9 \xe2\x88\x9e"), "caf\xc3\xa9 \xe2\x88\x9e");  // UTF-8 letters and symbols kept
  EXPECT_EQ(echo_text(""), "");
}

TEST(EchoText, ControlCharactersEscaped) {
  // An ANSI colour sequence and a cursor move: ESC is 0x1b.
  EXPECT_EQ(echo_text("\x1b[31mred\x1b[0m\x1b[2K"), "\\x1b[31mred\\x1b[0m\\x1b[2K");
  EXPECT_EQ(echo_text(std::string("a\0b", 3)), "a\\0b");
  EXPECT_EQ(echo_text("suite\nall match: 1 suite(s)\r\t"), "suite\\nall match: 1 suite(s)\\r\\t");
  EXPECT_EQ(echo_text("\x07\x7f"), "\\x07\\x7f");
  // C1 controls in UTF-8 (U+009B, the one-byte CSI) and as bare bytes (not UTF-8).
  EXPECT_EQ(echo_text(std::string("\xc2\x9b") + "2J"), "\\x9b2J");
  EXPECT_EQ(echo_text(std::string("\x9b") + "2J"), "\\x9b2J");
  // Bytes that are not UTF-8: an overlong '/', a surrogate, a lone lead byte, beyond U+10FFFF.
  EXPECT_EQ(echo_text("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(echo_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(echo_text("x\xe2"), "x\\xe2");
  EXPECT_EQ(echo_text("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  // The right-to-left override and the line separator.
  EXPECT_EQ(echo_text(std::string("a\xe2\x80\xae") + "b\xe2\x80\xa8"), "a\\u{202e}b\\u{2028}");
}

TEST(EchoText, LongInputCutWithItsLength) {
  const std::string big(10'000'000, 'x');
  const std::string e = echo_text(big);
  EXPECT_EQ(e, std::string(96, 'x') + "... (10000000 bytes in all, the first 96 shown)");
  EXPECT_EQ(echo_text("abcdef", 3), "abc... (6 bytes in all, the first 3 shown)");
  EXPECT_EQ(echo_text("abc", 3), "abc");
  // The cut never splits a UTF-8 sequence: "\xc3\xa9" is one character of two bytes.
  EXPECT_EQ(echo_text("ab\xc3\xa9z", 3), "ab... (5 bytes in all, the first 2 shown)");
  // The limit bounds the input bytes shown; escapes may make the echo longer, never the input shown.
  EXPECT_EQ(echo_text("\x1b\x1b\x1b\x1b", 2), "\\x1b\\x1b... (4 bytes in all, the first 2 shown)");
}

TEST(EchoAt, WindowAroundTheOffset) {
  std::string text(1000, 'a');
  text[500] = '!';
  EXPECT_EQ(echo_at(text, 500, 10), "byte 500: ...aaaaa!aaaa...");
  EXPECT_EQ(echo_at("{\"a\":\x1b}", 5, 96), "byte 5: {\"a\":\\x1b}");
  EXPECT_EQ(echo_at("abc", 99, 10), "byte 3: abc");  // an offset past the end is the end
}

}  // namespace
