#include "runtime/cpu/dnnl_util.h"

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

Status dnnlError(const char* what, const dnnl::error& e) {
  return internalError("oneDNN ", what, ": ", e.what(), " (status ", static_cast<int>(e.status), ")");
}

Tensor outputTensor(std::vector<Tensor>& outputs, size_t k, DType dtype, const Dims& shape) {
  if (k < outputs.size() && outputs[k].dtype() == dtype && outputs[k].shape() == shape) return outputs[k];
  return Tensor::zeros(dtype, shape);
}

void setOutput(std::vector<Tensor>& outputs, size_t k, Tensor y) {
  if (k < outputs.size()) {
    outputs[k] = std::move(y);
  } else {
    outputs.push_back(std::move(y));
  }
}

}  // namespace pcc::cpu
