// Strings from a plan (model paths, node and op names, notes) written into
// other languages: Graphviz dot and HTML. Names come from the model, so they
// may hold quotes, markup, control characters or bytes that are not UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace pcc {

/// \returns `s` as valid UTF-8 with no control characters: each byte that does
/// not start a well-formed UTF-8 sequence (overlong forms, surrogates and code
/// points past U+10FFFF included), and each control character other than '\n'
/// and '\t', becomes U+FFFD.
std::string cleanUtf8(std::string_view s);

/// \returns `s` as a dot double-quoted string, quotes included: cleaned by
/// cleanUtf8, with '"' and '\' escaped, '\n' as dot's centred line break and
/// '\t' as a space.
std::string dotQuoted(std::string_view s);

/// \returns `s` cleaned by cleanUtf8 with &, <, >, " and ' written as
/// character references, safe in HTML text and in quoted attribute values.
std::string htmlEscaped(std::string_view s);

}  // namespace pcc
