#include "runtime/launch_env.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>

#include "runtime/tcp_store.h"

extern char** environ;

namespace pcc {

Environment processEnvironment() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

std::string_view launcherName(Launcher l) {
  switch (l) {
    case Launcher::kTorchrun: return "torchrun";
    case Launcher::kOpenMpi: return "mpirun";
    case Launcher::kSlurm: return "srun";
    case Launcher::kEnvironment: break;
  }
  return "environment";
}

namespace {

std::string get(const Environment& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

bool has(const Environment& env, const char* name) { return env.count(name) > 0; }

/// \returns the number `v` of variable `name`: plain decimal digits without a
/// leading zero ("0" itself aside), so that one number has one spelling
/// ("-0", "+1", "01" and " 1" are refused), in [min, max].
StatusOr<int64_t> number(const std::string& name, const std::string& v, int64_t min, int64_t max) {
  bool plain = !v.empty() && v.size() <= 18 && (v == "0" || v[0] != '0') &&
               std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!plain) return invalidInput(name, " expects decimal digits without sign or leading zero, got '", v, "'");
  int64_t n = std::stoll(v);
  if (n < min || n > max) return invalidInput(name, " expects an integer in [", min, ", ", max, "], got '", v, "'");
  return n;
}

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

/// How to hand PCC_RDZV_SECRET to every rank under `l`.
const char* secretHint(Launcher l) {
  switch (l) {
    case Launcher::kTorchrun: return "export it before torchrun, whose workers inherit the environment";
    case Launcher::kOpenMpi: return "pass it with mpirun -x PCC_RDZV_SECRET";
    case Launcher::kSlurm: return "export it before srun, which passes the environment on (--export=ALL, its default)";
    case Launcher::kEnvironment: break;
  }
  return "set it in every rank's environment";
}

bool isHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_';
}

bool allDigits(std::string_view s) {
  return !s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

StatusOr<std::string> firstSlurmHost(const std::string& list) {
  auto bad = [&](const std::string& why) { return invalidInput("Slurm host list '", list, "': ", why); };
  if (list.empty()) return bad("empty");
  std::string first;
  bool inFirst = true;       // still in the list's first host
  bool inBracket = false;    // between '[' and ']'
  bool firstItem = false;    // in a bracket: still in its first item
  size_t itemStart = 0;      // in a bracket: where the current item began
  bool hostHasText = false;  // the current host has a character or a bracket
  auto endItem = [&](size_t end) -> std::string {
    std::string_view item(list.data() + itemStart, end - itemStart);
    size_t dash = item.find('-');
    std::string_view lo = item.substr(0, dash);
    if (!allDigits(lo)) return "a bracket item '" + std::string(item) + "' is not NUMBER or LOW-HIGH";
    if (dash != std::string_view::npos) {
      std::string_view hi = item.substr(dash + 1);
      if (!allDigits(hi)) return "a bracket item '" + std::string(item) + "' is not NUMBER or LOW-HIGH";
      if (std::stoll(std::string(lo)) > std::stoll(std::string(hi)))
        return "the range '" + std::string(item) + "' runs downwards";
    }
    if (inFirst && firstItem) first += lo;  // the lowest of the first item, its zero padding kept
    firstItem = false;
    return "";
  };
  for (size_t i = 0; i < list.size(); ++i) {
    const char c = list[i];
    if (inBracket) {
      if (c == ']' || c == ',') {
        if (std::string why = endItem(i); !why.empty()) return bad(why);
        itemStart = i + 1;
        if (c == ']') inBracket = false;
      } else if (c == '[') {
        return bad("nested '['");
      } else if (!(c >= '0' && c <= '9') && c != '-') {
        return bad(std::string("'") + c + "' inside brackets");
      }
      continue;
    }
    if (c == '[') {
      inBracket = true;
      firstItem = true;
      itemStart = i + 1;
      hostHasText = true;
    } else if (c == ']') {
      return bad("']' without '['");
    } else if (c == ',') {
      if (!hostHasText) return bad("an empty host");
      inFirst = false;
      hostHasText = false;
    } else if (isHostChar(c)) {
      if (inFirst) first += c;
      hostHasText = true;
    } else {
      return bad(std::string("'") + c + "' in a host name");
    }
  }
  if (inBracket) return bad("'[' without ']'");
  if (!hostHasText) return bad("an empty host");
  return first;
}

StatusOr<std::optional<LaunchEnv>> readLaunchEnv(const Environment& env, const std::string& rendezvousFlag) {
  LaunchEnv le;
  std::string rankVar, sizeVar;
  const bool torchWorker = has(env, "TORCHELASTIC_RUN_ID") && (has(env, "RANK") || has(env, "WORLD_SIZE"));
  const bool slurmSingle = has(env, "SLURM_PROCID") && get(env, "SLURM_NTASKS") == "1" && rendezvousFlag.empty();
  if (torchWorker) {
    le.launcher = Launcher::kTorchrun;
    rankVar = "RANK", sizeVar = "WORLD_SIZE";
  } else if (has(env, "OMPI_COMM_WORLD_RANK") || has(env, "OMPI_COMM_WORLD_SIZE")) {
    le.launcher = Launcher::kOpenMpi;
    rankVar = "OMPI_COMM_WORLD_RANK", sizeVar = "OMPI_COMM_WORLD_SIZE";
  } else if ((has(env, "SLURM_PROCID") || has(env, "SLURM_NTASKS")) && !slurmSingle) {
    le.launcher = Launcher::kSlurm;
    rankVar = "SLURM_PROCID", sizeVar = "SLURM_NTASKS";
  } else if (has(env, "RANK") || has(env, "WORLD_SIZE")) {
    le.launcher = has(env, "MASTER_ADDR") && has(env, "MASTER_PORT") ? Launcher::kTorchrun : Launcher::kEnvironment;
    rankVar = "RANK", sizeVar = "WORLD_SIZE";
  } else {
    // A --rendezvous given for a run that names no rank would run every rank
    // as a thread and ignore it: say so instead.
    if (!rendezvousFlag.empty())
      return invalidInput("--rendezvous ", rendezvousFlag, ": one process per rank needs RANK and WORLD_SIZE (or "
                          "Open MPI's OMPI_COMM_WORLD_RANK/SIZE, or Slurm's SLURM_PROCID/SLURM_NTASKS); leave "
                          "--rendezvous out to run the ranks as threads");
    return std::optional<LaunchEnv>();
  }
  for (const std::string& v : {rankVar, sizeVar})
    if (!has(env, v.c_str()))
      return invalidInput(v, " is not set, but ", v == rankVar ? sizeVar : rankVar, " is (", launcherName(le.launcher),
                          "): a multi-process run needs both");
  ASSIGN_OR_RETURN(int64_t r, number(rankVar, get(env, rankVar.c_str()), 0, kIntMax));
  ASSIGN_OR_RETURN(int64_t n, number(sizeVar, get(env, sizeVar.c_str()), 1, kIntMax));
  if (r >= n) return invalidInput(rankVar, "=", r, " is not below ", sizeVar, "=", n);
  le.rank = static_cast<int>(r);
  le.worldSize = static_cast<int>(n);
  const char* localVar = has(env, "LOCAL_RANK")                                   ? "LOCAL_RANK"
                         : le.launcher == Launcher::kOpenMpi && has(env, "OMPI_COMM_WORLD_LOCAL_RANK") ? "OMPI_COMM_WORLD_LOCAL_RANK"
                         : le.launcher == Launcher::kSlurm && has(env, "SLURM_LOCALID") ? "SLURM_LOCALID"
                                                                                        : nullptr;
  if (localVar) {
    ASSIGN_OR_RETURN(int64_t l, number(localVar, get(env, localVar), 0, kIntMax));
    le.localRank = static_cast<int>(l);
  }
  const std::string who = strCat("rank ", r, " of ", n,
                                 le.launcher == Launcher::kEnvironment ? std::string()
                                                                       : strCat(" (", launcherName(le.launcher), ")"));

  // The rendezvous: explicit first, then what the launcher implies.
  std::string base = rendezvousFlag;
  le.rendezvousSource = "--rendezvous";
  if (base.empty() && has(env, "PCC_RENDEZVOUS")) {
    base = get(env, "PCC_RENDEZVOUS");
    le.rendezvousSource = "PCC_RENDEZVOUS";
  }
  std::string id = get(env, "PCC_RUN_ID");
  if (id.empty()) id = get(env, "PMIX_NAMESPACE");
  if (id.empty() && has(env, "SLURM_JOB_ID") && has(env, "SLURM_STEP_ID"))
    id = get(env, "SLURM_JOB_ID") + "." + get(env, "SLURM_STEP_ID");
  if (id.empty()) id = get(env, "TORCHELASTIC_RUN_ID");
  le.rendezvous.runId = id;

  std::optional<TcpAddress> implied;  // a TCP store the launcher's variables name
  if (base.empty() && le.launcher == Launcher::kTorchrun && has(env, "MASTER_ADDR") && has(env, "MASTER_PORT")) {
    auto host = parseHost(get(env, "MASTER_ADDR"));
    if (!host.ok() || host->empty())
      return invalidInput(who, ": MASTER_ADDR '", get(env, "MASTER_ADDR"), "' is not a host",
                          host.ok() ? "" : ": " + host.status().message());
    TcpAddress a;
    a.host = *host;
    if (has(env, "PCC_RDZV_PORT")) {
      ASSIGN_OR_RETURN(int64_t p, number("PCC_RDZV_PORT", get(env, "PCC_RDZV_PORT"), 1, 65535));
      a.port = static_cast<int>(p);
      le.rendezvousSource = "MASTER_ADDR:PCC_RDZV_PORT";
    } else {
      // torchrun's own store listens on MASTER_PORT: pcc's is the next port.
      ASSIGN_OR_RETURN(int64_t p, number("MASTER_PORT", get(env, "MASTER_PORT"), 1, 65534));
      a.port = static_cast<int>(p + 1);
      le.rendezvousSource = "MASTER_ADDR:MASTER_PORT+1";
    }
    implied = a;
  } else if (base.empty() && le.launcher == Launcher::kSlurm) {
    const char* listVar = has(env, "SLURM_STEP_NODELIST")  ? "SLURM_STEP_NODELIST"
                          : has(env, "SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST"
                          : has(env, "SLURM_NODELIST")     ? "SLURM_NODELIST"
                                                           : nullptr;
    if (!listVar)
      return invalidInput(who, ": no rendezvous: set SLURM_JOB_NODELIST (srun sets it) with PCC_RDZV_PORT, "
                          "or give --rendezvous DIR|tcp:HOST:PORT (or PCC_RENDEZVOUS)");
    auto host = firstSlurmHost(get(env, listVar));
    if (!host.ok()) return invalidInput(who, ": ", listVar, ": ", host.status().message());
    TcpAddress a;
    a.host = *host;
    if (has(env, "PCC_RDZV_PORT")) {
      ASSIGN_OR_RETURN(int64_t p, number("PCC_RDZV_PORT", get(env, "PCC_RDZV_PORT"), 1, 65535));
      a.port = static_cast<int>(p);
      le.rendezvousSource = strCat(listVar, ":PCC_RDZV_PORT");
    } else if (has(env, "SLURM_STEP_RESV_PORTS")) {
      // "12000-12003", "12000" or "12000,12005": the first port.
      std::string ports = get(env, "SLURM_STEP_RESV_PORTS");
      std::string firstPort = ports.substr(0, ports.find_first_of("-,"));
      ASSIGN_OR_RETURN(int64_t p, number("SLURM_STEP_RESV_PORTS", firstPort, 1, 65535));
      a.port = static_cast<int>(p);
      le.rendezvousSource = strCat(listVar, ":SLURM_STEP_RESV_PORTS");
    } else {
      return invalidInput(who, ": no rendezvous port: set PCC_RDZV_PORT (a port free on ", a.host,
                          ", the same for every task) or run srun --resv-ports, or give --rendezvous DIR|tcp:HOST:PORT "
                          "(or PCC_RENDEZVOUS)");
    }
    implied = a;
  }

  if (implied || base.rfind("tcp:", 0) == 0) {
    // The store refuses ranks of another run id; none is needed when every
    // run has its own port. It admits only ranks that present the run's
    // secret, which the launcher hands every rank in the environment (a port
    // on a shared machine is open to anyone who can reach it).
    if (implied) {
      le.rendezvous.tcp = *implied;
    } else {
      ASSIGN_OR_RETURN(le.rendezvous.tcp, parseTcpAddress(base, /*allowPortZero=*/false));
    }
    le.rendezvous.secret = get(env, "PCC_RDZV_SECRET");
    if (le.rendezvous.secret.size() < kMinSecretBytes || le.rendezvous.secret.size() > kMaxSecretBytes)
      return invalidInput(who, ": the TCP rendezvous tcp:", le.rendezvous.tcp.str(), " (", le.rendezvousSource,
                          ") needs PCC_RDZV_SECRET, the same in every rank: ", kMinSecretBytes, " to ",
                          kMaxSecretBytes, " bytes (e.g. PCC_RDZV_SECRET=$(openssl rand -hex 16)), not ",
                          le.rendezvous.secret.size(), "; ", secretHint(le.launcher));
    return std::optional<LaunchEnv>(le);
  }
  if (base.empty() || id.empty())
    return invalidInput(who, " from the environment: a multi-process run needs --rendezvous DIR "
                        "(or PCC_RENDEZVOUS) and a run id shared by every rank (PCC_RUN_ID; set by mpirun), "
                        "or --rendezvous tcp:HOST:PORT");
  le.rendezvous.dir = (std::filesystem::path(base) / id).string();
  return std::optional<LaunchEnv>(le);
}

}  // namespace pcc
