// Which process of a multi-process run this is, from the environment a job
// launcher gives every process it starts: torchrun, Open MPI's mpirun, Slurm's
// srun, or RANK / WORLD_SIZE set by hand. One function, environment in and a
// LaunchEnv out, so that every front end (pcc-run, a Python binding) reads the
// launchers the same way (docs/runtime.md#launchers).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/launcher.h"
#include "runtime/support/status.h"

namespace pcc {

/// A process environment: variable name -> value.
using Environment = std::map<std::string, std::string>;

/// \returns this process's environment (environ).
Environment processEnvironment();

/// The launcher whose variables named the rank.
enum class Launcher {
  kEnvironment,  ///< RANK / WORLD_SIZE without torchrun's MASTER_ADDR / MASTER_PORT
  kTorchrun,     ///< RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
  kOpenMpi,      ///< OMPI_COMM_WORLD_RANK / _SIZE
  kSlurm,        ///< SLURM_PROCID / SLURM_NTASKS
};

/// \returns "environment", "torchrun", "mpirun" or "srun".
std::string_view launcherName(Launcher l);

/// The shortest rendezvous secret taken: one that cannot be guessed.
constexpr size_t kMinSecretBytes = 16;

struct LaunchEnv {
  Launcher launcher = Launcher::kEnvironment;
  int rank = 0, worldSize = 1;
  /// The rank on its machine: LOCAL_RANK, else the launcher's own
  /// (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID); -1 when none is set.
  int localRank = -1;
  /// Where the ranks meet: a directory (dir = BASE/<run id>), or the TCP
  /// store rank 0 serves (tcp, with the secret every rank presents).
  Rendezvous rendezvous;
  /// Where the rendezvous came from: "--rendezvous", "PCC_RENDEZVOUS",
  /// "MASTER_ADDR:MASTER_PORT+1", "SLURM_STEP_NODELIST:PCC_RDZV_PORT", ...
  std::string rendezvousSource;
};

/// Reads the launch environment. The rank comes from, first to last:
///   1. torchrun's workers (TORCHELASTIC_RUN_ID set: torchrun started this very
///      process, even inside srun or an sbatch script): RANK, WORLD_SIZE;
///   2. Open MPI: OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE;
///   3. Slurm: SLURM_PROCID / SLURM_NTASKS (SLURM_NTASKS=1 without a
///      `rendezvousFlag` is a single-process run: the ranks run as threads);
///   4. RANK / WORLD_SIZE (torchrun when MASTER_ADDR and MASTER_PORT are set).
/// The rendezvous: `rendezvousFlag` (--rendezvous), else PCC_RENDEZVOUS, else
/// torchrun's tcp:MASTER_ADDR:(PCC_RDZV_PORT or MASTER_PORT + 1; MASTER_PORT
/// itself is torchrun's own store), else Slurm's tcp:FIRST_HOST:PORT (the
/// first host of SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST; PORT from
/// PCC_RDZV_PORT, else the first of SLURM_STEP_RESV_PORTS). A TCP rendezvous
/// needs PCC_RDZV_SECRET (kMinSecretBytes to kMaxSecretBytes bytes); a
/// directory one a run id: PCC_RUN_ID, else PMIX_NAMESPACE (mpirun), else
/// SLURM_JOB_ID.SLURM_STEP_ID (srun), else TORCHELASTIC_RUN_ID (torchrun).
/// Numbers are plain decimal digits without sign or leading zero.
/// \returns nullopt when no rank is named (the ranks run as threads), or an
/// invalid-input error naming the variable and what to set.
StatusOr<std::optional<LaunchEnv>> readLaunchEnv(const Environment& env, const std::string& rendezvousFlag = "");

/// \returns the first host of Slurm's compressed host list `list`
/// ("node[01-04,07],gpu5" -> "node01"; "rack[1-2]-n[3-4]" -> "rack1-n3"), the
/// whole list checked: hosts of letters, digits, '.', '-' and '_', brackets
/// holding comma-separated numbers or LOW-HIGH ranges (LOW <= HIGH), none
/// nested. \returns an invalid-input error naming `list` otherwise.
StatusOr<std::string> firstSlurmHost(const std::string& list);

}  // namespace pcc
