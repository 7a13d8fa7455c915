// The launch environment (runtime/launch_env.h): Slurm's compressed host
// lists, which launcher's variables win when several are set, the rendezvous
// each implies, and the refusals (partial sets, loose number spellings, no
// port, no secret).
#include <gtest/gtest.h>

#include "runtime/launch_env.h"

namespace pcc {
namespace {

const std::string kSecret = "0123456789abcdef0123";

LaunchEnv mustRead(const Environment& env, const std::string& flag = "") {
  auto r = readLaunchEnv(env, flag);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok() || !r->has_value()) {
    ADD_FAILURE() << "no rank read";
    return {};
  }
  return **r;
}

std::string mustFail(const Environment& env, const std::string& flag = "") {
  auto r = readLaunchEnv(env, flag);
  EXPECT_FALSE(r.ok()) << "accepted";
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidInput);
  return r.status().message();
}

TEST(SlurmHostList, FirstHost) {
  EXPECT_EQ(*firstSlurmHost("node[01-04,07],gpu5"), "node01");
  EXPECT_EQ(*firstSlurmHost("gpu5,node[01-04,07]"), "gpu5");
  EXPECT_EQ(*firstSlurmHost("n[07,01-03]"), "n07");  // as written, not sorted
  EXPECT_EQ(*firstSlurmHost("node1"), "node1");
  EXPECT_EQ(*firstSlurmHost("rack[1-2]-n[3-4]"), "rack1-n3");
  EXPECT_EQ(*firstSlurmHost("127.0.0.[1-4]"), "127.0.0.1");
  EXPECT_EQ(*firstSlurmHost("n[0009-0010]x,y"), "n0009x");  // zero padding kept
  EXPECT_EQ(*firstSlurmHost("a_b.c-d"), "a_b.c-d");
  EXPECT_EQ(*firstSlurmHost("n[5]"), "n5");
}

TEST(SlurmHostList, Refused) {
  for (const char* bad : {"", "node[01-04", "node01-04]", "node[04-01]", "node[a-b]", "node[[1]]", "a,,b", "a b",
                          "node[]", "node[1,]", "node[1-]", "node[-1]", "a,", ",a", "n[1-2-3]", "n[1]]", "n\xc3\xa9"}) {
    auto r = firstSlurmHost(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "' gave " << (r.ok() ? *r : "");
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("Slurm host list"), std::string::npos);
    }
  }
  // The whole list is checked, not only its first host.
  EXPECT_FALSE(firstSlurmHost("node1,gpu[3-1]").ok());
}

