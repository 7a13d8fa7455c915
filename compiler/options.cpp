#include "compiler/options.h"

#include <cctype>
#include <sstream>

namespace pcc {

namespace {
std::optional<int64_t> parseCount(const std::string& s, int64_t min) {
  if (s.empty() || s.size() > 12) return std::nullopt;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  int64_t v = std::stoll(s);
  if (v < min) return std::nullopt;
  return v;
}
}  // namespace

Status parseStrategy(const std::string& text, CompileOptions& opts) {
  opts.dp = opts.tp = opts.pp = 0;
  if (text == "auto") return Status::OK();
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    auto eq = part.find('=');
    std::string key = part.substr(0, eq);
    auto v = eq == std::string::npos ? std::nullopt : parseCount(part.substr(eq + 1), 1);
    if (!v || (key != "dp" && key != "tp" && key != "pp"))
      return invalidInput("--strategy '", text, "': expected auto or dp=D,tp=T,pp=P (bad part '", part, "')");
    if (*v > kMaxDevices)
      return invalidInput("--strategy '", text, "': ", key, "=", *v, " exceeds the ", kMaxDevices, " devices pcc plans for");
    int& slot = key == "dp" ? opts.dp : key == "tp" ? opts.tp : opts.pp;
    if (slot != 0) return invalidInput("--strategy '", text, "': ", key, " is given twice");
    slot = static_cast<int>(*v);
  }
  if (text.empty() || text.back() == ',' || text.front() == ',')
    return invalidInput("--strategy '", text, "': expected auto or dp=D,tp=T,pp=P");
  return Status::OK();
}

StatusOr<Dims> parseDims(const std::string& text) {
  Dims d;
  std::string cur;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == 'x' || text[i] == ',') {
      auto v = parseCount(cur, 0);
      if (!v) return invalidInput("bad shape '", text, "': expected sizes like 2x128");
      d.push_back(*v);
      cur.clear();
    } else {
      cur += text[i];
    }
  }
  return d;
}

}  // namespace pcc
