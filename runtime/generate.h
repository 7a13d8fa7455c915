// Generating tokens with a generation plan (Plan.generation,
// docs/generation.md): the decode-step program runs once per position, its
// KV cache kept on the ranks as session state; the prompts are written by the
// prefill program in one run (or fed one token per step), then each step's
// chosen token is the next step's input.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/launcher.h"
#include "runtime/plan_io.h"
#include "runtime/support/status.h"

namespace pcc {

struct GenerateOptions {
  /// Token ids of each sequence's prompt (at most Plan.generation.batch; fewer
  /// fill the batch with copies of the first, whose results are dropped).
  std::vector<std::vector<int64_t>> prompts;
  /// New tokens per sequence at most.
  int maxNewTokens = 16;
  /// Sampling: temperature 0 (or top_k 1) is greedy.
  double temperature = 0;
  int topK = 0;        ///< 0: no cut
  double topP = 1.0;   ///< 1: no cut
  uint64_t seed = 0;
  /// Stop a sequence at one of Plan.generation.eos_token_ids (when it has any).
  bool stopAtEos = true;
  /// Write the prompts with the plan's prefill program when it has one (the
  /// shortest of Generation.shorter_prefills and Generation.prefill that holds
  /// the longest prompt); false: through the decode step, one token per run.
  bool prefill = true;
  /// Also run Plan.reference, the export's own decode step, with its past and
  /// present tensors kept here, and compare every step's logits (and, when
  /// greedy, the tokens).
  bool check = false;
  double rtol = 1e-3, atol = 1e-4;
  /// With check: the absolute tolerance is at least this share of the
  /// largest |logit| the export's step gives (a --precision plan's rounding
  /// scales with its values); 0: atol alone.
  double atolOfMax = 0;
  /// With check and greedy choice: a token other than the export's step's
  /// fails the check; false (a --precision plan, whose logits differ within
  /// its tolerance, may break a near tie): it is counted instead.
  bool tokensMustAgree = true;
  /// Told each sequence's new token as it is chosen (sequence, token).
  std::function<void(int, int64_t)> onToken;
};

struct GenerateResult {
  /// New tokens per prompt (the padding sequences left out).
  std::vector<std::vector<int64_t>> tokens;
  int steps = 0;                ///< decode-step runs
  int prefillRuns = 0;          ///< prefill-program runs (0 or 1)
  int64_t prefillTokens = 0;    ///< prompt tokens they wrote, all sequences
  int64_t prefillLength = 0;    ///< the max_prompt of the prefill program that ran
  double firstTokenSeconds = 0; ///< until every sequence had its first new token
  double decodeSeconds = 0;     ///< the steps after that
  int64_t decodeTokens = 0;     ///< new tokens chosen in those steps
  /// The communicators' bytes per decode step, all ranks together (the
  /// fewest and the most over the steps), and what the plan's collectives
  /// and transfers move per run (RankSession::lastRunCommBytes).
  int64_t commBytesMin = 0, commBytesMax = 0, planCommBytes = 0;
  /// Set when a sequence reached Plan.generation.max_context before it ended.
  std::string overflow;
  /// With check: the steps compared, the largest logit difference, and the
  /// first mismatch ("" when none).
  int checkedSteps = 0;
  double maxLogitDiff = 0;
  std::string mismatch;
  /// With check and greedy choice: the choices compared with the export's
  /// step's, and those that differ (GenerateOptions::tokensMustAgree false).
  int comparedTokens = 0, differentTokens = 0;
  /// With RunOptions::profile: rank 0's seconds and calls per op and kernel
  /// provider in the prefill program and in the decode step, over every run
  /// (the warm-up generations included).
  std::map<std::string, RunResult::OpTime> prefillProfile, decodeProfile;
};

/// \returns the bytes the collectives, sends and receives of `plan`'s rank
/// programs move in one run, summed over the ranks: each collective's input,
/// each send's and each receive's buffer.
int64_t planCommBytes(const plan::Plan& plan);

/// Generates on every rank of `p` as threads of this process (RankSession).
/// \returns the tokens and times; an invalid-input error for a plan that does
/// not generate, a prompt token outside the vocabulary, too many prompts or a
/// prompt that does not fit the context.
StatusOr<GenerateResult> generateTokens(const LoadedPlan& p, const GenerateOptions& g, const RunOptions& o);

/// Generates on rank `rank` of `p` in this process, its other ranks running
/// in other processes that call this with the same options and meet through
/// `rendezvous` (ProcessRankSession: the decode step and the prefill program
/// in one session). Rank 0 has the logits: it chooses each step's tokens (and
/// runs --check's reference) and tells the other processes, with one sum over
/// the ranks per step, which also adds up their communicators' bytes.
/// \returns on every rank the tokens; the times, the bytes and the check on rank 0.
StatusOr<GenerateResult> generateTokensRank(const LoadedPlan& p, const GenerateOptions& g, const RunOptions& o,
                                            int rank, const Rendezvous& rendezvous);

/// The same on a started session of this rank (its peers call this too, with
/// the same options): `session` runs `p`'s decode step and, as its programs
/// 1, 2, ..., `prefills` (prefillPlansOf(p); none, or a session without
/// them: the prompts go through the decode step). The cache the session
/// holds from an earlier generation is never read.
StatusOr<GenerateResult> generateOn(ProcessRankSession& session, const LoadedPlan& p,
                                    const std::vector<LoadedPlan>& prefills, const GenerateOptions& g,
                                    const RunOptions& o);

/// \returns the prefill programs of generation plan `p`, each as a plan of
/// its own (prefillView) sharing `p`'s files and kernels, by max_prompt
/// ascending (Generation.shorter_prefills, then Generation.prefill); none
/// when the plan has no prefill program.
std::vector<LoadedPlan> prefillPlansOf(const LoadedPlan& p);

}  // namespace pcc
