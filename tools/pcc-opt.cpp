// pcc-opt: reads textual IR, runs passes in the order given, prints the IR.
// The driver of every lit test of the passes.
//
//   pcc-opt FILE.ir [--PASS-NAME ...] [--verify-each] [--print-after NAME]
//           [--split-input-file] [-o OUT]
//
// Exit codes: 0 success, 2 bad input or usage, 3 internal error.

#include <algorithm>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "compiler/ir/text.h"
#include "compiler/options.h"
#include "runtime/support/mapped_file.h"
#include "compiler/ir/verifier.h"
#include "passes/pass_manager.h"
#include "passes/partition/partitioner.h"
#include "passes/registry.h"
#include "tools/atomic_write.h"
#include "tools/cli.h"

namespace {

using namespace pcc;

struct Options {
  std::string input;
  std::string output;
  std::vector<std::string> passes;
  bool verifyEach = false;
  bool split = false;
  std::string printAfter;
  /// --partition=gpus=N[,dp=D][,tp=T]: annotate shardings after the passes.
  std::optional<PartitionOptions> partition;
  /// --rank=K: print rank K's lowered program instead of the annotated graph.
  int rank = -1;
};

/// \returns the partition options of a --partition value like "gpus=4,tp=2".
StatusOr<PartitionOptions> parsePartitionSpec(const std::string& spec) {
  PartitionOptions po;
  std::string rest;
  std::stringstream ss(spec);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.rfind("gpus=", 0) == 0) {
      auto n = cli::parseInteger(part.substr(5), 1, kMaxDevices);
      if (!n) return invalidInput("--partition: bad gpus in '", spec, "' (expected a count from 1 to 65536)");
      po.gpus = static_cast<int>(*n);
    } else {
      rest += (rest.empty() ? "" : ",") + part;
    }
  }
  CompileOptions co;
  if (!rest.empty()) RETURN_IF_ERROR(parseStrategy(rest, co).withContext("--partition"));
  po.dp = co.dp;
  po.tp = co.tp;
  po.pp = co.pp;
  po.minimizeWeights = po.tp > 1;  // as pcc does for a forced tp
  return po;
}

/// \returns the options, or the exit code to return (after --help or a usage error).
std::variant<Options, int> parseArgs(int argc, char** argv) {
  Options o;
  CLI::App app(
      "Parses textual IR (FILE '-' reads stdin), verifies it, runs the passes in the\n"
      "order given and prints the result.",
      "pcc-opt");
  cli::setDefaults(app, "exit codes: 0 ok, 2 bad input or usage, 3 internal error, 4 out of memory");
  app.add_option("FILE.ir", o.input, "the textual IR to read ('-': stdin)")->type_name("");
  app.add_flag("--verify-each", o.verifyEach, "run the verifier after every pass");
  app.add_option_function<std::string>(
         "--print-after",
         [&](const std::string& name) {
           if (!createPass(name)) throw CLI::ValidationError(strCat("--print-after: unknown pass '", name, "'"));
           o.printAfter = name;
         },
         "print the IR after pass NAME to stderr")
      ->type_name("NAME");
  app.add_option_function<std::string>(
         "--partition",
         [&](const std::string& spec) {
           auto po = parsePartitionSpec(spec);
           if (!po.ok()) throw CLI::ValidationError(po.status().message());
           o.partition = *po;
         },
         "partition after the passes; SPEC is gpus=N[,dp=D][,tp=T]")
      ->type_name("SPEC");
  cli::addInteger(app, "--rank", 0, 999999, [&](int64_t k) { o.rank = static_cast<int>(k); },
                  "with --partition: print rank K's program with its\ncollectives", "K");
  app.add_flag("--split-input-file", o.split, "treat '// -----' lines as separators of independent\ngraphs");
  app.add_option("-o,--output", o.output, "write the result to OUT instead of stdout")->type_name("OUT");
  // One flag per pass; they run in the order given, repeats included.
  std::map<const CLI::Option*, std::string> passFlags;
  for (const std::string& name : passNames()) {
    const std::string help = "run the " + name + " pass";
    passFlags[app.add_flag("--" + name, help)->group("Passes (run in the order given)")] = name;
  }
  auto extras = [&](const std::vector<std::string>& rest) {
    for (const std::string& a : rest)
      if (a.size() > 2 && a.rfind("--", 0) == 0)
        return strCat("unknown option or pass '", a.substr(0, a.find('=')), "'");
    return cli::describeExtras(rest, "input file", o.input);
  };
  if (auto code = cli::parse(app, argc, argv, "pcc-opt: ", extras)) return *code;
  for (const CLI::Option* opt : app.parse_order())
    if (auto it = passFlags.find(opt); it != passFlags.end()) o.passes.push_back(it->second);
  if (o.input.empty()) {
    std::cerr << "pcc-opt: no input file (use '-' for stdin; see pcc-opt --help)\n";
    return cli::kExitUsage;
  }
  return o;
}

/// One graph's worth of text and the line it starts on.
struct Chunk {
  std::string text;
  int firstLine;
};

