#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "runtime/executor.h"
#include "runtime/plan_convert.h"
#include "runtime/support/compare.h"

namespace pcc {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// \returns sequence `b`'s logits row of a [batch, 1, vocab] float32 tensor.
std::vector<float> rowOf(const Tensor& logits, int64_t b) {
  const int64_t v = logits.shape().back();
  const float* x = logits.data<float>() + b * v;
  return std::vector<float>(x, x + v);
}

/// \returns the largest |a - b| of two rows, and sets `ok` false where one
/// differs by more than atol + rtol * |b|.
double rowDiff(const std::vector<float>& a, const std::vector<float>& b, double rtol, double atol, bool& ok) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    worst = std::max(worst, d);
    if (!(d <= atol + rtol * std::fabs(static_cast<double>(b[i])))) ok = false;
  }
  return worst;
}

int64_t argmax(const std::vector<float>& row) {
  return static_cast<int64_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

/// Chooses a token from `row`: greedy, or sampled at the options' temperature
/// within top-k and top-p.
int64_t choose(const std::vector<float>& row, const GenerateOptions& g, std::mt19937_64& rng) {
  if (g.temperature <= 0 || g.topK == 1) return argmax(row);
  std::vector<int64_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row[a] > row[b]; });
  size_t keep = g.topK > 0 ? std::min<size_t>(static_cast<size_t>(g.topK), order.size()) : order.size();
  const double top = row[order[0]];
  std::vector<double> p(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((row[order[i]] - top) / g.temperature);
  if (g.topP < 1.0) {
    double acc = 0;
    size_t n = 0;
    while (n < keep) {
      acc += p[n++] / sum;
      if (acc >= g.topP) break;
    }
    keep = std::max<size_t>(n, 1);
    p.resize(keep);
    sum = std::accumulate(p.begin(), p.end(), 0.0);
  }
  double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  for (size_t i = 0; i < keep; ++i) {
    if (u < p[i]) return order[i];
    u -= p[i];
  }
  return order[keep - 1];
}

/// The export's own decode step on the reference kernels, its past kept here:
/// slot j of each past holds position j (j < max_context - 1); the step's new
/// key or value is the present's last slot, or its slot at the sequence's
/// position where the export writes it there (GenerationState.reference_new_at_position).
class ReferenceStepper {
 public:
  static StatusOr<ReferenceStepper> make(const LoadedPlan& p) {
    const plan::Generation& g = p.plan.generation();
    ReferenceStepper r;
    r.gen_ = &g;
    ASSIGN_OR_RETURN(r.exec_, Executor::create(p, p.plan.reference(), /*verifyChecksums=*/true, /*fastKernels=*/false));
    for (const plan::IoDesc& d : g.reference_inputs()) r.inputs_.push_back(Tensor::zeros(fromDesc(d.desc())));
    return r;
  }

