// The tools' command lines: CLI11 with pcc's conventions, shared by pcc,
// pcc-run, pcc-report and pcc-opt.
//
//   - `--flag value` and `--flag=value` are both accepted (CLI11);
//   - a repeated option keeps its last value, unless it is declared repeatable;
//   - `--help` prints the help on stdout and exits 0 (even beside bad options);
//   - a usage error (unknown option, missing or bad value, extra argument)
//     prints exactly one line on stderr and exits 2.
//
// Integers and numbers are read by the helpers below, not by CLI11's own
// conversion, which reads "010" as octal and "0x10" as hex.
//
// Option callbacks refuse a bad value by throwing CLI::ValidationError, which
// is CLI11's way; cli::parse catches every CLI11 error, so no exception leaves
// it and the tools keep to Status.
#pragma once

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/support/status.h"

namespace pcc::cli {

/// The exit code of a usage error, as of every bad input (docs/cli.md).
inline constexpr int kExitUsage = 2;
/// The exit code of an internal error (a bug).
inline constexpr int kExitInternal = 3;
/// The exit code of an environment fault: out of memory, a peer rank that
/// never arrives, dies or stops answering (StatusCode::kEnvironment).
inline constexpr int kExitEnvironment = 4;

/// \returns `text` safe to print as one line on a terminal: the C0 control
/// characters, DEL and the C1 controls (U+0080 to U+009F) are escaped
/// (`\n`, `\r`, `\t`, else `\xHH` for a byte, `\u00HH` for a C1 code point),
/// as is every byte that is not part of valid UTF-8; the rest of valid UTF-8
/// is kept as it is. Names and strings from a model reach error messages, and
/// a newline or an escape sequence in them must neither split the line nor
/// drive the terminal.
inline std::string printable(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  auto hex = [](unsigned v) { return std::string{kHex[(v >> 4) & 15], kHex[v & 15]}; };
  std::string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    unsigned c = s[i];
    if (c < 0x20 || c == 0x7f) {
      out += c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : "\\x" + hex(c);
      ++i;
      continue;
    }
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A multi-byte sequence: its length from the lead byte, then the
    // continuation bytes, no overlong form, no surrogate, at most U+10FFFF.
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    bool valid = len > 0 && i + len <= n;
    for (size_t k = 1; valid && k < len; ++k) valid = (s[i + k] & 0xc0) == 0x80;
    if (valid && len == 3) valid = !(c == 0xe0 && s[i + 1] < 0xa0) && !(c == 0xed && s[i + 1] >= 0xa0);
    if (valid && len == 4) valid = !(c == 0xf0 && s[i + 1] < 0x90) && !(c == 0xf4 && s[i + 1] >= 0x90);
    if (!valid) {
      out += "\\x" + hex(c);
      ++i;
      continue;
    }
    if (len == 2 && c == 0xc2 && s[i + 1] < 0xa0) {
      out += "\\u00" + hex(s[i + 1]);  // a C1 control
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

/// Prints the one line `<prefix><message>` on stderr, the message made
/// printable (see printable), and \returns `code`.
inline int printError(const std::string& prefix, std::string_view message, int code) {
  std::cerr << prefix << printable(message) << "\n";
  return code;
}

/// \returns `text` (a library's message: CLI11's, an exception's) with its
/// line breaks as spaces, the way such prose reads on one line; printError
/// escapes what control characters remain.
inline std::string joinLines(std::string text) {
  for (char& c : text)
    if (c == '\n') c = ' ';
  return text;
}

/// Runs a tool's `body` as its main function does: with SIGPIPE ignored (a
/// write to a closed pipe or to the socket of a dead peer rank is an error
/// the tool reports, not a silent death), and with no exception leaving it:
/// an allocation failure prints `<tool>: error: out of memory ...` and exits
/// kExitEnvironment, any other exception is an internal error (exit 3).
/// \returns the exit code of `body`, or the one of the exception.
template <typename Body>
int guardedMain(const std::string& tool, Body&& body) {
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::cerr << tool << ": error: out of memory (an allocation failed; the model or the inputs need more "
                 "memory than this machine gives)\n";
    return kExitEnvironment;
  } catch (const std::exception& e) {
    return printError(tool + ": internal error: ", joinLines(e.what()), kExitInternal);
  }
}

/// Sets pcc's conventions on `app`: the last of a repeated option wins, the
/// help lists options in a column wide enough for `--flag VALUE`, and ends
/// with `footer` (the exit codes).
inline void setDefaults(CLI::App& app, const std::string& footer) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.get_formatter()->column_width(26);
  app.footer(footer);
}

/// \returns the plain decimal integer `text` when it lies in [lo, hi].
inline std::optional<int64_t> parseInteger(const std::string& text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || v < lo || v > hi) return std::nullopt;
  return v;
}

