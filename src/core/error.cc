#include "remat/error.h"

#include <fmt/format.h>

namespace remat {
namespace {

// Bytes 0x80-0xBF continue a UTF-8 character.
bool continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Length of the well-formed UTF-8 character at text[i] (lead byte >= 0x80), or 0 when it is not
// one (a stray continuation byte, a truncated or overlong sequence, a surrogate).
size_t utf8_length(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  const size_t length = lead >= 0xF0 && lead <= 0xF4 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 ? 2 : 0;
  if (length == 0 || lead > 0xF4 || i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k)
    if (!continuation_byte(text[i + k])) return 0;
  const auto second = static_cast<unsigned char>(text[i + 1]);
  if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) ||
      (lead == 0xF0 && second < 0x90) || (lead == 0xF4 && second > 0x8F))
    return 0;
  return length;
}

}  // namespace

std::string escape_control(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (const size_t length = utf8_length(text, i); length == 0) {
      out += fmt::format("\\x{:02x}", c);  // not UTF-8: Python could not decode the message
    } else if (c == 0xC2 && static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      // U+0080..U+009F: C1 controls, CSI (U+009B) among them, which some terminals obey.
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[++i]));
    } else {
      out.append(text.substr(i, length));
      i += length - 1;
    }
  }
  return out;
}

std::string shorten(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return escape_control(text);
  size_t cut = max_chars;
  while (cut > 0 && continuation_byte(text[cut])) --cut;
  return fmt::format("{}... ({} bytes)", escape_control(text.substr(0, cut)), text.size());
}

void check_failed(const char* condition, const char* file, int line, const std::string& message) {
  throw InternalError(fmt::format("internal error at {}:{}: check '{}' failed: {}", file, line,
                                  condition, message));
}

}  // namespace remat
