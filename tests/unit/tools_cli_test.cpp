// tools/cli.h: the tools' command-line conventions on CLI11.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/cli.h"

namespace pcc {
namespace {

/// A command line as argv; argv[0] is the tool.
struct Argv {
  explicit Argv(std::vector<std::string> a) : args(std::move(a)) {
    args.insert(args.begin(), "tool");
    for (std::string& s : args) ptrs.push_back(s.data());
  }
  int argc() const { return static_cast<int>(ptrs.size()); }
  char** argv() { return ptrs.data(); }
  std::vector<std::string> args;
  std::vector<char*> ptrs;
};

/// A small tool: one positional, an integer, a number, a choice, a flag.
struct Tool {
  Tool() : app("A tool.", "tool") {
    cli::setDefaults(app, "exit codes: 0 ok, 2 usage");
    app.add_option("INPUT", input, "the input");
    cli::addInteger(app, "-n,--count", 1, 100, [this](int64_t v) { count = v; }, "a count");
    cli::addNumber(app, "--tol", 0, tol, "a tolerance");
    cli::addChoice(app, "--format", format, {"text", "json"}, "a format");
    app.add_flag("--quiet", quiet, "say nothing");
  }
  /// \returns parse's result; stdout and stderr are kept in `out` and `err`.
  std::optional<int> run(std::vector<std::string> args) {
    Argv a(std::move(args));
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    auto r = cli::parse(app, a.argc(), a.argv(), "tool: error: ", [this](const std::vector<std::string>& rest) {
      return cli::describeExtras(rest, "input", input);
    });
    out = testing::internal::GetCapturedStdout();
    err = testing::internal::GetCapturedStderr();
    return r;
  }
  CLI::App app;
  std::string input, format = "text", out, err;
  int64_t count = 0;
  double tol = 0;
  bool quiet = false;
};

TEST(ToolsCli, IntegersAreDecimalAndInRange) {
  EXPECT_EQ(cli::parseInteger("010", 0, 100), 10);  // not octal
  EXPECT_EQ(cli::parseInteger("0", 0, 100), 0);
  EXPECT_FALSE(cli::parseInteger("0x10", 0, 100));
  EXPECT_FALSE(cli::parseInteger("", 0, 100));
  EXPECT_FALSE(cli::parseInteger("-1", 0, 100));
  EXPECT_FALSE(cli::parseInteger("101", 0, 100));
  EXPECT_FALSE(cli::parseInteger("+5", 0, 100));
  EXPECT_FALSE(cli::parseInteger("5 ", 0, 100));
  EXPECT_FALSE(cli::parseInteger("99999999999999999999", 0, std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(cli::parseNumber("1e-4", 0), 1e-4);
  EXPECT_FALSE(cli::parseNumber("-1", 0));
  EXPECT_FALSE(cli::parseNumber("nan", 0));
  EXPECT_FALSE(cli::parseNumber("inf", 0));
  EXPECT_FALSE(cli::parseNumber("1x", 0));
}

TEST(ToolsCli, FlagEqualsValueAndFlagSpaceValueAreTheSame) {
  Tool a, b;
  EXPECT_EQ(a.run({"in", "--count=7", "--tol=0.5", "--format=json"}), std::nullopt) << a.err;
  EXPECT_EQ(b.run({"--count", "7", "in", "--tol", "0.5", "--format", "json"}), std::nullopt) << b.err;
  for (const Tool* t : {&a, &b}) {
    EXPECT_EQ(t->input, "in");
    EXPECT_EQ(t->count, 7);
    EXPECT_EQ(t->tol, 0.5);
    EXPECT_EQ(t->format, "json");
    EXPECT_EQ(t->err, "");
  }
  Tool c;
  EXPECT_EQ(c.run({"in", "-n", "3"}), std::nullopt) << c.err;
  EXPECT_EQ(c.count, 3);
}

TEST(ToolsCli, ARepeatedOptionKeepsItsLastValue) {
  Tool t;
  EXPECT_EQ(t.run({"in", "--count", "2", "--count=9"}), std::nullopt) << t.err;
  EXPECT_EQ(t.count, 9);
}

/// Checks that `args` is a usage error: exit 2 and one stderr line holding `needle`.
void expectUsageError(const std::vector<std::string>& args, const std::string& needle) {
  Tool t;
  EXPECT_EQ(t.run(args), 2);
  EXPECT_EQ(t.out, "");
  ASSERT_FALSE(t.err.empty());
  EXPECT_EQ(t.err.find('\n'), t.err.size() - 1) << "not one line: " << t.err;
  EXPECT_EQ(t.err.rfind("tool: error: ", 0), 0u) << t.err;
  EXPECT_NE(t.err.find(needle), std::string::npos) << "no '" << needle << "' in: " << t.err;
  EXPECT_NE(t.err.find("(see tool --help)"), std::string::npos) << t.err;
}

TEST(ToolsCli, UsageErrorsAreOneLineAndExitTwo) {
  expectUsageError({"in", "--frobnicate"}, "unknown option '--frobnicate'");
  expectUsageError({"in", "--frobnicate=3"}, "unknown option '--frobnicate'");
  expectUsageError({"in", "-z"}, "unknown option '-z'");
  expectUsageError({"in", "other"}, "more than one input given ('in', 'other')");
  expectUsageError({"in", "--count", "abc"}, "--count expects an integer from 1 to 100, got 'abc'");
  expectUsageError({"in", "--count", "0"}, "--count expects an integer from 1 to 100, got '0'");
  expectUsageError({"in", "--count=0x10"}, "--count");
  expectUsageError({"in", "--count"}, "--count");
  expectUsageError({"in", "--tol", "-1"}, "--tol expects a number >= 0, got '-1'");
  expectUsageError({"in", "--format", "html"}, "--format expects text or json, got 'html'");
}

TEST(ToolsCli, HelpExitsZeroAndListsEveryOption) {
  Tool t;
  EXPECT_EQ(t.run({"--help"}), 0);
  EXPECT_EQ(t.err, "");
  for (const char* s : {"A tool.", "INPUT", "-n,--count", "--tol", "--format", "text|json", "--quiet", "-h,--help",
                        "exit codes: 0 ok, 2 usage"})
    EXPECT_NE(t.out.find(s), std::string::npos) << "help lacks " << s << ":\n" << t.out;
  // --help wins over a bad value or an unknown option beside it.
  Tool u;
  EXPECT_EQ(u.run({"--count", "abc", "--frobnicate", "-h"}), 0);
  EXPECT_EQ(u.err, "");
  EXPECT_NE(u.out.find("--count"), std::string::npos);
}

TEST(GuardedMain, AllocationFailureIsOneLineAndExit4) {
  testing::internal::CaptureStderr();
  int code = cli::guardedMain("tool", []() -> int { throw std::bad_alloc(); });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, cli::kExitEnvironment);
  EXPECT_EQ(err.rfind("tool: error: out of memory", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(GuardedMain, OtherExceptionIsOneLineInternalError) {
  testing::internal::CaptureStderr();
  int code = cli::guardedMain("tool", []() -> int { throw std::runtime_error("two\nlines"); });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 3);
  EXPECT_EQ(err, "tool: internal error: two lines\n");
}

TEST(GuardedMain, IgnoresSigpipeAndPassesTheCode) {
  std::signal(SIGPIPE, SIG_DFL);
  EXPECT_EQ(cli::guardedMain("tool", [] { return 7; }), 7);
  void (*was)(int) = std::signal(SIGPIPE, SIG_DFL);
  EXPECT_EQ(was, SIG_IGN);
}

}  // namespace
}  // namespace pcc
