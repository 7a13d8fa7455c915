#include "compiler/options.h"

#include <algorithm>
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

std::string strategyText(const CompileOptions& opts) {
  std::string s;
  if (opts.dp > 0) s += strCat("dp=", opts.dp);
  if (opts.tp > 0) s += strCat(s.empty() ? "" : ",", "tp=", opts.tp);
  if (opts.pp > 0) s += strCat(s.empty() ? "" : ",", "pp=", opts.pp);
  return s.empty() ? "auto" : s;
}

StatusOr<int> deviceCount(const CompileOptions& opts) {
  const int64_t fixed = int64_t{std::max(opts.tp, 1)} * std::max(opts.pp, 1);  // what dp multiplies
  const int64_t forced = fixed * std::max(opts.dp, 1);
  if (opts.gpus <= 0) {
    if (forced > kMaxDevices)
      return invalidInput("--strategy ", strategyText(opts), " needs ", forced, " devices, more than the ",
                          kMaxDevices, " pcc plans for");
    return static_cast<int>(forced);
  }
  if (opts.dp > 0 && forced != opts.gpus)
    return invalidInput("--strategy ", strategyText(opts), " uses ", forced, " devices but --gpus is ", opts.gpus,
                        " (leave out --gpus, or make them agree)");
  if (opts.dp <= 0 && opts.gpus % fixed != 0)
    return invalidInput("--strategy ", strategyText(opts), " needs a multiple of ", fixed, " devices but --gpus is ",
                        opts.gpus, " (leave out --gpus, or make them agree)");
  return opts.gpus;
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