  /// Runs one step; `step` holds the rank programs' inputs (Plan.inputs order)
  /// and `p` the plan. \returns the logits.
  StatusOr<Tensor> run(const plan::Plan& p, const std::vector<Tensor>& step, const std::vector<int64_t>& pos) {
    const plan::Generation& g = *gen_;
    const int64_t ctx = g.max_context();
    for (int i = 0; i < g.reference_inputs_size(); ++i) {
      const std::string& name = g.reference_inputs(i).name();
      for (int k = 0; k < p.inputs_size(); ++k)
        if (p.inputs(k).name() == name && k != g.attention_mask()) inputs_[i] = step[k];
    }
    // The mask over past slots and the new one: earlier positions, then the new token last.
    int maskIndex = -1;
    for (int i = 0; i < g.reference_inputs_size(); ++i)
      if (g.reference_inputs(i).name() == p.inputs(g.attention_mask()).name()) maskIndex = i;
    if (maskIndex < 0) return internalError("the reference program has no attention mask input");
    Tensor mask = Tensor::zeros(inputs_[maskIndex].type());
    int64_t* m = mask.mutableData<int64_t>();
    for (size_t b = 0; b < pos.size(); ++b) {
      for (int64_t j = 0; j < pos[b] && j < ctx - 1; ++j) m[b * ctx + j] = 1;
      m[b * ctx + ctx - 1] = 1;
    }
    inputs_[maskIndex] = mask;
    std::vector<OutputPiece> pieces;
    RETURN_IF_ERROR(exec_->run(inputs_, nullptr, &pieces).withContext("reference program"));
    std::vector<Tensor> outs(g.reference_outputs_size());
    for (OutputPiece& piece : pieces) outs[piece.index] = std::move(piece.tensor);
    // Keep each present's new slot as the past at the sequence's position.
    for (int s = 0; s < g.states_size(); ++s) {
      Tensor& past = inputs_[g.reference_past(s)];
      const Tensor& present = outs[g.reference_present(s)];
      const Dims& ps = past.shape();  // [batch, heads, ctx - 1, dim]
      const int64_t heads = ps[1], dim = ps[3];
      const size_t es = dtypeSize(past.dtype());
      Tensor next = past.clone();
      for (size_t b = 0; b < pos.size(); ++b) {
        if (pos[b] >= ctx - 1) continue;
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t slot = g.states(s).reference_new_at_position() ? pos[b] : ctx - 1;
          const char* src = static_cast<const char*>(present.raw()) +
                            static_cast<size_t>(((static_cast<int64_t>(b) * heads + h) * ctx + slot) * dim) * es;
          char* dst = static_cast<char*>(next.mutableData()) +
                      static_cast<size_t>(((static_cast<int64_t>(b) * heads + h) * (ctx - 1) + pos[b]) * dim) * es;
          std::memcpy(dst, src, static_cast<size_t>(dim) * es);
        }
      }
      past = std::move(next);
    }
    for (int i = 0; i < g.reference_outputs_size(); ++i)
      if (g.reference_outputs(i).name() == p.outputs(g.logits()).name()) return outs[i];
    return internalError("the reference program has no logits output");
  }

 private:
  const plan::Generation* gen_ = nullptr;
  std::unique_ptr<Executor> exec_;
  std::vector<Tensor> inputs_;
};

/// The ranks a generation runs on: every rank as a thread of this process
/// (RankSession), or this process's rank of many (ProcessRankSession).
class GenerationRanks {
 public:
  virtual ~GenerationRanks() = default;
  /// Runs the decode step; \returns its outputs where this process chooses
  /// the tokens (chooses()), none elsewhere.
  virtual StatusOr<std::vector<Tensor>> decode(const std::vector<Tensor>& inputs) = 0;
  /// Runs prefill program `k` (prefillPlansOf's order; only when the plan has
  /// them and they are used).
  virtual StatusOr<std::vector<Tensor>> prefill(int k, const std::vector<Tensor>& inputs) = 0;
  /// \returns the bytes the last run's communicators moved on this process's ranks.
  virtual int64_t commBytes() const = 0;
  /// Sums `v` over the processes (rank 0 tells the others the tokens it
  /// chose; each adds its ranks' bytes); nothing to do in one process.
  virtual Status sum(std::vector<int64_t>& v) { (void)v; return Status::OK(); }
  /// Whether this process has the logits and chooses the tokens.
  virtual bool chooses() const { return true; }
  /// With RunOptions::profile: this process's first rank's time per op in
  /// prefill program `k`, or with k = -1 the decode step.
  virtual std::map<std::string, RunResult::OpTime> profile(int k) const = 0;
};

