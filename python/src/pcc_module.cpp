// pcc._pcc: the compiled half of the Python package (docs/python.md). It
// compiles models through the same option table as the `pcc` tool
// (tools/compile_flags.h), reads plan bundles, and runs them with numpy
// arrays (or any DLPack tensor) on CPU ranks as threads of this process, or
// as one process per rank under a launcher (runtime/launch_env.h). The
// pure-Python layer (python/pcc/__init__.py) is the documented interface;
// every failure reaches it as a StatusError, which it turns into pcc.Error's
// subclasses.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <cstring>
#include <memory>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "compiler/driver.h"
#include "report/graphviz.h"
#include "report/plan_costs.h"
#include "report/plan_dot.h"
#include "report/plan_html.h"
#include "report/plan_report.h"
#include "runtime/generate.h"
#include "runtime/launch_env.h"
#include "runtime/launcher.h"
#include "runtime/plan_convert.h"
#include "runtime/plan_io.h"
#include "tools/cli.h"
#include "tools/compile_flags.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace pcc {
namespace {

/// A failed Status on its way to Python: the translator registered below
/// raises the pcc.Error subclass the Python layer picks for its code.
struct StatusError {
  int code;
  std::string message;
};

[[noreturn]] void raise(const Status& s) { throw StatusError{static_cast<int>(s.code()), s.message()}; }

template <typename T>
T valueOr(StatusOr<T> v) {
  if (!v.ok()) raise(v.status());
  return std::move(v).value();
}

void check(const Status& s) {
  if (!s.ok()) raise(s);
}

// ---------------------------------------------------------------- compile

/// A stream whose complete lines go to `sink` (progress of the compiler).
class LineBuf : public std::streambuf {
 public:
  explicit LineBuf(std::function<void(const std::string&)> sink) : sink_(std::move(sink)) {}
  ~LineBuf() override {
    if (!line_.empty()) sink_(line_);
  }

 protected:
  int overflow(int c) override {
    if (c == EOF) return 0;
    if (c == '\n') {
      sink_(line_);
      line_.clear();
    } else {
      line_ += static_cast<char>(c);
    }
    return c;
  }

 private:
  std::function<void(const std::string&)> sink_;
  std::string line_;
};

/// The option table as the Python layer sees it: one entry per option, in
/// the order of `pcc --help`: (flag, takes a value, repeatable, value name,
/// help text).
std::vector<std::tuple<std::string, bool, bool, std::string, std::string>> optionTable() {
  CompileOptions opts;
  CLI::App app("pcc.compile", "pcc");
  addCompileFlags(app, opts);
  std::vector<std::tuple<std::string, bool, bool, std::string, std::string>> rows;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_lnames().empty()) continue;  // --help has one; only named options here
    const std::string flag = "--" + o->get_lnames().front();
    if (flag == "--help") continue;
    const bool takesValue = o->get_expected_min() > 0;
    const bool repeatable = o->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll;
    rows.emplace_back(flag, takesValue, repeatable, o->get_type_name(), o->get_description());
  }
  return rows;
}

/// Compiles `model` with the command-line `flags` (parsed by the pcc tool's
/// table) into the bundle directory `output`; progress lines go to `log`.
void compileToBundle(const std::string& model, const std::string& output, const std::vector<std::string>& flags,
                     nb::object log) {
  CompileOptions opts;
  CLI::App app("pcc.compile", "pcc");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  addCompileFlags(app, opts);
  std::vector<std::string> args(flags.rbegin(), flags.rend());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    raise(invalidInput(cli::joinLines(e.what())));
  }
  opts.modelPath = model;
  opts.outputPath = output;
  if (opts.modelPath.empty()) raise(invalidInput("no model given"));
  check(deviceCount(opts).status());
  check(checkBundleTarget(output));

  // The compiler runs without the GIL; each progress line takes it back to
  // reach the callback. The first exception a callback raises is kept and
  // raised once the compile is done (the rest of its lines are dropped).
  std::optional<nb::python_error> callbackError;
  auto sink = [&](const std::string& line) {
    if (log.is_none() || callbackError) return;
    nb::gil_scoped_acquire gil;
    try {
      log(line);
    } catch (nb::python_error& e) {
      callbackError.emplace(std::move(e));
    }
  };
  Status st;
  {
    nb::gil_scoped_release release;
    LineBuf buf(sink);
    std::ostream stream(&buf);
    auto c = compileModel(opts, &stream);
    if (!c.ok()) {
      st = c.status();
    } else {
      st = writeEmittedPlan(output, c->plan, {});
    }
  }
  if (callbackError) throw std::move(*callbackError);
  check(st);
}

