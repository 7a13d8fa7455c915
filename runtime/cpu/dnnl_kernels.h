// The kernel factories of runtime/cpu, one per op (fast_kernels.cpp keeps the
// table). Internal to runtime/cpu.
#pragma once

#include <memory>
#include <vector>

#include "runtime/ops/registry.h"
#include "runtime/support/attribute.h"
#include "runtime/support/epilogue.h"

namespace pcc::cpu {

/// \returns `k` behind a guard that declines (leaves to the reference
/// kernel) every call with an empty input or output: oneDNN never sees a
/// tensor of zero elements (fast_kernels.cpp). nullptr stays nullptr.
std::unique_ptr<KernelOverride> declineEmpty(std::unique_ptr<KernelOverride> k);

std::unique_ptr<KernelOverride> makeAttentionKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeMatMulKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeGemmKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeMatMulNBitsKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeConvKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeMaxPoolKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeAveragePoolKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeAddKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeSubKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeMulKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeDivKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeReluKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeTanhKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeGeluKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makeSwishKernel(const AttrMap& attrs, const std::vector<bool>& constant);
std::unique_ptr<KernelOverride> makePowKernel(const AttrMap& attrs, const std::vector<bool>& constant);

// Folded with an epilogue (fast_kernels.h makeEpilogueKernel): prepared for
// `inputs` now; nullptr when oneDNN has no fast form of it.
std::unique_ptr<KernelOverride> makeMatMulEpilogueKernel(const std::vector<bool>& constant,
                                                         const std::vector<TensorType>& inputs, size_t ownInputs,
                                                         const Epilogue& e);
std::unique_ptr<KernelOverride> makeGemmEpilogueKernel(const AttrMap& attrs, const std::vector<bool>& constant,
                                                       const std::vector<TensorType>& inputs, size_t ownInputs,
                                                       const Epilogue& e);
std::unique_ptr<KernelOverride> makeConvEpilogueKernel(const AttrMap& attrs, const std::vector<bool>& constant,
                                                       const std::vector<TensorType>& inputs, size_t ownInputs,
                                                       const Epilogue& e);

}  // namespace pcc::cpu
