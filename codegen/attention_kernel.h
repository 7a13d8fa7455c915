// The generated Attention kernel (docs/kernels.md#attention): the
// description of one Attention node (opset 23, float32, one output) that
// both emitters print, as a tiled kernel with online softmax.
//
// The description is the node's sizes (batch, query and key/value heads,
// query and key sequence lengths, head sizes), the element strides of Q, K,
// V and Y along (batch, head, sequence) for their 3-D or 4-D layouts (the
// head dimension is contiguous in both), the mask kind and its broadcast
// strides, is_causal, the scale, and the tiles: keys go through the kernel
// in tiles of `keyTile`, the CUDA form's blocks take `queryTile` query rows.
// A KernelSpec whose `attention` is set is such a kernel; its inputs are Q,
// K, V and the mask when there is one, its output Y.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel_desc.h"

namespace pcc {

/// How the kernel reads the mask.
enum class AttentionMask : int8_t {
  kNone,
  kFloat,  ///< added to the scores
  kBool,   ///< false: the key is left out (-inf)
};

struct AttentionDesc {
  int64_t batch = 0, qHeads = 0, kvHeads = 0;
  int64_t qLen = 0, kvLen = 0;             ///< query rows, keys
  int64_t headSize = 0, valueSize = 0;     ///< D of Q and K, Dv of V and Y
  /// Element strides along (batch, head, sequence); the head dim has stride 1.
  std::array<int64_t, 3> q{}, k{}, v{}, y{};
  AttentionMask mask = AttentionMask::kNone;
  /// The mask broadcast to [batch, qHeads, qLen, maskLen]: its strides (0 where broadcast).
  std::array<int64_t, 4> maskStrides{};
  int64_t maskLen = 0;  ///< keys at and after it are left out (the reference pads the mask with -inf)
  bool causal = false;  ///< key j > query row i left out
  float scale = 1;
  int keyTile = 0;      ///< keys per tile, both targets
  int queryTile = 0;    ///< query rows per CUDA block
};

/// The largest head size (D and Dv each) the CUDA tiles hold in shared memory.
constexpr int64_t kAttentionMaxHeadSize = 512;
/// Threads per block of the CUDA attention kernel (4 warps).
constexpr int kAttentionCudaBlock = 128;

/// Describes an Attention node with inputs of types `inputs` (absent optional
/// ones of dtype kUndefined), attributes `attrs` and `numOutputs` outputs,
/// named `group` in messages. `keyTile` > 0 overrides the key tile (tests
/// use small ones to cross many tiles). \returns the kernel, or an
/// unsupported error saying why it cannot be one (past key/value,
/// nonpad_kv_seqlen, softcap, more than one output, a dtype other than
/// float32, an empty size, a head size above kAttentionMaxHeadSize).
StatusOr<KernelSpec> describeAttentionTypes(const std::vector<TensorType>& inputs, const AttrMap& attrs,
                                            size_t numOutputs, const std::string& group, int keyTile = 0);

/// \returns describeAttentionTypes of Attention node `n`; an unsupported
/// error for any other op.
StatusOr<KernelSpec> describeAttention(const Node& n);

/// \returns the text form of `d` for specKey (every field that changes the code).
std::string attentionKey(const AttentionDesc& d);

/// \returns the C++ definition of `extern "C" void NAME(const void* const*
/// in, void* const* out)` computing `d` (codegen/emit_attention_cpp.cpp).
std::string emitAttentionCpp(const std::string& name, const AttentionDesc& d);

/// \returns the CUDA source of `extern "C" __global__ void NAME(const float*
/// q, const float* k, const float* v[, const T* mask], float* y)` computing
/// `d` (codegen/emit_attention_cuda.cpp).
std::string emitAttentionCuda(const std::string& name, const AttentionDesc& d, const std::string& group);

/// \returns `f` as a C float literal both targets read back exactly
/// ("0.125f", "1.0f", "1e-05f"); `f` must be finite.
std::string attentionFloatLiteral(float f);

/// \returns the number of query tiles, B * Hq * ceil(S / queryTile): one CUDA block each.
int64_t attentionTiles(const AttentionDesc& d);

}  // namespace pcc