/// Every rank as a thread of this process.
class ThreadRanks final : public GenerationRanks {
 public:
  ThreadRanks(RankSession& decode, const std::vector<std::unique_ptr<RankSession>>& prefills)
      : decode_(decode), prefills_(prefills) {}
  StatusOr<std::vector<Tensor>> decode(const std::vector<Tensor>& inputs) override { return decode_.run(inputs); }
  StatusOr<std::vector<Tensor>> prefill(int k, const std::vector<Tensor>& inputs) override {
    return prefills_[k]->run(inputs);
  }
  int64_t commBytes() const override { return decode_.lastRunCommBytes(); }
  std::map<std::string, RunResult::OpTime> profile(int k) const override {
    return k < 0 ? decode_.opProfile() : prefills_[k]->opProfile();
  }

 private:
  RankSession& decode_;
  const std::vector<std::unique_ptr<RankSession>>& prefills_;
};

/// This process's rank; the plan's other ranks generate in other processes.
class ProcessRanks final : public GenerationRanks {
 public:
  explicit ProcessRanks(ProcessRankSession& s) : s_(s) {}
  StatusOr<std::vector<Tensor>> decode(const std::vector<Tensor>& inputs) override { return s_.run(inputs); }
  StatusOr<std::vector<Tensor>> prefill(int k, const std::vector<Tensor>& inputs) override {
    return s_.runProgram(k + 1, inputs);
  }
  int64_t commBytes() const override { return s_.lastRunCommBytes(); }
  Status sum(std::vector<int64_t>& v) override {
    Tensor t = Tensor::fromVector<int64_t>(DType::kI64, {static_cast<int64_t>(v.size())}, v);
    RETURN_IF_ERROR(s_.sumOverRanks(t));
    std::copy(t.data<int64_t>(), t.data<int64_t>() + v.size(), v.begin());
    return Status::OK();
  }
  bool chooses() const override { return s_.rank() == 0; }
  std::map<std::string, RunResult::OpTime> profile(int k) const override { return s_.opProfile(k + 1); }

 private:
  ProcessRankSession& s_;
};

/// The generation itself, on started ranks (generateTokens).
StatusOr<GenerateResult> generateWith(const plan::Plan& plan, const plan::Generation& gen,
                                      const std::vector<std::vector<int64_t>>& prompts, size_t real,
                                      const GenerateOptions& g, GenerationRanks& ranks,
                                      const std::vector<LoadedPlan>& prefills, std::optional<ReferenceStepper>& ref);

/// The prompts of `g` checked against plan `p` and padded to its batch with
/// copies of the first. \returns them, or the invalid-input error.
StatusOr<std::vector<std::vector<int64_t>>> checkedPrompts(const LoadedPlan& p, const GenerateOptions& g);

/// Untimed runs first (RunOptions::warmup): a prefill and a decode step on
/// the same prompts, unchecked, then the generation (`prefills`: the prefill
/// programs it may use, none to feed the prompts through the decode step).
/// What the warm-ups leave in the cache is never read: every position a
/// sequence's attention reads is written again first.
StatusOr<GenerateResult> warmAndGenerate(const LoadedPlan& p, const GenerateOptions& g, const RunOptions& o,
                                         GenerationRanks& ranks, const std::vector<LoadedPlan>& prefills) {
  const plan::Plan& plan = p.plan;
  ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> prompts, checkedPrompts(p, g));
  std::optional<ReferenceStepper> ref;
  if (g.check && ranks.chooses()) {
    ASSIGN_OR_RETURN(ReferenceStepper r, ReferenceStepper::make(p));
    ref.emplace(std::move(r));
  }
  for (int w = 0; w < o.warmup; ++w) {
    GenerateOptions once = g;
    once.maxNewTokens = std::min(g.maxNewTokens, 2);
    once.check = false;
    once.onToken = nullptr;
    std::optional<ReferenceStepper> none;
    ASSIGN_OR_RETURN(GenerateResult ignored, generateWith(plan, plan.generation(), prompts, g.prompts.size(), once,
                                                          ranks, prefills, none));
    (void)ignored;
  }
  ASSIGN_OR_RETURN(GenerateResult res, generateWith(plan, plan.generation(), prompts, g.prompts.size(), g, ranks,
                                                    prefills, ref));
  if (o.profile) {
    for (size_t k = 0; k < prefills.size(); ++k)
      for (const auto& [op, t] : ranks.profile(static_cast<int>(k))) {
        RunResult::OpTime& sum = res.prefillProfile[op];
        sum.seconds += t.seconds;
        sum.calls += t.calls;
      }
    res.decodeProfile = ranks.profile(-1);
  }
  return res;
}

}  // namespace

