// The KV cache as state (docs/generation.md#the-cache-pass): a decoder
// export's past/present pairs, each present the Concat of its past with the
// step's new keys or values along the sequence axis, become a cache of
// max_context positions that the step writes in place at each sequence's
// position (TensorScatter) and that attention reads whole, the attention mask
// hiding the positions not written yet.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace pcc {

/// One layer's key or value cache of an export: its past input and present output.
struct KvCachePair {
  std::string past, present;
};

/// A state tensor the rewrite made.
struct KvCacheState {
  std::string name;     ///< the new graph input (the cache as it was before the step)
  std::string present;  ///< the graph output: the cache after the step (same value name as the export's)
  std::string past;     ///< the export's past input it replaces
  TensorType type;      ///< [batch, kv heads, max_context, head dim]
  int axis = 2;         ///< the sequence axis
  /// Where the export's own decode step writes the new slice: at the
  /// sequence's position (a GroupQueryAttention cache) or after the past
  /// (Concat(past, new)); `pcc-run --check` reads it back from there.
  bool newAtPosition = false;
};

/// The graph input the rewrite adds: each sequence's write position, int64 [batch].
inline constexpr const char* kCachePositionInput = "pcc_cache_position";

/// Rewrites every pair of `g` (imported with each past at max_context - 1
/// positions and one new position per step, so each present holds
/// max_context): the Concat(past, new) that computes present becomes
/// TensorScatter(cache, new, pcc_cache_position) along the same axis; the
/// cache is a new graph input and present stays a graph output. The graph's
/// inputs become: the export's other inputs in order, pcc_cache_position, then
/// the caches in pair order; its outputs: the other outputs, then the caches
/// after the step in pair order. \returns the states, or an invalid-input
/// error naming the present output and the node that computes it when a pair
/// is not in that form (never a partial rewrite).
StatusOr<std::vector<KvCacheState>> rewriteKvCache(Graph& g, const std::vector<KvCachePair>& pairs,
                                                   const std::string& modelPath);

/// The same rewrite for the prefill program (docs/generation.md#prefill), on
/// `g` imported with several new positions per sequence; `decode` are the
/// decode step's states, whose names and cache types the prefill's states
/// take. A present of the GroupQueryAttention form (past imported at
/// max_context - max_prompt) is rewritten as in rewriteKvCache. A present
/// `Concat(past, new)` (past imported at one position, a placeholder the
/// attention mask hides) keeps its Concat, the attention reading the
/// placeholder and the new positions as the export does; the past becomes a
/// zero constant, and the new positions are also written into the cache at
/// pcc_cache_position (TensorScatter), the state output. \returns the states,
/// or an invalid-input error as rewriteKvCache.
StatusOr<std::vector<KvCacheState>> rewriteKvCachePrefill(Graph& g, const std::vector<KvCachePair>& pairs,
                                                          const std::vector<KvCacheState>& decode,
                                                          const std::string& modelPath);

/// For a prefill program that starts from an empty cache (GroupQueryAttention
/// form: its `max_prompt` new positions written from position 0): makes each
/// Attention that reads the written caches (TensorScatter outputs, positions
/// on axis 2, a bool mask [.., .., queries, positions]) read only their first
/// `keys` positions: Slices of the keys, values and mask (of a mask compared
/// from constant key positions, a Slice of the constant). Exact when no
/// query sees a key past `keys` (a prefill run: query i sees keys [0, i]);
/// the rest of the cache is all masked. \returns the Attentions changed.
StatusOr<int> limitPrefillAttention(Graph& g, int64_t keys);

/// The input of a prefill program that reads only each sequence's last
/// prompt position (lastPositionLogits): int64 [batch, 1, hidden], every
/// element the sequence's last prompt index.
inline constexpr const char* kLastPositionInput = "pcc_last_position";

/// For a prefill program: makes the logits `logits` ([batch, positions,
/// vocab], a MatMul of hidden states [batch, positions, hidden] by a
/// constant [hidden, vocab]) the logits of each sequence's last prompt
/// position only ([batch, 1, vocab]): the hidden states are gathered at
/// kLastPositionInput (GatherElements along the positions) before the
/// MatMul, so the vocabulary's product runs on one row per sequence, not
/// on every position. The input goes after the export's own inputs, before
/// pcc_cache_position and the caches.
/// \returns false, the graph unchanged, when the logits are not such a MatMul.
StatusOr<bool> lastPositionLogits(Graph& g, const std::string& logits);

}  // namespace pcc
