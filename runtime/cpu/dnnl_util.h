// Shared pieces of the oneDNN kernels: the engine, a stream per thread, plain
// (row-major) memory descriptors, and the boundary where oneDNN's exceptions
// become Status values. Nothing outside runtime/cpu includes this file.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

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
/// Stores `y` as output `k`: in place of a preallocated `outputs[k]`, else appended.
void setOutput(std::vector<Tensor>& outputs, size_t k, Tensor y);

/// \returns an internal error carrying oneDNN's message and status.
Status dnnlError(const char* what, const dnnl::error& e);

}  // namespace pcc::cpu