// ---------------------------------------------------------------- tensors

nb::dlpack::dtype dlpackType(DType t) {
  using nb::dlpack::dtype_code;
  auto make = [](dtype_code code, int bits) {
    nb::dlpack::dtype d;
    d.code = static_cast<uint8_t>(code);
    d.bits = static_cast<uint8_t>(bits);
    d.lanes = 1;
    return d;
  };
  switch (t) {
    case DType::kF32: return make(dtype_code::Float, 32);
    case DType::kF64: return make(dtype_code::Float, 64);
    case DType::kF16: return make(dtype_code::Float, 16);
    case DType::kBF16: return make(dtype_code::Bfloat, 16);
    case DType::kI8: return make(dtype_code::Int, 8);
    case DType::kI16: return make(dtype_code::Int, 16);
    case DType::kI32: return make(dtype_code::Int, 32);
    case DType::kI64: return make(dtype_code::Int, 64);
    case DType::kU8: return make(dtype_code::UInt, 8);
    case DType::kU16: return make(dtype_code::UInt, 16);
    case DType::kU32: return make(dtype_code::UInt, 32);
    case DType::kU64: return make(dtype_code::UInt, 64);
    case DType::kBool: return make(dtype_code::Bool, 8);
    default: break;
  }
  raise(unsupported("tensors of type ", dtypeName(t), " have no numpy type"));
}

/// numpy's name of a plan type ("float32"), as the Python layer reports it.
std::string numpyName(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF64: return "float64";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kI8: return "int8";
    case DType::kI16: return "int16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kU8: return "uint8";
    case DType::kU16: return "uint16";
    case DType::kU32: return "uint32";
    case DType::kU64: return "uint64";
    case DType::kBool: return "bool";
    default: return std::string(dtypeName(t));
  }
}

std::string describe(const std::string& type, const std::vector<int64_t>& shape) {
  std::string s = type + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

using InArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

/// \returns a tensor viewing `a`'s memory (no copy), checked against the
/// plan's input `d`: an invalid-input error names the input, what it expects
/// and what it got. The view keeps `a` alive, taking the GIL to let it go.
Tensor viewInput(const InArray& a, const plan::IoDesc& d) {
  TensorType want = fromDesc(d.desc());
  std::vector<int64_t> shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
  nb::dlpack::dtype dt = a.dtype();
  nb::dlpack::dtype expected = dlpackType(want.dtype);
  if (dt != expected || shape != std::vector<int64_t>(want.shape.begin(), want.shape.end())) {
    std::string got = "an array";
    for (DType t : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8, DType::kI16, DType::kI32,
                    DType::kI64, DType::kU8, DType::kU16, DType::kU32, DType::kU64, DType::kBool})
      if (dlpackType(t) == dt) got = numpyName(t);
    raise(invalidInput("input '", d.name(), "': expected ",
                       describe(numpyName(want.dtype), std::vector<int64_t>(want.shape.begin(), want.shape.end())),
                       ", got ", describe(got, shape)));
  }
  auto* held = new InArray(a);
  std::shared_ptr<const void> owner(held, [](const void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<const InArray*>(p);
  });
  return Tensor::view(want.dtype, Dims(shape.begin(), shape.end()), a.data(), std::move(owner));
}

/// \returns a numpy array owning a copy of `t` (a rank's output may view
/// memory its next run reuses).
nb::object toNumpy(const Tensor& t) {
  auto* held = new Tensor(t.clone());
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  return nb::ndarray<nb::numpy>(held->mutableData(), shape.size(), shape.data(), owner, nullptr,
                                dlpackType(t.dtype()))
      .cast();
}