std::vector<LoadedPlan> prefillPlansOf(const LoadedPlan& p) {
  std::vector<LoadedPlan> out;
  if (!p.plan.has_generation() || !p.plan.generation().has_prefill()) return out;
  const int shorter = p.plan.generation().shorter_prefills_size();
  for (int k = 0; k <= shorter; ++k) {
    LoadedPlan v;
    v.plan = prefillView(p.plan, k < shorter ? k : -1);
    v.dir = p.dir;
    v.files = p.files;
    v.kernels = p.kernels;
    out.push_back(std::move(v));
  }
  return out;
}

int64_t planCommBytes(const plan::Plan& plan) {
  int64_t n = 0;
  for (const plan::RankProgram& r : plan.ranks()) {
    std::map<int, int64_t> bytes;
    for (const plan::Buffer& b : r.buffers()) bytes[b.id()] = static_cast<int64_t>(fromDesc(b.desc()).bytes());
    for (const plan::Instruction& ins : r.instructions()) {
      using K = plan::Instruction;
      switch (ins.kind()) {
        case K::ALL_REDUCE: case K::ALL_GATHER: case K::REDUCE_SCATTER: case K::ALL_TO_ALL: case K::SEND:
          n += bytes[ins.inputs(0)];
          break;
        case K::RECV: n += bytes[ins.outputs(0)]; break;
        default: break;
      }
    }
  }
  return n;
}

StatusOr<GenerateResult> generateTokens(const LoadedPlan& p, const GenerateOptions& g, const RunOptions& o) {
  RETURN_IF_ERROR(checkedPrompts(p, g).status());
  ASSIGN_OR_RETURN(std::unique_ptr<RankSession> session, RankSession::start(p, o));
  // Each prefill program: a session of its own on the same ranks' cache.
  const std::vector<LoadedPlan> prefills = g.prefill ? prefillPlansOf(p) : std::vector<LoadedPlan>{};
  std::vector<std::unique_ptr<RankSession>> sessions;
  for (const LoadedPlan& pre : prefills) {
    ASSIGN_OR_RETURN(std::unique_ptr<RankSession> s, RankSession::start(pre, o));
    RETURN_IF_ERROR(s->shareStates(*session));
    sessions.push_back(std::move(s));
  }
  ThreadRanks ranks(*session, sessions);
  return warmAndGenerate(p, g, o, ranks, prefills);
}

StatusOr<GenerateResult> generateTokensRank(const LoadedPlan& p, const GenerateOptions& g, const RunOptions& o,
                                            int rank, const Rendezvous& rendezvous) {
  RETURN_IF_ERROR(checkedPrompts(p, g).status());
  // The decode step and the prefill programs in one session of this rank, over one rendezvous.
  const std::vector<LoadedPlan> prefills = g.prefill ? prefillPlansOf(p) : std::vector<LoadedPlan>{};
  std::vector<const LoadedPlan*> more;
  for (const LoadedPlan& pre : prefills) more.push_back(&pre);
  ASSIGN_OR_RETURN(std::unique_ptr<ProcessRankSession> session,
                   ProcessRankSession::start(p, more, o, rank, rendezvous));
  return generateOn(*session, p, prefills, g, o);
}

