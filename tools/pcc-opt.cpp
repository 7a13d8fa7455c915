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
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/ir/text.h"
#include "compiler/options.h"
#include "compiler/ir/verifier.h"
#include "passes/pass_manager.h"
#include "passes/partition/partitioner.h"
#include "passes/registry.h"

namespace {

using namespace pcc;

void printHelp(std::ostream& os) {
  os << "usage: pcc-opt FILE.ir [--PASS-NAME ...] [options]\n"
        "Parses textual IR (FILE '-' reads stdin), verifies it, runs the passes in the\n"
        "order given and prints the result.\n\n"
        "options:\n"
        "  --verify-each        run the verifier after every pass\n"
        "  --print-after NAME   print the IR after pass NAME to stderr\n"
        "  --partition=SPEC     partition after the passes; SPEC is gpus=N[,dp=D][,tp=T]\n"
        "  --rank=K             with --partition: print rank K's program with its collectives\n"
        "  --split-input-file   treat '// -----' lines as separators of independent graphs\n"
        "  -o OUT               write the result to OUT instead of stdout\n"
        "  --help               show this help\n\n"
        "passes:\n";
  for (const std::string& n : passNames()) os << "  --" << n << "\n";
}

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
      ASSIGN_OR_RETURN(Dims d, parseDims(part.substr(5)));
      if (d.size() != 1) return invalidInput("--partition: bad gpus in '", spec, "'");
      po.gpus = static_cast<int>(d[0]);
    } else {
      rest += (rest.empty() ? "" : ",") + part;
    }
  }
  CompileOptions co;
  if (!rest.empty()) RETURN_IF_ERROR(parseStrategy(rest, co).withContext("--partition"));
  po.dp = co.dp;
  po.tp = co.tp;
  po.pp = co.pp;
  return po;
}

/// \returns the options, or an invalid-input error describing the misuse.
StatusOr<Options> parseArgs(int argc, char** argv, bool& help) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& flag) -> StatusOr<std::string> {
      if (a.size() > flag.size() && a.compare(0, flag.size() + 1, flag + "=") == 0) return a.substr(flag.size() + 1);
      if (i + 1 >= args.size()) return invalidInput("option ", flag, " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      help = true;
    } else if (a == "--verify-each") {
      o.verifyEach = true;
    } else if (a == "--split-input-file") {
      o.split = true;
    } else if (a == "-o") {
      ASSIGN_OR_RETURN(o.output, value("-o"));
    } else if (a.rfind("--partition", 0) == 0) {
      ASSIGN_OR_RETURN(std::string spec, value("--partition"));
      ASSIGN_OR_RETURN(o.partition, parsePartitionSpec(spec));
    } else if (a.rfind("--rank", 0) == 0) {
      ASSIGN_OR_RETURN(std::string r, value("--rank"));
      if (r.empty() || r.find_first_not_of("0123456789") != std::string::npos || r.size() > 6)
        return invalidInput("--rank expects a rank number, got '", r, "'");
      o.rank = std::stoi(r);
    } else if (a.rfind("--print-after", 0) == 0) {
      ASSIGN_OR_RETURN(o.printAfter, value("--print-after"));
      if (!createPass(o.printAfter)) return invalidInput("--print-after: unknown pass '", o.printAfter, "'");
    } else if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string name = a.substr(2);
      if (!createPass(name)) return invalidInput("unknown option or pass '", a, "' (see --help)");
      o.passes.push_back(name);
    } else if (a == "-" || a[0] != '-') {
      if (!o.input.empty()) return invalidInput("more than one input file: '", o.input, "' and '", a, "'");
      o.input = a;
    } else {
      return invalidInput("unknown option '", a, "' (see --help)");
    }
  }
  if (!help && o.input.empty()) return invalidInput("no input file (use '-' for stdin; see --help)");
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

int run(int argc, char** argv) {
  bool help = false;
  auto opts = parseArgs(argc, argv, help);
  if (help) {
    printHelp(std::cout);
    return 0;
  }
  if (!opts.ok()) {
    std::cerr << "pcc-opt: " << opts.status().message() << "\n";
    return 2;
  }
  const Options& o = *opts;
  std::string text;
  std::string fileName = o.input == "-" ? "<stdin>" : o.input;
  if (o.input == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(o.input, std::ios::binary);
    if (!in) {
      std::cerr << "pcc-opt: cannot open input file '" << o.input << "'\n";
      return 2;
    }
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  int exitCode = 0;
  std::string out;
  std::vector<Chunk> chunks = splitInput(text, o.split);
  for (size_t i = 0; i < chunks.size(); ++i) {
    auto printed = processChunk(chunks[i], o, fileName);
    if (!printed.ok()) {
      std::cerr << "pcc-opt: " << printed.status().message() << "\n";
      exitCode = std::max(exitCode, printed.status().exitCode());
      continue;
    }
    if (!out.empty()) out += "// -----\n";
    out += *printed;
  }
  if (o.output.empty() || o.output == "-") {
    std::cout << out;
  } else {
    std::ofstream f(o.output, std::ios::binary);
    f << out;
    if (!f) {
      std::cerr << "pcc-opt: cannot write output file '" << o.output << "'\n";
      return 2;
    }
  }
  return exitCode;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "pcc-opt: internal error: " << e.what() << "\n";
    return 3;
  }
}