/// \returns one tensor per Plan.inputs entry viewing `feeds` (in that order),
/// each checked by viewInput.
std::vector<Tensor> viewInputs(const plan::Plan& p, const std::vector<InArray>& feeds) {
  if (static_cast<int>(feeds.size()) != p.inputs_size())
    raise(invalidInput("the plan takes ", p.inputs_size(), " inputs, ", feeds.size(), " given"));
  std::vector<Tensor> inputs;
  for (int i = 0; i < p.inputs_size(); ++i) inputs.push_back(viewInput(feeds[i], p.inputs(i)));
  return inputs;
}

/// \returns `outs` as numpy arrays, or raises its error.
nb::list toNumpyList(const StatusOr<std::vector<Tensor>>& outs) {
  if (!outs.ok()) raise(outs.status());
  nb::list out;
  for (const Tensor& t : *outs) out.append(toNumpy(t));
  return out;
}

// ---------------------------------------------------------------- plans

/// A plan bundle read from disk, shared by the Plan object and its sessions.
struct Bundle {
  std::shared_ptr<LoadedPlan> plan;

  static Bundle load(const std::string& dir) {
    Bundle b;
    b.plan = std::make_shared<LoadedPlan>(valueOr(loadPlanBundle(dir)));
    return b;
  }
  const plan::Plan& proto() const { return plan->plan; }
};

nb::list ioList(const google::protobuf::RepeatedPtrField<plan::IoDesc>& io) {
  nb::list out;
  for (const plan::IoDesc& d : io) {
    TensorType t = fromDesc(d.desc());
    out.append(nb::make_tuple(d.name(), std::vector<int64_t>(t.shape.begin(), t.shape.end()), numpyName(t.dtype)));
  }
  return out;
}

nb::dict generationInfo(const plan::Plan& p) {
  nb::dict g;
  if (!p.has_generation()) return g;
  const plan::Generation& gen = p.generation();
  g["batch"] = gen.batch();
  g["max_context"] = gen.max_context();
  g["prefill"] = gen.has_prefill() ? nb::cast(gen.prefill().max_prompt()) : nb::none();
  std::vector<int64_t> lengths;
  for (const plan::Prefill& f : gen.shorter_prefills()) lengths.push_back(f.max_prompt());
  if (gen.has_prefill()) lengths.push_back(gen.prefill().max_prompt());
  g["prefill_lengths"] = lengths;
  g["eos_token_ids"] = std::vector<int64_t>(gen.eos_token_ids().begin(), gen.eos_token_ids().end());
  return g;
}

std::string htmlReport(const plan::Plan& p) {
  std::string dot = planGraphDot(p);
  StatusOr<std::string> svg = renderDotToSvg(dot);  // without dot the page carries the source
  return planReportHtml(p, dot, svg);
}

// ---------------------------------------------------------------- sessions

/// The options a session runs with.
RunOptions runOptions(const std::string& backend, int threads, int timeout) {
  RunOptions o;
  o.backend = backend;
  o.threadsPerRank = threads;
  o.timeoutSeconds = timeout;
  o.interruptible = true;
  return o;
}

