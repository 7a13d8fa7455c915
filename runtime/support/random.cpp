#include "runtime/support/random.h"

namespace pcc {

namespace {
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

Tensor pseudoRandomTensor(const TensorType& type, uint64_t seed) {
  Tensor t = Tensor::zeros(type);
  uint64_t state = seed;
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t r = splitmix64(state);
    // 53 random bits -> [0, 1) -> [-1, 1).
    double d = static_cast<double>(r >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    if (type.dtype == DType::kF64) t.mutableData<double>()[i] = d;
    else if (isFloat(type.dtype)) t.setDouble(i, static_cast<float>(d));
    else if (type.dtype == DType::kBool) t.setInt(i, static_cast<int64_t>(r & 1));
    else t.setInt(i, static_cast<int64_t>(r % 4));
  }
  return t;
}

std::vector<Tensor> pseudoRandomTensors(const std::vector<TensorType>& types, uint64_t seed) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < types.size(); ++i) out.push_back(pseudoRandomTensor(types[i], seed * 0x9e3779b97f4a7c15ULL + i + 1));
  return out;
}

}  // namespace pcc