TEST(LaunchEnv, NoRankIsAThreadedRun) {
  auto r = readLaunchEnv({{"PATH", "/bin"}, {"MASTER_ADDR", "h"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  // srun -n 1 (or an sbatch script's one task): threads too.
  r = readLaunchEnv({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_NODELIST", "n1"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  // --rendezvous without any rank: said, not ignored.
  EXPECT_NE(mustFail({}, "/tmp/x").find("leave --rendezvous out"), std::string::npos);
}

TEST(LaunchEnv, Torchrun) {
  Environment env{{"RANK", "3"},           {"WORLD_SIZE", "4"},      {"LOCAL_RANK", "1"},
                  {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}, {"PCC_RDZV_SECRET", kSecret}};
  LaunchEnv le = mustRead(env);
  EXPECT_EQ(le.launcher, Launcher::kTorchrun);
  EXPECT_EQ(launcherName(le.launcher), "torchrun");
  EXPECT_EQ(le.rank, 3);
  EXPECT_EQ(le.worldSize, 4);
  EXPECT_EQ(le.localRank, 1);
  EXPECT_TRUE(le.rendezvous.dir.empty());
  EXPECT_EQ(le.rendezvous.tcp.host, "node7");
  EXPECT_EQ(le.rendezvous.tcp.port, 29501);  // MASTER_PORT is torchrun's own store
  EXPECT_EQ(le.rendezvous.secret, kSecret);
  EXPECT_EQ(le.rendezvousSource, "MASTER_ADDR:MASTER_PORT+1");
  env["PCC_RDZV_PORT"] = "31000";
  EXPECT_EQ(mustRead(env).rendezvous.tcp.port, 31000);
  env.erase("PCC_RDZV_PORT");
  // IPv6 MASTER_ADDR, bare or in brackets.
  env["MASTER_ADDR"] = "::1";
  EXPECT_EQ(mustRead(env).rendezvous.tcp.str(), "[::1]:29501");
  env["MASTER_ADDR"] = "[::1]";
  EXPECT_EQ(mustRead(env).rendezvous.tcp.host, "::1");
  env["MASTER_ADDR"] = "node7";
  // No next port.
  env["MASTER_PORT"] = "65535";
  EXPECT_NE(mustFail(env).find("MASTER_PORT"), std::string::npos);
  env["MASTER_PORT"] = "29500";
  // The secret stays required, and the error says how to pass it.
  env.erase("PCC_RDZV_SECRET");
  std::string m = mustFail(env);
  EXPECT_NE(m.find("PCC_RDZV_SECRET"), std::string::npos) << m;
  EXPECT_NE(m.find("before torchrun"), std::string::npos) << m;
  EXPECT_NE(m.find("tcp:node7:29501"), std::string::npos) << m;
  env["PCC_RDZV_SECRET"] = "short";
  EXPECT_NE(mustFail(env).find("not 5"), std::string::npos);
}

TEST(LaunchEnv, RankByHandNeedsARendezvous) {
  Environment env{{"RANK", "0"}, {"WORLD_SIZE", "2"}};
  std::string m = mustFail(env);
  EXPECT_NE(m.find("--rendezvous DIR"), std::string::npos) << m;
  EXPECT_NE(m.find("PCC_RUN_ID"), std::string::npos) << m;
  env["PCC_RUN_ID"] = "run7";
  LaunchEnv le = mustRead(env, "/tmp/rdzv");
  EXPECT_EQ(le.launcher, Launcher::kEnvironment);
  EXPECT_EQ(le.rendezvous.dir, "/tmp/rdzv/run7");
  EXPECT_EQ(le.localRank, -1);
  env["PCC_RENDEZVOUS"] = "/tmp/other";
  EXPECT_EQ(mustRead(env).rendezvous.dir, "/tmp/other/run7");
  EXPECT_EQ(mustRead(env, "/tmp/rdzv").rendezvous.dir, "/tmp/rdzv/run7");  // the flag first
}

TEST(LaunchEnv, OpenMpi) {
  Environment env{{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"PMIX_NAMESPACE", "ns1"}};
  LaunchEnv le = mustRead(env, "/r");
  EXPECT_EQ(le.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(le.rank, 2);
  EXPECT_EQ(le.localRank, 0);
  EXPECT_EQ(le.rendezvous.dir, "/r/ns1");
  EXPECT_EQ(le.rendezvousSource, "--rendezvous");
  // No rendezvous implied: the flag (or PCC_RENDEZVOUS) stays needed.
  EXPECT_NE(mustFail(env).find("--rendezvous"), std::string::npos);
  // tcp: the secret, and how to pass it under mpirun.
  std::string m = mustFail(env, "tcp:127.0.0.1:4000");
  EXPECT_NE(m.find("mpirun -x PCC_RDZV_SECRET"), std::string::npos) << m;
  env["PCC_RDZV_SECRET"] = kSecret;
  le = mustRead(env, "tcp:127.0.0.1:4000");
  EXPECT_EQ(le.rendezvous.tcp.port, 4000);
  EXPECT_EQ(le.rendezvous.runId, "ns1");
  // Half a set.
  EXPECT_NE(mustFail({{"OMPI_COMM_WORLD_RANK", "0"}}, "/r").find("OMPI_COMM_WORLD_SIZE is not set"),
            std::string::npos);
}

TEST(LaunchEnv, Slurm) {
  Environment env{{"SLURM_PROCID", "5"},     {"SLURM_NTASKS", "8"},
                  {"SLURM_LOCALID", "1"},     {"SLURM_JOB_NODELIST", "gpu[03-04,09],cpu1"},
                  {"PCC_RDZV_PORT", "29600"}, {"PCC_RDZV_SECRET", kSecret}};
  LaunchEnv le = mustRead(env);
  EXPECT_EQ(le.launcher, Launcher::kSlurm);
  EXPECT_EQ(launcherName(le.launcher), "srun");
  EXPECT_EQ(le.rank, 5);
  EXPECT_EQ(le.worldSize, 8);
  EXPECT_EQ(le.localRank, 1);
  EXPECT_EQ(le.rendezvous.tcp.str(), "gpu03:29600");
  EXPECT_EQ(le.rendezvousSource, "SLURM_JOB_NODELIST:PCC_RDZV_PORT");
  // The step's own node list first: its task 0 runs on its first node.
  env["SLURM_STEP_NODELIST"] = "gpu[04,09]";
  EXPECT_EQ(mustRead(env).rendezvous.tcp.host, "gpu04");
  // srun --resv-ports: its first port.
  env.erase("PCC_RDZV_PORT");
  env["SLURM_STEP_RESV_PORTS"] = "12000-12003";
  EXPECT_EQ(mustRead(env).rendezvous.tcp.port, 12000);
  env["SLURM_STEP_RESV_PORTS"] = "12005";
  EXPECT_EQ(mustRead(env).rendezvous.tcp.port, 12005);
  env["SLURM_STEP_RESV_PORTS"] = "x-1";
  EXPECT_NE(mustFail(env).find("SLURM_STEP_RESV_PORTS"), std::string::npos);
  // No port at all: say what to set.
  env.erase("SLURM_STEP_RESV_PORTS");
  std::string m = mustFail(env);
  EXPECT_NE(m.find("PCC_RDZV_PORT"), std::string::npos) << m;
  EXPECT_NE(m.find("--resv-ports"), std::string::npos) << m;
  env["PCC_RDZV_PORT"] = "29600";
  // A bad host list is an error naming the variable.
  env["SLURM_STEP_NODELIST"] = "gpu[04";
  EXPECT_NE(mustFail(env).find("SLURM_STEP_NODELIST"), std::string::npos);
  env.erase("SLURM_STEP_NODELIST");
  env.erase("PCC_RDZV_SECRET");
  m = mustFail(env);
  EXPECT_NE(m.find("before srun"), std::string::npos) << m;
  env["PCC_RDZV_SECRET"] = kSecret;
  // An explicit directory: the run id is the job and step.
  env["SLURM_JOB_ID"] = "812";
  env["SLURM_STEP_ID"] = "3";
  le = mustRead(env, "/shared/rdzv");
  EXPECT_EQ(le.rendezvous.dir, "/shared/rdzv/812.3");
}

TEST(LaunchEnv, Precedence) {
  Environment env{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                  {"SLURM_PROCID", "3"},         {"SLURM_NTASKS", "4"},
                  {"SLURM_JOB_NODELIST", "n1"},  {"PCC_RDZV_PORT", "29600"},
                  {"RANK", "5"},                 {"WORLD_SIZE", "6"},
                  {"MASTER_ADDR", "m"},          {"MASTER_PORT", "29500"},
                  {"PCC_RUN_ID", "x"},           {"PCC_RDZV_SECRET", kSecret}};
  // Open MPI over Slurm over RANK / WORLD_SIZE.
  LaunchEnv le = mustRead(env, "/d");
  EXPECT_EQ(le.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(le.rank, 1);
  env.erase("OMPI_COMM_WORLD_RANK");
  env.erase("OMPI_COMM_WORLD_SIZE");
  le = mustRead(env);
  EXPECT_EQ(le.launcher, Launcher::kSlurm);
  EXPECT_EQ(le.rank, 3);
  EXPECT_EQ(le.rendezvous.tcp.str(), "n1:29600");
  // An explicit rendezvous beats the launcher's.
  EXPECT_EQ(mustRead(env, "tcp:h9:7000").rendezvous.tcp.str(), "h9:7000");
  env["PCC_RENDEZVOUS"] = "tcp:h8:7001";
  EXPECT_EQ(mustRead(env).rendezvous.tcp.str(), "h8:7001");
  EXPECT_EQ(mustRead(env).rendezvousSource, "PCC_RENDEZVOUS");
  env.erase("PCC_RENDEZVOUS");
  // torchrun started this process (inside srun): its variables win.
  env["TORCHELASTIC_RUN_ID"] = "job1";
  le = mustRead(env);
  EXPECT_EQ(le.launcher, Launcher::kTorchrun);
  EXPECT_EQ(le.rank, 5);
  EXPECT_EQ(le.worldSize, 6);
  EXPECT_EQ(le.rendezvous.tcp.str(), "m:29600");  // PCC_RDZV_PORT, at MASTER_ADDR
  env.erase("SLURM_PROCID");
  env.erase("SLURM_NTASKS");
  env.erase("TORCHELASTIC_RUN_ID");
  EXPECT_EQ(mustRead(env).launcher, Launcher::kTorchrun);
  // LOCAL_RANK, where set, is the local rank under every launcher.
  env["LOCAL_RANK"] = "2";
  env["SLURM_PROCID"] = "0";
  env["SLURM_NTASKS"] = "4";
  env["SLURM_LOCALID"] = "3";
  EXPECT_EQ(mustRead(env).localRank, 2);
}

TEST(LaunchEnv, StrictNumbers) {
  for (const char* bad : {"01", "+1", "-0", " 1", "1 ", "", "1e3", "0x1", "99999999999999999999"}) {
    Environment env{{"RANK", bad}, {"WORLD_SIZE", "4"}, {"PCC_RUN_ID", "x"}};
    EXPECT_NE(mustFail(env, "/d").find("RANK"), std::string::npos) << bad;
    Environment slurm{{"SLURM_PROCID", "0"},  {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", bad},
                      {"PCC_RUN_ID", "x"}};
    EXPECT_NE(mustFail(slurm, "/d").find("SLURM_LOCALID"), std::string::npos) << bad;
  }
  EXPECT_NE(mustFail({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"PCC_RUN_ID", "x"}}, "/d").find("not below"),
            std::string::npos);
  EXPECT_NE(mustFail({{"RANK", "0"}, {"WORLD_SIZE", "0"}, {"PCC_RUN_ID", "x"}}, "/d").find("WORLD_SIZE"),
            std::string::npos);
  EXPECT_NE(mustFail({{"RANK", "0"}, {"WORLD_SIZE", "3000000000"}, {"PCC_RUN_ID", "x"}}, "/d").find("WORLD_SIZE"),
            std::string::npos);
  EXPECT_NE(mustFail({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n1"},
                      {"PCC_RDZV_PORT", "070000"}, {"PCC_RDZV_SECRET", kSecret}})
                .find("PCC_RDZV_PORT"),
            std::string::npos);
  EXPECT_NE(mustFail({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n1"},
                      {"PCC_RDZV_PORT", "70000"}, {"PCC_RDZV_SECRET", kSecret}})
                .find("PCC_RDZV_PORT"),
            std::string::npos);
}

TEST(LaunchEnv, ProcessEnvironment) {
  ::setenv("PCC_LAUNCH_ENV_TEST", "a=b", 1);
  Environment env = processEnvironment();
  EXPECT_EQ(env["PCC_LAUNCH_ENV_TEST"], "a=b");
  ::unsetenv("PCC_LAUNCH_ENV_TEST");
}

}  // namespace
}  // namespace pcc