/// A thread that runs a session's calls without the GIL while the calling
/// thread checks for signals every 50 ms (Python runs its signal handlers on
/// the main thread only): a KeyboardInterrupt (Ctrl-C) calls the call's
/// `interrupt`, waits for it to return, and is raised. The thread lives as
/// long as the session, so a call costs two hand-offs, not a thread's start.
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  template <typename T>
  T run(const std::function<T()>& body, const std::function<void()>& interrupt) {
    std::optional<T> result;
    std::exception_ptr failure;
    bool interrupted = false;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> one(callMu_);  // calls from several Python threads take turns
      std::unique_lock<std::mutex> lock(mu_);
      job_ = [&] {
        try {
          result.emplace(body());
        } catch (...) {
          failure = std::current_exception();
        }
      };
      done_ = false;
      wake_.notify_all();
      while (!finished_.wait_for(lock, std::chrono::milliseconds(50), [&] { return done_; })) {
        if (interrupted) continue;
        lock.unlock();
        {
          nb::gil_scoped_acquire gil;
          if (PyErr_CheckSignals() != 0) interrupted = true;
        }
        if (interrupted) interrupt();
        lock.lock();
      }
    }
    if (interrupted) throw nb::python_error();  // the KeyboardInterrupt PyErr_CheckSignals set
    if (failure) std::rethrow_exception(failure);
    return std::move(*result);
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return quit_ || job_; });
      if (!job_) return;  // quit with nothing to do
      std::function<void()> job = std::move(job_);
      job_ = nullptr;
      lock.unlock();
      job();
      lock.lock();
      done_ = true;
      finished_.notify_all();
    }
  }

  std::mutex callMu_, mu_;
  std::condition_variable wake_, finished_;
  std::function<void()> job_;  // under mu_
  bool done_ = true, quit_ = false;
  std::thread thread_;  // last: started once the rest is built
};

class Session {
 public:
  Session(const Bundle& b, const std::string& backend, int threads, int timeout, bool distributed,
          const std::string& rendezvous)
      : bundle_(b), opts_(runOptions(backend, threads, timeout)) {
    if (!distributed && !rendezvous.empty())
      raise(invalidInput("rendezvous: only a distributed session (one process per rank) meets its peers"));
    if (distributed) {
      auto le = valueOr(readLaunchEnv(processEnvironment(), rendezvous));
      if (!le)
        raise(invalidInput("distributed=True: the environment names no rank (RANK and WORLD_SIZE from torchrun, "
                           "OMPI_COMM_WORLD_RANK/SIZE from mpirun, or SLURM_PROCID/SLURM_NTASKS from srun)"));
      if (le->worldSize != bundle_.proto().ranks_size())
        raise(invalidInput("distributed=True: the launcher started ", le->worldSize, " processes, the plan has ",
                           bundle_.proto().ranks_size(), " ranks"));
      launch_ = *le;
      opts_.localRank = le->localRank;
    }
    Status failed;
    {
      nb::gil_scoped_release release;
      if (launch_) {
        // A generation plan's prefill programs join the session as its programs 1, 2, ...
        prefills_ = prefillPlansOf(*bundle_.plan);
        std::vector<const LoadedPlan*> more;
        for (const LoadedPlan& pre : prefills_) more.push_back(&pre);
        auto s = ProcessRankSession::start(*bundle_.plan, more, opts_, launch_->rank, launch_->rendezvous);
        if (s.ok()) process_ = std::move(s).value();
        else failed = s.status();
      } else {
        auto s = RankSession::start(*bundle_.plan, opts_);
        if (s.ok()) session_ = std::move(s).value();
        else failed = s.status();
      }
    }
    check(failed);
  }

  int rank() const { return launch_ ? launch_->rank : -1; }
  int worldSize() const { return launch_ ? launch_->worldSize : 1; }
  std::string launcher() const { return launch_ ? std::string(launcherName(launch_->launcher)) : ""; }

  /// One run on `feeds` (in Plan.inputs order): the outputs, or (a
  /// distributed session's rank other than 0) an empty list.
  nb::list run(const std::vector<InArray>& feeds) {
    std::vector<Tensor> inputs = viewInputs(bundle_.proto(), feeds);
    StatusOr<std::vector<Tensor>> outs = internalError("no run");
    if (process_) {
      ProcessRankSession* s = process_.get();
      outs = worker_.run<StatusOr<std::vector<Tensor>>>([&] { return s->run(inputs); }, [s] { s->interrupt(); });
    } else {
      if (!session_) raise(invalidInput("the session is closed"));
      RankSession* s = session_.get();
      outs = worker_.run<StatusOr<std::vector<Tensor>>>([&] { return s->run(inputs); }, [s] { s->interrupt(); });
    }
    inputs.clear();
    if (!outs.ok()) raise(outs.status());
    if (process_ && process_->rank() != 0) {
      // Its own part of each output (None where it computes none of it).
      auto parts = process_->lastOwnParts();
      if (!parts.ok()) raise(parts.status());
      nb::list out;
      for (const ProcessRankSession::OwnPart& part : *parts)
        out.append(part.tensor.defined() ? toNumpy(part.tensor) : nb::none());
      return out;
    }
    return toNumpyList(outs);
  }