std::vector<Chunk> splitInput(const std::string& text, bool split) {
  if (!split) return {{text, 1}};
  std::vector<Chunk> chunks{{"", 1}};
  std::istringstream in(text);
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    size_t b = line.find_first_not_of(" \t");
    size_t e = line.find_last_not_of(" \t\r");
    if (b != std::string::npos && line.substr(b, e - b + 1) == "// -----") {
      chunks.push_back({"", lineNo + 1});
      continue;
    }
    chunks.back().text += line + "\n";
  }
  return chunks;
}

/// Parses, verifies and transforms one graph. \returns its printed form.
StatusOr<std::string> processChunk(const Chunk& chunk, const Options& o, const std::string& fileName) {
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, parseGraph(chunk.text, fileName, chunk.firstLine));
  RETURN_IF_ERROR(verifyGraph(*g).withContext(fileName));
  PassManager pm;
  for (const std::string& p : o.passes) pm.add(createPass(p));
  PassContext ctx;
  ctx.verifyEach = o.verifyEach;
  ctx.printAfter = o.printAfter;
  ctx.log = &std::cerr;
  auto changed = pm.run(*g, ctx);
  if (!changed.ok()) return changed.status();
  if (!o.verifyEach) {
    // Always check the final IR: a pass bug must not print plausible output.
    Status s = verifyGraph(*g);
    if (!s.ok()) return internalError("IR invalid after the passes: ", s.message());
  }
  if (!o.partition) return printGraph(*g);
  ASSIGN_OR_RETURN(Partition p, partitionGraph(*g, *o.partition));
  RETURN_IF_ERROR(verifyGraph(*g).withContext("after partitioning"));
  if (o.rank < 0) return strCat("// mesh ", p.mesh.str(), "\n", printGraph(*g));
  if (o.rank >= p.mesh.size()) return invalidInput("--rank ", o.rank, " is outside the mesh ", p.mesh.str());
  ASSIGN_OR_RETURN(std::vector<RankGraph> ranks, lowerToRanks(*g, p));
  const Graph& local = *ranks[o.rank].graph;
  RETURN_IF_ERROR(verifyGraph(local).withContext(strCat("rank ", o.rank)));
  return strCat("// rank ", o.rank, " of mesh ", p.mesh.str(), "\n", printGraph(local));
}

/// Textual IR larger than this is refused (the largest exported model prints to a few MiB).
constexpr size_t kMaxInputBytes = size_t{1} << 30;

int run(int argc, char** argv) {
  auto opts = parseArgs(argc, argv);
  if (const int* code = std::get_if<int>(&opts)) return *code;
  const Options& o = std::get<Options>(opts);
  std::string text;
  std::string fileName = o.input == "-" ? "<stdin>" : o.input;
  if (o.input == "-") {
    // Standard input may be endless (`< /dev/zero`): read at most kMaxInputBytes.
    std::vector<char> buf(1 << 16);
    while (std::cin.read(buf.data(), static_cast<std::streamsize>(buf.size())) || std::cin.gcount() > 0) {
      text.append(buf.data(), static_cast<size_t>(std::cin.gcount()));
      if (text.size() > kMaxInputBytes) {
        std::cerr << "pcc-opt: <stdin>: input larger than " << (kMaxInputBytes >> 20) << " MiB\n";
        return 2;
      }
    }
  } else {
    // A regular file only (a FIFO or /dev/zero would never end), mapped whole.
    auto f = MappedFile::open(o.input);
    if (!f.ok()) {
      return cli::printError("pcc-opt: ", f.status().message(), cli::kExitUsage);
    }
    if ((*f)->size() > kMaxInputBytes) {
      return cli::printError("pcc-opt: ", strCat(o.input, ": input larger than ", kMaxInputBytes >> 20, " MiB"),
                             cli::kExitUsage);
    }
    text.assign(reinterpret_cast<const char*>((*f)->data()), (*f)->size());
  }

  int exitCode = 0;
  std::string out;
  std::vector<Chunk> chunks = splitInput(text, o.split);
  for (size_t i = 0; i < chunks.size(); ++i) {
    auto printed = processChunk(chunks[i], o, fileName);
    if (!printed.ok()) {
      cli::printError("pcc-opt: ", printed.status().message(), 0);
      exitCode = std::max(exitCode, printed.status().exitCode());
      continue;
    }
    if (!out.empty()) out += "// -----\n";
    out += *printed;
  }
  if (o.output.empty() || o.output == "-") {
    std::cout << out;
  } else {
    // Whole or not at all: a full disk leaves an older file as it was.
    if (Status w = cli::writeFileAtomically(o.output, out); !w.ok()) {
      return cli::printError("pcc-opt: ", strCat("cannot write output file '", o.output, "': ", w.message()),
                             cli::kExitUsage);
    }
  }
  return exitCode;
}

}  // namespace

int toolMain(int argc, char** argv) { return run(argc, argv); }

int main(int argc, char** argv) {
  return pcc::cli::finishStdout("pcc-opt", pcc::cli::guardedMain("pcc-opt", [&] { return toolMain(argc, argv); }));
}
