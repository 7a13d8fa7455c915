#include "runtime/input_pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "runtime/plan_convert.h"
#include "runtime/tensor_slice.h"

namespace pcc {

namespace {
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// \returns how many tensors binding `b` of `prog` takes per batch: one per
/// micro-batch when its slice moves with the micro-batch, else one.
int runsOf(const plan::RankProgram& prog, const plan::IoBinding& b) {
  return b.per_microbatch() ? std::max(1, prog.microbatches()) : 1;
}
}  // namespace

StatusOr<std::unique_ptr<InputPipeline>> InputPipeline::start(const plan::Plan& plan,
                                                              std::vector<const plan::RankProgram*> progs,
                                                              BatchReader read, StagingAllocator allocate,
                                                              PipelineOptions options) {
  if (options.batches < 1 || options.prefetch < 0)
    return invalidInput("the input pipeline needs batches >= 1 and prefetch >= 0");
  std::unique_ptr<InputPipeline> p(new InputPipeline(plan, std::move(progs), std::move(read), options));
  RETURN_IF_ERROR(p->allocate(allocate));
  p->reader_ = std::thread([raw = p.get()] { raw->readerLoop(); });
  return p;
}

InputPipeline::~InputPipeline() {
  cancel();
  stop();
}

Status InputPipeline::allocate(const StagingAllocator& allocate) {
  slots_.resize(static_cast<size_t>(options_.prefetch) + 1);
  auto add = [&](const TensorType& t) -> StatusOr<Tensor> {
    ASSIGN_OR_RETURN(Tensor s, allocate(t));
    if (s.type() != t) return internalError("staging buffer allocated as ", s.type().str(), ", asked ", t.str());
    stagingBytes_ += static_cast<int64_t>(s.nbytes());
    auto lo = reinterpret_cast<uintptr_t>(s.raw());
    ranges_.push_back({lo, lo + s.nbytes()});
    return s;
  };
  for (Slot& slot : slots_) {
    slot.whole.assign(plan_.inputs_size(), Tensor());
    for (const plan::RankProgram* prog : progs_) {
      RankSlices mine;
      for (const plan::IoBinding& b : prog->inputs()) {
        std::string ctx = strCat("rank ", prog->rank(), ": input binding of model input ", b.index());
        if (b.index() < 0 || b.index() >= plan_.inputs_size()) return invalidInput(ctx, ": no such model input");
        std::vector<Tensor> runs;
        if (b.split_dim() == -1) {
          // A whole input: one staging copy per slot, shared by every rank binding it.
          Tensor& w = slot.whole[b.index()];
          if (!w.defined()) {
            ASSIGN_OR_RETURN(w, add(fromDesc(plan_.inputs(b.index()).desc())));
          }
          runs.push_back(w);
        } else {
          if (b.buffer() < 0 || b.buffer() >= prog->buffers_size())
            return invalidInput(ctx, ": buffer ", b.buffer(), " is not one of the rank's");
          TensorType t = fromDesc(prog->buffers(b.buffer()).desc());
          for (int m = 0; m < runsOf(*prog, b); ++m) {
            ASSIGN_OR_RETURN(Tensor s, add(t));
            runs.push_back(std::move(s));
          }
        }
        mine.push_back(std::move(runs));
      }
      slot.ranks.push_back(std::move(mine));
    }
  }
  return Status::OK();
}

void InputPipeline::readerLoop() {
  const int n = static_cast<int>(slots_.size());
  for (int k = 0; k < options_.batches; ++k) {
    Slot& slot = slots_[k % n];
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return cancelled_ || !slot.ready; });
      if (cancelled_) return;
    }
    Clock::time_point t0 = Clock::now();
    Status st = fill(k, slot);
    const double took = since(t0);
    std::lock_guard<std::mutex> lock(mu_);
    if (!st.ok()) {
      error_ = st;
      errorBatch_ = k;
      cv_.notify_all();
      return;
    }
    readSeconds_.push_back(took);
    slot.batch = k;
    slot.ready = true;
    slot.pending = static_cast<int>(progs_.size());
    cv_.notify_all();
  }
}