/// \returns the finite number `text` (as strtod reads it) when it is >= lo.
inline std::optional<double> parseNumber(const std::string& text, double lo) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || !std::isfinite(v) || v < lo) return std::nullopt;
  return v;
}

/// Adds an option `flags` taking an integer in [lo, hi], handed to `set`.
/// A value outside the range fails the parse with a message naming the flag.
inline CLI::Option* addInteger(CLI::App& app, const std::string& flags, int64_t lo, int64_t hi,
                               std::function<void(int64_t)> set, const std::string& help,
                               const std::string& typeName = "N") {
  std::string name = flags.substr(flags.rfind(',') + 1);
  return app
      .add_option_function<std::string>(
          flags,
          [=](const std::string& v) {
            auto n = parseInteger(v, lo, hi);
            if (!n)
              throw CLI::ValidationError(strCat(name, " expects an integer from ", lo, " to ", hi, ", got '", v, "'"));
            set(*n);
          },
          help)
      ->type_name(typeName);
}

/// Adds an option `flags` taking a finite number >= lo, stored in `out`.
inline CLI::Option* addNumber(CLI::App& app, const std::string& flags, double lo, double& out,
                              const std::string& help, const std::string& typeName = "X") {
  std::string name = flags.substr(flags.rfind(',') + 1);
  return app
      .add_option_function<std::string>(
          flags,
          [=, &out](const std::string& v) {
            auto n = parseNumber(v, lo);
            if (!n) throw CLI::ValidationError(strCat(name, " expects a number >= ", lo, ", got '", v, "'"));
            out = *n;
          },
          help)
      ->type_name(typeName);
}

/// Adds an option `flags` taking one of `choices`, stored in `out`.
inline CLI::Option* addChoice(CLI::App& app, const std::string& flags, std::string& out,
                              const std::vector<std::string>& choices, const std::string& help,
                              const std::string& why = "") {
  std::string name = flags.substr(flags.rfind(',') + 1);
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i)
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  std::string typeName;
  for (const std::string& c : choices) typeName += (typeName.empty() ? "" : "|") + c;
  return app
      .add_option_function<std::string>(
          flags,
          [=, &out](const std::string& v) {
            for (const std::string& c : choices)
              if (v == c) {
                out = v;
                return;
              }
            throw CLI::ValidationError(strCat(name, " expects ", list, ", got '", v, "'", why));
          },
          help)
      ->type_name(typeName);
}

/// Turns the arguments no option or positional took (in command-line order)
/// into the one-line message of the usage error.
using ExtrasMessage = std::function<std::string(const std::vector<std::string>& extras)>;

/// \returns the default message for left-over arguments: the first unknown
/// option, else the extra `what` (e.g. "model") with `given`, the one taken.
inline std::string describeExtras(const std::vector<std::string>& extras, const std::string& what,
                                  const std::string& given) {
  for (const std::string& a : extras)
    if (a.size() > 1 && a[0] == '-' && a != "--") return strCat("unknown option '", a.substr(0, a.find('=')), "'");
  for (const std::string& a : extras)
    if (a != "--") return strCat("more than one ", what, " given ('", given, "', '", a, "')");
  return "unexpected '--'";
}

/// Parses `argv` into the options bound to `app`.
/// \returns nullopt when the tool should go on; otherwise the exit code to
/// return: 0 after --help or --version (printed on stdout), 2 after a usage
/// error, printed on stderr as the one line
/// `<errorPrefix><message> (see <tool> --help)`.
inline std::optional<int> parse(CLI::App& app, int argc, char** argv, const std::string& errorPrefix,
                                const ExtrasMessage& extras) {
  std::string see = " (see " + app.get_name() + " --help)";
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp&) {
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ExtrasError&) {
    if (app.get_help_ptr()->count() == 0) {
      return printError(errorPrefix, extras(app.remaining()) + see, kExitUsage);
    }
  } catch (const CLI::ParseError& e) {
    // Option callbacks run before CLI11 looks at --help: a bad value beside
    // --help still shows the help, as the flag asks.
    if (app.get_help_ptr()->count() == 0) {
      return printError(errorPrefix, joinLines(e.what()) + see, kExitUsage);
    }
  }
  std::cout << app.help();
  return 0;
}

/// Flushes standard output; \returns `code`, or 2 with one line on stderr when
/// what the tool printed could not be written (a full disk, a closed pipe), so
/// lost output never ends in success.
inline int finishStdout(const std::string& tool, int code) {
  errno = 0;
  std::cout.flush();
  bool lost = std::cout.fail() || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!lost) return code;
  std::cerr << tool << ": error: writing to standard output failed"
            << (errno ? std::string(" (") + std::strerror(errno) + ")" : std::string()) << "\n";
  return code == 0 ? kExitUsage : code;
}

}  // namespace pcc::cli
