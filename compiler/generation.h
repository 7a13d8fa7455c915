// Generation plans (docs/generation.md): recognizing a decoder export with a
// KV cache by its interface, and the dims its decode step is compiled at.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/onnx/importer.h"
#include "passes/kv_cache.h"
#include "runtime/plan.pb.h"

namespace onnx {
class ModelProto;
}

namespace pcc {

/// A decoder export's interface, found by name: `past_key_values.N.key` /
/// `.value` inputs (also `past_key_values_N_key`, `past.N.key`) paired with
/// `present.N.key` / `.value` outputs.
struct GenerationInterface {
  std::vector<KvCachePair> pairs;  ///< by layer, key before value
  std::string inputIds, attentionMask, positionIds;  ///< "" when absent (positionIds only)
  std::string logits;
  int64_t kvHeads = 0, headDim = 0;  ///< of the first past (static in every export)
  int64_t vocab = 0;                 ///< logits' last dim, 0 when symbolic
  /// The context the model was trained for, when something next to the model
  /// says it (config.json / genai_config.json: max_position_embeddings,
  /// n_positions, context_length); 0 when nothing does.
  int64_t maxPositions = 0;
  std::string maxPositionsSource;
  std::vector<int64_t> eosTokenIds;
  /// The head size a config beside the model gives (genai_config.json's
  /// decoder.head_size, config.json's head_dim), for a cache whose head dim
  /// is symbolic; 0 when none does.
  int64_t configHeadDim = 0;
};

/// \returns the interface when `m` has past/present pairs, nullopt when it
/// has none, or an invalid-input error naming what is missing (a past without
/// its present, no input_ids, no logits, a cache that is not 4-D with static
/// head counts).
StatusOr<std::optional<GenerationInterface>> findGenerationInterface(const onnx::ModelProto& m,
                                                                     const std::string& path);

/// Binds the decode step's dims in `io.shapes` (those the user did not bind):
/// `batch` sequences of one new token each, past max_context - 1.
void bindDecodeShapes(const GenerationInterface& gi, int64_t batch, int64_t maxContext, ImportOptions& io);

/// Binds the prefill program's dims in `io.shapes`: `batch` sequences of
/// `maxPrompt` new tokens; the past at one placeholder position
/// (`placeholderPast`: a Concat(past, new) cache, the mask one longer than
/// the prompt) or at maxContext - maxPrompt (a GroupQueryAttention cache,
/// the mask over the whole context).
void bindPrefillShapes(const GenerationInterface& gi, int64_t batch, int64_t maxContext, int64_t maxPrompt,
                       bool placeholderPast, ImportOptions& io);

}  // namespace pcc
