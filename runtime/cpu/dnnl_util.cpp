#include "runtime/cpu/dnnl_util.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <memory>

namespace pcc::cpu {

dnnl::engine& cpuEngine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& threadStream() {
  thread_local dnnl::stream s(cpuEngine());
  return s;
}

dnnl::memory::desc plainDesc(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  return stridedDesc(dims, strides);
}

dnnl::memory::desc stridedDesc(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), dnnl::memory::data_type::f32,
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

dnnl::memory wrap(const dnnl::memory::desc& d, const Tensor& t) {
  return dnnl::memory(d, cpuEngine(), const_cast<void*>(t.raw()));
}

dnnl::memory wrap(const dnnl::memory::desc& d, Tensor& t) {
  return dnnl::memory(d, cpuEngine(), t.mutableData());
}

Status runPrimitive(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args,
                    const char* what) {
  try {
    p.execute(threadStream(), args);
    threadStream().wait();
  } catch (const dnnl::error& e) {
    return dnnlError(what, e);
  }
  return Status::OK();
}

bool allF32(const std::vector<const Tensor*>& inputs) {
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->dtype() != DType::kF32) return false;
  return true;
}

bool ShapeKey::matches(std::initializer_list<const Dims*> shapes, double scalar) const {
  if (!set_ || shapes.size() != shapes_.size() || std::memcmp(&scalar, &scalar_, sizeof scalar) != 0) return false;
  size_t i = 0;
  for (const Dims* d : shapes) {
    if ((d != nullptr) != present_[i]) return false;
    if (d && *d != shapes_[i]) return false;
    ++i;
  }
  return true;
}

void ShapeKey::set(std::initializer_list<const Dims*> shapes, double scalar) {
  set_ = true;
  scalar_ = scalar;
  shapes_.clear();
  present_.clear();
  for (const Dims* d : shapes) {
    shapes_.push_back(d ? *d : Dims{});
    present_.push_back(d != nullptr);
  }
}

void BoundPrimitive::bind(int arg, const dnnl::memory::desc& d) {
  args_[arg] = dnnl::memory(d, cpuEngine(), DNNL_MEMORY_NONE);
  execArgs_.clear();
  for (const auto& [a, m] : args_) execArgs_.push_back({a, m.get()});
}

void BoundPrimitive::set(int arg, const void* data) { args_.at(arg).set_data_handle(const_cast<void*>(data)); }

const dnnl::memory& BoundPrimitive::memoryOf(int arg) const { return args_.at(arg); }

ScopedThreads::ScopedThreads(int n) {
  if (n <= 0) return;
  previous_ = omp_get_max_threads();
  omp_set_num_threads(n);
}

ScopedThreads::~ScopedThreads() {
  if (previous_ > 0) omp_set_num_threads(previous_);
}

Status BoundPrimitive::run(const char* what) const {
  ScopedThreads threads(threads_);
  try {
    enqueueArgs();
    threadStream().wait();
  } catch (const dnnl::error& e) {
    return dnnlError(what, e);
  }
  return Status::OK();
}

void BoundPrimitive::enqueue() const {
  ScopedThreads threads(threads_);
  enqueueArgs();
}

void BoundPrimitive::enqueueArgs() const {
  dnnl::error::wrap_c_api(dnnl_primitive_execute(prim_.get(), threadStream().get(),
                                                 static_cast<int>(execArgs_.size()), execArgs_.data()),
                          "could not execute a primitive");
}

void* threadScratch(int slot, size_t bytes) {
  struct Block {
    std::unique_ptr<void, decltype(&std::free)> p{nullptr, &std::free};
    size_t bytes = 0;
  };
  thread_local Block blocks[2];
  Block& b = blocks[slot & 1];
  if (b.bytes < bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    b.p.reset(std::aligned_alloc(64, n));
    b.bytes = b.p ? n : 0;
  }
  return b.p.get();
}

Status dnnlError(const char* what, const dnnl::error& e) {
  return internalError("oneDNN ", what, ": ", e.what(), " (status ", static_cast<int>(e.status), ")");
}

Tensor outputTensor(std::vector<Tensor>& outputs, size_t k, DType dtype, const Dims& shape) {
  if (k < outputs.size() && outputs[k].dtype() == dtype && outputs[k].shape() == shape) return outputs[k];
  return Tensor::zeros(dtype, shape);
}

Tensor& outputRef(std::vector<Tensor>& outputs, size_t k, const Dims& shape) {
  if (k < outputs.size() && outputs[k].dtype() == DType::kF32 && outputs[k].shape() == shape) return outputs[k];
  if (outputs.size() <= k) outputs.resize(k + 1);
  outputs[k] = Tensor::zeros(DType::kF32, shape);
  return outputs[k];
}

void setOutput(std::vector<Tensor>& outputs, size_t k, Tensor y) {
  if (k < outputs.size()) {
    outputs[k] = std::move(y);
  } else {
    outputs.push_back(std::move(y));
  }
}

}  // namespace pcc::cpu