Status InputPipeline::fill(int k, Slot& slot) {
  if (options_.readDelayMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(options_.readDelayMs));
  const std::string batch = strCat("batch ", k);
  StatusOr<BatchInputs> got = read_(k);
  if (!got.ok()) return got.status().withContext(batch);
  const BatchInputs& in = *got;
  auto source = [&](size_t i) { return i < in.sources.size() ? in.sources[i] : strCat("input ", i); };
  if (in.tensors.size() != static_cast<size_t>(plan_.inputs_size()))
    return invalidInput(batch, ": ", in.tensors.size(), " inputs, the plan takes ", plan_.inputs_size());
  for (int i = 0; i < plan_.inputs_size(); ++i) {
    TensorType want = fromDesc(plan_.inputs(i).desc());
    if (in.tensors[i].type() != want)
      return invalidInput(source(i), ": ", batch, ", input ", i, " '", plan_.inputs(i).name(), "': the plan expects ",
                          want.str(), ", got ", in.tensors[i].type().str());
  }
  for (int i = 0; i < plan_.inputs_size(); ++i) {
    Tensor& w = slot.whole[i];
    if (w.defined() && w.nbytes()) std::memcpy(w.mutableData(), in.tensors[i].raw(), w.nbytes());
  }
  for (size_t r = 0; r < progs_.size(); ++r) {
    const plan::RankProgram& prog = *progs_[r];
    for (int i = 0; i < prog.inputs_size(); ++i) {
      const plan::IoBinding& b = prog.inputs(i);
      if (b.split_dim() == -1) continue;
      std::vector<Tensor>& runs = slot.ranks[r][i];
      for (size_t m = 0; m < runs.size(); ++m) {
        const int64_t offset = b.offset() + static_cast<int64_t>(m) * b.length();
        Status st = copyAlong(in.tensors[b.index()], b.split_dim(), offset, runs[m]);
        if (!st.ok())
          return st.withContext(strCat(source(b.index()), ": ", batch, ", rank ", prog.rank(), ", input ", b.index()));
      }
    }
  }
  return Status::OK();
}

int InputPipeline::indexOf(int rank) const {
  for (size_t i = 0; i < progs_.size(); ++i)
    if (progs_[i]->rank() == rank) return static_cast<int>(i);
  return -1;
}

StatusOr<const RankSlices*> InputPipeline::acquire(int batch, int rank, double* waitSeconds) {
  const int r = indexOf(rank);
  if (r < 0) return internalError("rank ", rank, " has no place in the input pipeline");
  Slot& slot = slots_[batch % slots_.size()];
  Clock::time_point t0 = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    return cancelled_ || (slot.ready && slot.batch == batch) || (!error_.ok() && errorBatch_ <= batch);
  });
  if (waitSeconds) *waitSeconds = since(t0);
  if (cancelled_)
    return environmentError("rank ", rank, ": batch ", batch, ": the input pipeline stopped (another rank failed)");
  if (slot.ready && slot.batch == batch) return &slot.ranks[r];
  return error_;
}

void InputPipeline::release(int batch, int /*rank*/) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slots_[batch % slots_.size()];
  if (slot.batch != batch || !slot.ready) return;
  if (--slot.pending <= 0) {
    slot.ready = false;
    cv_.notify_all();
  }
}

void InputPipeline::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  cv_.notify_all();
}

void InputPipeline::stop() {
  if (reader_.joinable()) reader_.join();
}

Status InputPipeline::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::vector<double> InputPipeline::readSeconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return readSeconds_;
}

bool InputPipeline::holds(const Tensor& t) const {
  auto lo = reinterpret_cast<uintptr_t>(t.raw());
  auto hi = lo + t.nbytes();
  for (const auto& range : ranges_)
    if (lo < range.second && range.first < hi) return true;
  return false;
}

}  // namespace pcc
