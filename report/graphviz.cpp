// Runs Graphviz's dot.
//
// 1. Make a private temporary folder and write the graph into it.
// 2. Spawn `dot -Tsvg graph.dot` with posix_spawnp (PATH lookup, no shell):
//    stdin from /dev/null, stdout into graph.svg, stderr into dot.err.
// 3. Wait for it, killing it after the timeout.
// 4. Read the SVG, or the first line of dot.err for the error; remove the
//    folder whatever happened.
#include "report/graphviz.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

extern char** environ;

namespace pcc {

namespace {

namespace fs = std::filesystem;

// Removes the folder when the render is done, whatever the outcome.
struct TempDir {
  std::string path;
  ~TempDir() {
    if (path.empty()) return;
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string firstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.empty() ? "no message" : line;
}

}  // namespace

StatusOr<std::string> renderDotToSvg(const std::string& dotSource, int timeoutSeconds) {
  // Step 1.
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/pcc-report-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) return environmentError("cannot make a temporary folder ", pattern, ": ", std::strerror(errno));
  TempDir dir{buf.data()};
  std::string in = dir.path + "/graph.dot", out = dir.path + "/graph.svg", err = dir.path + "/dot.err";
  {
    std::ofstream f(in, std::ios::binary);
    f << dotSource;
    f.close();
    if (!f) return environmentError("cannot write ", in);
  }

  // Step 2.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> args = {"dot", "-Tsvg", in};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "dot", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc == ENOENT) return environmentError("Graphviz's dot program is not installed (no dot on PATH)");
  if (rc != 0) return environmentError("cannot run Graphviz's dot: ", std::strerror(rc));

  // Step 3.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  int status = 0;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return environmentError("waiting for Graphviz's dot: ", std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return environmentError("Graphviz's dot ran longer than ", timeoutSeconds, " s and was stopped");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  // Step 4.
  if (WIFSIGNALED(status)) return environmentError("Graphviz's dot was killed by signal ", WTERMSIG(status));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return environmentError("Graphviz's dot failed (exit ", WEXITSTATUS(status), "): ", firstLine(readFile(err)));
  std::string svg = readFile(out);
  if (svg.find("<svg") == std::string::npos) return environmentError("Graphviz's dot wrote no SVG");
  return svg;
}

}  // namespace pcc