StatusOr<GenerateResult> generateOn(ProcessRankSession& session, const LoadedPlan& p,
                                    const std::vector<LoadedPlan>& prefills, const GenerateOptions& g,
                                    const RunOptions& o) {
  // Every process has the same options, so every one decides alike to use the prefill.
  const bool usePrefill =
      g.prefill && !prefills.empty() && session.programs() == 1 + static_cast<int>(prefills.size());
  ProcessRanks ranks(session);
  return warmAndGenerate(p, g, o, ranks, usePrefill ? prefills : std::vector<LoadedPlan>{});
}

namespace {

StatusOr<std::vector<std::vector<int64_t>>> checkedPrompts(const LoadedPlan& p, const GenerateOptions& g) {
  const plan::Plan& plan = p.plan;
  if (!plan.has_generation() || plan.generation().states_size() == 0)
    return invalidInput(p.dir, ": the plan does not generate (compile a decoder export with past_key_values inputs "
                        "and present outputs)");
  const plan::Generation& gen = plan.generation();
  const int64_t batch = gen.batch(), ctx = gen.max_context();
  if (g.prompts.empty()) return invalidInput("--generate needs at least one prompt (--prompt-ids)");
  if (static_cast<int64_t>(g.prompts.size()) > batch)
    return invalidInput(g.prompts.size(), " prompts, but the plan decodes ", batch,
                        " sequence(s) per step (compile with --batch ", g.prompts.size(), ")");
  if (g.maxNewTokens < 1) return invalidInput("--generate N needs N >= 1");
  const TensorType logitsType = fromDesc(plan.outputs(gen.logits()).desc());
  if (logitsType.dtype != DType::kF32 || logitsType.rank() != 3 || logitsType.shape[1] != 1)
    return invalidInput(p.dir, ": generation needs float32 logits [batch, 1, vocab], the plan's are ",
                        logitsType.str());
  const int64_t vocab = logitsType.shape[2];
  std::vector<std::vector<int64_t>> prompts = g.prompts;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) return invalidInput("prompt ", i, " is empty");
    if (static_cast<int64_t>(prompts[i].size()) >= ctx)
      return invalidInput("prompt ", i, " has ", prompts[i].size(), " tokens; the plan's context holds ", ctx,
                          " positions (--max-context at compile time), so at most ", ctx - 1, " leave room for one more");
    for (int64_t t : prompts[i])
      if (t < 0 || t >= vocab)
        return invalidInput("prompt ", i, ": token id ", t, " is outside the vocabulary [0, ", vocab, ")");
  }
  while (static_cast<int64_t>(prompts.size()) < batch) prompts.push_back(prompts.front());
  return prompts;
}

