// Conv on cuDNN (the cuda backend's "cudnn" placement): the per-device cuDNN
// state and the kernel that runs one convolution that conv_desc.h describes.
// See docs/runtime.md, "CUDA backend". Nothing here has run on a GPU yet.
#pragma once

#include <memory>
#include <string>

#include "runtime/backend.h"
#include "runtime/cuda/conv_desc.h"
#include "runtime/cuda/device.h"

namespace pcc::cuda {

/// cuDNN state of one device (its handle on the compute stream, the
/// algorithm chosen per convolution shape, the workspace).
struct Dnn;

/// \returns the cuDNN state of `dev`: cuDNN loaded (cuda_api.h), a handle
/// bound to the compute stream; an environment error when cuDNN does not load
/// or cudnnCreate fails (the caller then runs Conv on the CPU fallback).
StatusOr<std::shared_ptr<Dnn>> makeDnn(std::shared_ptr<Device> dev);

/// \returns the kernel running `d` on `dnn`'s device (cudnnConvolutionForward,
/// then cudnnAddTensor for the bias), after checking cuDNN's output dims
/// against the plan's `planned` output and choosing the algorithm (once per
/// shape) and workspace; an unsupported error when cuDNN offers no algorithm
/// within the workspace limit (the caller falls back), or an error naming
/// `where` and the call.
StatusOr<std::unique_ptr<DeviceKernel>> makeCudnnConv(std::shared_ptr<Device> dev, std::shared_ptr<Dnn> dnn,
                                                      const ConvDesc& d, const TensorType& planned, std::string where);

}  // namespace pcc::cuda
