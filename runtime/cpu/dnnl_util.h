// Shared pieces of the oneDNN kernels: the engine, a stream per thread, plain
// (row-major) memory descriptors, and the boundary where oneDNN's exceptions
// become Status values. Nothing outside runtime/cpu includes this file.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc::cpu {

/// \returns the process's CPU engine (engines are safe to share between threads).
dnnl::engine& cpuEngine();
/// \returns this thread's stream on cpuEngine() (a stream is not shared).
dnnl::stream& threadStream();

/// \returns the row-major f32 descriptor of `dims`.
dnnl::memory::desc plainDesc(const std::vector<int64_t>& dims);
/// \returns an f32 descriptor of `dims` with explicit element `strides`.
dnnl::memory::desc stridedDesc(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);

/// \returns a memory object over `t`'s buffer. oneDNN takes a non-const
/// pointer; inputs are only read.
dnnl::memory wrap(const dnnl::memory::desc& d, const Tensor& t);
dnnl::memory wrap(const dnnl::memory::desc& d, Tensor& t);

/// Executes `p` with `args` on threadStream() and waits for it.
/// \returns ok, or dnnlError(what, ...) when oneDNN throws.
Status runPrimitive(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args,
                    const char* what);

/// \returns true when every input that is present is f32 (the only dtype the
/// fast kernels take).
bool allF32(const std::vector<const Tensor*>& inputs);

/// \returns output `k` of a kernel: the tensor the caller preallocated in
/// `outputs[k]` when it has type {dtype, shape} (the CPU backend passes views
/// into the rank's arena, contents undefined: the kernel writes every element),
/// else a new zeroed tensor.
Tensor outputTensor(std::vector<Tensor>& outputs, size_t k, DType dtype, const Dims& shape);
/// \returns output `k` of an f32 kernel, in place: the preallocated
/// `outputs[k]` when it has `shape`, else a new zeroed tensor stored there
/// (the vector grown as needed). Copies no shape (every call's path).
Tensor& outputRef(std::vector<Tensor>& outputs, size_t k, const Dims& shape);
/// Stores `y` as output `k`: in place of a preallocated `outputs[k]`, else appended.
void setOutput(std::vector<Tensor>& outputs, size_t k, Tensor y);

/// The input shapes (and one scalar) a kernel's primitive was made for.
/// matches() is every call's check: it compares without allocating.
class ShapeKey {
 public:
  /// \returns true when set() was last given these shapes (nullptr: an absent
  /// operand) and this scalar.
  bool matches(std::initializer_list<const Dims*> shapes, double scalar = 0) const;
  void set(std::initializer_list<const Dims*> shapes, double scalar = 0);

 private:
  bool set_ = false;
  std::vector<Dims> shapes_;
  std::vector<bool> present_;
  double scalar_ = 0;
};

/// Work (multiply-adds) below which a GEMM-like primitive is made and run on
/// the calling thread alone: waking a sleeping OpenMP team costs more than it
/// saves on a product this small (docs/runtime.md "Where the CPU time goes").
constexpr int64_t kSerialWork = int64_t{1} << 20;

/// Sets this thread's OpenMP thread count to `n` for the guard's lifetime
/// (n <= 0: leaves it alone). oneDNN reads it when it makes a primitive and
/// when it runs one, so both must happen under the same guard.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n);
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int previous_ = 0;
};

/// A primitive with its argument memories, made once when the primitive is:
/// a call points them at its tensors and executes, creating nothing.
class BoundPrimitive {
 public:
  BoundPrimitive() = default;
  /// `threads` > 0: the OpenMP thread count `p` was made under, which every
  /// run uses too (ScopedThreads); 0: the caller's.
  explicit BoundPrimitive(dnnl::primitive p, int threads = 0) : prim_(std::move(p)), threads_(threads) {}
  bool defined() const { return static_cast<bool>(prim_); }
  /// Adds argument `arg` with layout `d` (its buffer is set per call).
  void bind(int arg, const dnnl::memory::desc& d);
  /// Points argument `arg` (bound before) at `data`; oneDNN only reads inputs.
  void set(int arg, const void* data);
  /// \returns the memory of argument `arg` (bound before).
  const dnnl::memory& memoryOf(int arg) const;
  /// Executes on threadStream() and waits. \returns ok, or dnnlError(what, ...).
  Status run(const char* what) const;
  /// Executes without waiting or catching (inside a caller's try block).
  void enqueue() const;

 private:
  void enqueueArgs() const;
  dnnl::primitive prim_;
  int threads_ = 0;
  std::unordered_map<int, dnnl::memory> args_;
  // The same arguments as the C API takes them, built by bind: a run passes
  // them as they are (the C++ execute would build this list on every call).
  std::vector<dnnl_exec_arg_t> execArgs_;
};

/// \returns this thread's scratch block `slot` (0 or 1), at least `bytes`
/// long and 64-byte aligned: the oneDNN Conv's reorder buffers, kept between
/// calls so that a call allocates nothing. The block grows, never shrinks,
/// and lives as long as the thread.
void* threadScratch(int slot, size_t bytes);

/// \returns an internal error carrying oneDNN's message and status.
Status dnnlError(const char* what, const dnnl::error& e);

}  // namespace pcc::cpu