StatusOr<GenerateResult> generateWith(const plan::Plan& plan, const plan::Generation& gen,
                                      const std::vector<std::vector<int64_t>>& prompts, size_t real,
                                      const GenerateOptions& g, GenerationRanks& ranks,
                                      const std::vector<LoadedPlan>& prefills, std::optional<ReferenceStepper>& ref) {
  const int64_t batch = gen.batch(), ctx = gen.max_context();
  const bool chooses = ranks.chooses();
  // One generator per sequence, seeded by --seed and its index: a sequence's
  // samples depend on nothing else (its neighbours, the mesh, prefill or not).
  const bool greedy = g.temperature <= 0 || g.topK == 1;
  // The check's absolute tolerance for logits `want`: atol, or the share
  // atolOfMax of their largest magnitude.
  auto atolFor = [&](const std::vector<float>& want) {
    double m = 0;
    for (float x : want)
      if (std::isfinite(x)) m = std::max(m, std::fabs(static_cast<double>(x)));
    return std::max(g.atol, g.atolOfMax * m);
  };
  std::vector<std::mt19937_64> rng(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch && !greedy; ++b) {
    std::seed_seq seq{static_cast<uint32_t>(g.seed), static_cast<uint32_t>(g.seed >> 32), static_cast<uint32_t>(b)};
    rng[static_cast<size_t>(b)].seed(seq);
  }
  GenerateResult res;
  res.planCommBytes = planCommBytes(plan);
  res.tokens.assign(real, {});
  std::vector<int64_t> pos(batch, 0);     // the position each sequence writes next
  std::vector<int64_t> last(batch, 0);    // its latest new token
  std::vector<bool> done(batch, false);
  for (size_t b = real; b < static_cast<size_t>(batch); ++b) done[b] = true;
  std::vector<Tensor> inputs(plan.inputs_size());
  for (int k = 0; k < plan.inputs_size(); ++k) inputs[k] = Tensor::zeros(fromDesc(plan.inputs(k).desc()));
  const Clock::time_point t0 = Clock::now();
  Clock::time_point firstAt{};
  bool first = false;
  // Takes sequence b's new token t (after its prompt).
  auto take = [&](int64_t b, int64_t t) {
    last[b] = t;
    res.tokens[b].push_back(t);
    if (first) ++res.decodeTokens;
    if (g.onToken) g.onToken(static_cast<int>(b), t);
    const bool eos = g.stopAtEos && std::find(gen.eos_token_ids().begin(), gen.eos_token_ids().end(), t) !=
                                        gen.eos_token_ids().end();
    if (eos || static_cast<int>(res.tokens[b].size()) >= g.maxNewTokens) done[b] = true;
  };
  // Every process takes the tokens the choosing one chose (`chosen`: per
  // sequence, its token + 1, or 0 when it takes none this run), and adds up
  // its ranks' communicators' bytes (chosen[batch]). \returns all ranks' bytes.
  auto settle = [&](std::vector<int64_t>& chosen) -> StatusOr<int64_t> {
    chosen[batch] = ranks.commBytes();
    RETURN_IF_ERROR(ranks.sum(chosen));
    for (int64_t b = 0; b < batch; ++b)
      if (chosen[b] > 0) take(b, chosen[b] - 1);
    return chosen[batch];
  };
  auto noteFirst = [&] {
    if (!first && std::all_of(res.tokens.begin(), res.tokens.end(), [](const auto& v) { return !v.empty(); })) {
      first = true;
      firstAt = Clock::now();
      res.firstTokenSeconds = since(t0);
    }
  };
  if (!prefills.empty()) {
    // One run of the shortest prefill program that holds the longest prompt
    // (else the longest program) writes up to its max_prompt tokens of every
    // prompt into the cache; a longer prompt goes on through the decode step.
    size_t longestPrompt = 0;
    for (const std::vector<int64_t>& pr : prompts) longestPrompt = std::max(longestPrompt, pr.size());
    // Program k's description (prefillPlansOf's order): shorter_prefills(k), the last one prefill.
    auto described = [&](int k) -> const plan::Prefill& {
      return prefillOf(gen, k < gen.shorter_prefills_size() ? k : -1);
    };
    int which = static_cast<int>(prefills.size()) - 1;
    for (int k = 0; k < which; ++k)
      if (described(k).max_prompt() >= static_cast<int64_t>(longestPrompt)) {
        which = k;
        break;
      }
    const plan::Plan& pv = prefills[which].plan;
    const plan::Prefill& pre = described(which);
    const int64_t P = pre.max_prompt();
    res.prefillLength = P;
    std::vector<Tensor> pin(pv.inputs_size());
    for (int k = 0; k < pv.inputs_size(); ++k) pin[k] = Tensor::zeros(fromDesc(pv.inputs(k).desc()));
    const int64_t maskLen = pin[pre.attention_mask()].shape().back();
    std::vector<int64_t> len(batch);
    for (int64_t b = 0; b < batch; ++b) {
      len[b] = std::min<int64_t>(static_cast<int64_t>(prompts[b].size()), P);
      for (int64_t j = 0; j < P; ++j) {
        pin[pre.input_ids()].mutableData<int64_t>()[b * P + j] = j < len[b] ? prompts[b][j] : 0;
        if (pre.position_ids() >= 0) pin[pre.position_ids()].mutableData<int64_t>()[b * P + j] = j;
      }
      if (pre.logits_last_only()) {
        Tensor& at = pin[pre.last_position()];
        const int64_t per = at.numel() / batch;
        std::fill_n(at.mutableData<int64_t>() + b * per, per, len[b] - 1);
      }
      int64_t* m = pin[pre.attention_mask()].mutableData<int64_t>() + b * maskLen;
      if (pre.mask_whole_window())
        for (int64_t j = 0; j < P; ++j) m[j] = 1;
      else
        for (int64_t j = 0; j < len[b]; ++j) m[pre.mask_offset() + j] = 1;
    }
    ASSIGN_OR_RETURN(std::vector<Tensor> outs, ranks.prefill(which, pin));
    ++res.prefillRuns;
    const Tensor logits = chooses ? outs[pre.logits()] : Tensor();
    const int64_t V = chooses ? logits.shape().back() : 0;
    auto prefillRow = [&](int64_t b) {
      const float* x = logits.data<float>() + (pre.logits_last_only() ? b : b * P + len[b] - 1) * V;
      return std::vector<float>(x, x + V);
    };
    if (ref) {
      // The export's own step over each prompt position, compared where the
      // prefill chose from: each sequence's last position it wrote.
      const int64_t longest = *std::max_element(len.begin(), len.end());
      std::vector<std::vector<float>> want(batch);
      for (int64_t t = 0; t < longest; ++t) {
        std::vector<int64_t> at(batch);
        for (int64_t b = 0; b < batch; ++b) {
          at[b] = std::min(t, len[b] - 1);
          inputs[gen.input_ids()].mutableData<int64_t>()[b] = prompts[b][at[b]];
          if (gen.position_ids() >= 0) inputs[gen.position_ids()].mutableData<int64_t>()[b] = at[b];
        }
        ASSIGN_OR_RETURN(Tensor w, ref->run(plan, inputs, at));
        for (int64_t b = 0; b < batch; ++b)
          if (at[b] == t && t == len[b] - 1) want[b] = rowOf(w, b);
      }
      for (size_t b = 0; b < real && res.mismatch.empty(); ++b) {
        bool ok = true;
        const std::vector<float> got = prefillRow(static_cast<int64_t>(b));
        res.maxLogitDiff = std::max(res.maxLogitDiff, rowDiff(got, want[b], g.rtol, atolFor(want[b]), ok));
        if (!ok) {
          res.mismatch = strCat("prefill: sequence ", b, ": logits at prompt position ", len[b] - 1,
                                " differ from the export's own decode step");
        } else if (greedy && len[b] == static_cast<int64_t>(prompts[b].size())) {
          ++res.comparedTokens;
          if (argmax(got) != argmax(want[b])) {
            ++res.differentTokens;
            if (g.tokensMustAgree)
              res.mismatch = strCat("prefill: sequence ", b, " chooses token ", argmax(got),
                                    ", the export's own step ", argmax(want[b]));
          }
        }
      }
      ++res.checkedSteps;
    }
    std::vector<int64_t> chosen(batch + 1, 0);
    for (int64_t b = 0; b < batch; ++b) {
      pos[b] = len[b];
      if (static_cast<size_t>(b) < real) res.prefillTokens += len[b];
      if (done[b] || len[b] < static_cast<int64_t>(prompts[b].size()) || !chooses) continue;
      chosen[b] = choose(prefillRow(b), g, rng[b]) + 1;
    }
    RETURN_IF_ERROR(settle(chosen).status());
    noteFirst();
  }
  auto allDone = [&] { return std::all_of(done.begin(), done.begin() + static_cast<long>(real), [](bool d) { return d; }); };
  while (!allDone()) {
    // This step's token of each sequence: its prompt's, then its latest new one.
    for (int64_t b = 0; b < batch; ++b) {
      if (pos[b] >= ctx) {
        if (!done[b] && static_cast<size_t>(b) < real)
          res.overflow = strCat("sequence ", b, " reached the context of ", ctx,
                                " positions (--max-context at compile time) after ", res.tokens[b].size(),
                                " new tokens");
        done[b] = true;
      }
    }
    if (!res.overflow.empty() || allDone()) break;
    std::vector<int64_t> stepPos(batch);
    for (int64_t b = 0; b < batch; ++b) stepPos[b] = std::min(pos[b], ctx - 1);
    Tensor& ids = inputs[gen.input_ids()];
    Tensor mask = Tensor::zeros(inputs[gen.attention_mask()].type());
    Tensor cpos = Tensor::zeros(inputs[gen.cache_position()].type());
    Tensor posIds = gen.position_ids() >= 0 ? Tensor::zeros(inputs[gen.position_ids()].type()) : Tensor();
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<int64_t>& pr = prompts[b];
      const int64_t at = stepPos[b];
      ids.mutableData<int64_t>()[b] = at < static_cast<int64_t>(pr.size()) ? pr[at] : last[b];
      for (int64_t j = 0; j <= at; ++j) mask.mutableData<int64_t>()[b * ctx + j] = 1;
      cpos.mutableData<int64_t>()[b] = at;
      if (posIds.defined()) posIds.mutableData<int64_t>()[b] = at;
    }
    inputs[gen.attention_mask()] = mask;
    inputs[gen.cache_position()] = cpos;
    if (posIds.defined()) inputs[gen.position_ids()] = posIds;
    ASSIGN_OR_RETURN(std::vector<Tensor> outs, ranks.decode(inputs));
    const Tensor logits = chooses ? outs[gen.logits()] : Tensor();
    if (ref) {
      ASSIGN_OR_RETURN(Tensor want, ref->run(plan, inputs, stepPos));
      const std::vector<float> all(want.data<float>(), want.data<float>() + want.numel());
      Diff d = compareTensors(logits, want, g.rtol, atolFor(all));
      res.maxLogitDiff = std::max(res.maxLogitDiff, d.maxAbs);
      ++res.checkedSteps;
      if (!d.ok && res.mismatch.empty())
        res.mismatch = strCat("step ", res.steps, ": logits differ from the export's own decode step (",
                              d.where, ")");
      for (size_t b = 0; greedy && b < real && res.mismatch.empty(); ++b) {
        if (done[b] || stepPos[b] + 1 < static_cast<int64_t>(prompts[b].size())) continue;
        ++res.comparedTokens;
        if (argmax(rowOf(logits, static_cast<int64_t>(b))) == argmax(rowOf(want, static_cast<int64_t>(b)))) continue;
        ++res.differentTokens;
        if (g.tokensMustAgree)
          res.mismatch = strCat("step ", res.steps, ": sequence ", b, " chooses token ",
                                argmax(rowOf(logits, static_cast<int64_t>(b))), ", the export's own step ",
                                argmax(rowOf(want, static_cast<int64_t>(b))));
      }
    }
    std::vector<int64_t> chosen(batch + 1, 0);
    for (int64_t b = 0; b < batch; ++b) {
      const bool inPrompt = pos[b] + 1 < static_cast<int64_t>(prompts[b].size());
      ++pos[b];
      if (done[b] || inPrompt || !chooses) continue;
      chosen[b] = choose(rowOf(logits, b), g, rng[b]) + 1;
    }
    ASSIGN_OR_RETURN(const int64_t moved, settle(chosen));
    res.commBytesMin = res.steps == 0 ? moved : std::min(res.commBytesMin, moved);
    res.commBytesMax = std::max(res.commBytesMax, moved);
    ++res.steps;
    noteFirst();
  }
  if (first) res.decodeSeconds = std::chrono::duration<double>(Clock::now() - firstAt).count();
  return res;
}

}  // namespace

}  // namespace pcc