  /// A distributed session: per output, where this rank's part of the last
  /// run lies: (split dim, start, length), split dim -1 for the whole
  /// output; None where the rank computes none of it.
  nb::list ownSlices() const {
    nb::list out;
    if (!process_) return out;
    auto parts = process_->lastOwnParts();
    if (!parts.ok()) raise(parts.status());
    for (const ProcessRankSession::OwnPart& part : *parts) {
      if (!part.tensor.defined()) {
        out.append(nb::none());
        continue;
      }
      int64_t length = part.splitDim >= 0 ? part.tensor.shape()[part.splitDim] : 0;
      out.append(nb::make_tuple(part.splitDim, part.offset, length));
    }
    return out;
  }

  /// Runs `feeds` `iters` times with every instruction timed (a run of its
  /// own, RunOptions.profile): one dict per instruction of every rank.
  nb::list profile(const std::vector<InArray>& feeds, int iters) {
    if (launch_) raise(unsupported("profile: a distributed session cannot profile yet; pcc-run --profile under the "
                                   "same launcher times every rank"));
    const plan::Plan& p = bundle_.proto();
    std::vector<Tensor> inputs = viewInputs(p, feeds);
    RunOptions o = opts_;
    o.profile = true;
    o.iters = std::max(1, iters);
    o.interruptible = false;
    StatusOr<RunResult> res = internalError("no run");
    {
      nb::gil_scoped_release release;
      res = runPlan(*bundle_.plan, inputs, o);
    }
    inputs.clear();
    if (!res.ok()) raise(res.status());
    nb::list rows;
    for (size_t r = 0; r < res->instructions.size(); ++r) {
      const plan::RankProgram& prog = p.ranks(static_cast<int>(r));
      for (size_t i = 0; i < res->instructions[r].size(); ++i) {
        const auto& t = res->instructions[r][i];
        const plan::Instruction& ins = prog.instructions(static_cast<int>(i));
        nb::dict row;
        row["rank"] = r;
        row["index"] = i;
        row["op"] = ins.op().empty() ? plan::Instruction::Kind_Name(ins.kind()) : ins.op();
        row["node"] = ins.node();
        row["seconds"] = t.calls ? t.seconds / static_cast<double>(t.calls) : 0.0;
        row["min_seconds"] = t.minSeconds;
        row["calls"] = t.calls;
        row["provider"] = t.provider;
        rows.append(row);
      }
    }
    return rows;
  }

  /// Generates with a generation plan (runtime/generate.h).
  nb::dict generate(const std::vector<std::vector<int64_t>>& prompts, int maxNewTokens, double temperature, int topK,
                    double topP, uint64_t seed, bool stopAtEos, bool prefill, bool checkAgainstReference) {
    GenerateOptions g;
    g.prompts = prompts;
    g.maxNewTokens = maxNewTokens;
    g.temperature = temperature;
    g.topK = topK;
    g.topP = topP;
    g.seed = seed;
    g.stopAtEos = stopAtEos;
    g.prefill = prefill;
    g.check = checkAgainstReference;
    RunOptions o = opts_;
    o.interruptible = false;
    StatusOr<GenerateResult> res = internalError("no run");
    {
      nb::gil_scoped_release release;
      if (process_)
        res = generateOn(*process_, *bundle_.plan, prefills_, g, o);
      else
        res = generateTokens(*bundle_.plan, g, o);
    }
    if (!res.ok()) raise(res.status());
    if (checkAgainstReference && !res->mismatch.empty()) raise(Status(StatusCode::kCheckFailed, res->mismatch));
    nb::dict d;
    d["tokens"] = res->tokens;
    d["steps"] = res->steps;
    d["prefill_tokens"] = res->prefillTokens;
    d["prefill_length"] = res->prefillLength;
    d["first_token_seconds"] = res->firstTokenSeconds;
    d["decode_seconds"] = res->decodeSeconds;
    d["decode_tokens"] = res->decodeTokens;
    d["overflow"] = res->overflow;
    d["checked_steps"] = res->checkedSteps;
    d["max_logit_diff"] = res->maxLogitDiff;
    return d;
  }

