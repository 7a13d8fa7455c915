// ONNX Conv as one cuDNN convolution: the descriptor values (tensor, filter
// and convolution descriptors, bias) cuDNN's legacy API takes, computed from
// the operands' types and the node's attributes. Pure arithmetic, no device:
// the unit test runs the description through a direct convolution of its own
// that reads it the way cuDNN does, against ONNX's definition.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/support/attribute.h"
#include "runtime/support/dtype.h"

namespace pcc::cuda {

/// One convolution as cuDNN states it. cuDNN takes tensors of 4 or 5 dims,
/// so a 1-D convolution is a 2-D one of height 1 (pad 0, stride 1, dilation
/// 1 in that dim). Every tensor is packed NCHW / NCDHW, the filter KCRS.
struct ConvDesc {
  DType dtype = DType::kF32;  ///< data type of x, w, b and y (compute is float32)
  int nbDims = 4;             ///< 4 or 5
  std::vector<int> xDims, wDims, yDims;       ///< nbDims values each
  std::vector<int> xStrides, yStrides;        ///< packed strides of x and y
  std::vector<int> pads, strides, dilations;  ///< nbDims - 2 values each (symmetric pads)
  int groups = 1;
  bool hasBias = false;
  std::vector<int> biasDims, biasStrides;     ///< [1, K, 1, ...] and its packed strides
  /// \returns a key naming everything above, for the per-shape algorithm cache.
  std::string key() const;
};

/// \returns the cuDNN description of Conv on `x` [N, C, spatial...] and `w`
/// [K, C/group, kernel...] with the optional bias `b` [K] (dtype kUndefined:
/// absent) and the node's `attrs` (auto_pad NOTSET / VALID / SAME_UPPER /
/// SAME_LOWER, pads, strides, dilations, group, kernel_shape), or an
/// unsupported error with the reason, then the op runs on the CPU fallback:
/// dtypes other than f32 and f16, f16 with a bias (cudnnAddTensor after the
/// convolution would round a second time), spatial ranks other than 1 to 3, pads that
/// differ at the two ends of a dim (cuDNN pads symmetrically), dims beyond int.
/// An invalid-input error for operands that do not make a convolution.
StatusOr<ConvDesc> convDesc(const TensorType& x, const TensorType& w, const TensorType& b, const AttrMap& attrs);

}  // namespace pcc::cuda