  void close() {
    nb::gil_scoped_release release;
    session_.reset();
    process_.reset();
  }

 private:
  Bundle bundle_;
  RunOptions opts_;
  std::unique_ptr<RankSession> session_;          // every rank a thread of this process
  std::vector<LoadedPlan> prefills_;              // distributed: the prefill programs process_ runs too
  std::unique_ptr<ProcessRankSession> process_;   // distributed: this process's rank
  std::optional<LaunchEnv> launch_;
  Worker worker_;                                 // runs `run`'s calls (Ctrl-C seen meanwhile)
};

/// Runs Plan.reference on the reference kernels: the oracle of --check.
nb::list runReferenceProgram(const Bundle& b, const std::vector<InArray>& feeds) {
  std::vector<Tensor> inputs = viewInputs(b.proto(), feeds);
  StatusOr<std::vector<Tensor>> outs = internalError("no run");
  {
    nb::gil_scoped_release release;
    outs = runReference(*b.plan, inputs);
  }
  inputs.clear();
  return toNumpyList(outs);
}

}  // namespace
}  // namespace pcc

NB_MODULE(_pcc, m) {
  using namespace pcc;
  m.doc() = "pcc's compiled module: use the `pcc` package, not this.";

  // StatusError -> the class pcc._errors.error_class(code, message) picks.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      nb::object cls = nb::module_::import_("pcc._errors").attr("error_class")(e.code, e.message);
      PyErr_SetString(cls.ptr(), e.message.c_str());
    }
  });

  m.def("option_table", &optionTable,
        "The compile options: (flag, takes a value, repeatable, value name, help) per option.");
  m.def("compile", &compileToBundle, "model"_a, "output"_a, "flags"_a, "log"_a.none(),
        "Compiles `model` with `flags` (pcc's command-line flags) into the bundle directory `output`.");

  nb::class_<Bundle>(m, "Bundle")
      .def_static("load", &Bundle::load, "dir"_a)
      .def_prop_ro("dir", [](const Bundle& b) { return b.plan->dir; })
      .def_prop_ro("inputs", [](const Bundle& b) { return ioList(b.proto().inputs()); })
      .def_prop_ro("outputs", [](const Bundle& b) { return ioList(b.proto().outputs()); })
      .def_prop_ro("ranks", [](const Bundle& b) { return b.proto().ranks_size(); })
      .def_prop_ro("generation", [](const Bundle& b) { return generationInfo(b.proto()); })
      .def("report_json", [](const Bundle& b) { return planReportJson(b.proto()); })
      .def("report_text", [](const Bundle& b) { return planReportText(b.proto()); })
      .def("costs_json", [](const Bundle& b) { return planCostsJson(b.proto()); })
      .def("dot", [](const Bundle& b) { return planGraphDot(b.proto()); })
      .def("html", [](const Bundle& b) {
        nb::gil_scoped_release release;
        return htmlReport(b.proto());
      })
      .def("run_reference", &runReferenceProgram, "feeds"_a);

  nb::class_<Session>(m, "Session")
      .def(nb::init<const Bundle&, const std::string&, int, int, bool, const std::string&>(), "bundle"_a,
           "backend"_a, "threads"_a, "timeout"_a, "distributed"_a, "rendezvous"_a)
      .def_prop_ro("rank", &Session::rank)
      .def_prop_ro("world_size", &Session::worldSize)
      .def_prop_ro("launcher", &Session::launcher)
      .def("run", &Session::run, "feeds"_a)
      .def("own_slices", &Session::ownSlices)
      .def("profile", &Session::profile, "feeds"_a, "iters"_a)
      .def("generate", &Session::generate, "prompts"_a, "max_new_tokens"_a, "temperature"_a, "top_k"_a, "top_p"_a,
           "seed"_a, "stop_at_eos"_a, "prefill"_a, "check"_a)
      .def("close", &Session::close);
}
