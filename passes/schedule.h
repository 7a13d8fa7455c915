// Overlap scheduling: reorders a rank program's nodes so that each collective
// starts as soon as its inputs are computed and independent nodes run between
// it and its first reader, while the executor has it in flight
// (docs/partitioning.md#overlap-scheduling, docs/runtime.md#overlapping-communication-with-computation).
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/ir/ir.h"
#include "runtime/support/status.h"

namespace pcc {

struct OverlapScheduleOptions {
  /// How far an independent node may be hoisted over a waiting reader of a
  /// collective, in positions of the original order: a node at original
  /// position p goes before a reader at q only if p - q <= window. It bounds
  /// both how long readers are delayed and how many outputs are made early
  /// (the arena cost).
  size_t window = 32;
};

struct OverlapScheduleStats {
  /// Collectives that may run in the background (AllReduce, AllGather,
  /// ReduceScatter, AllToAll).
  int64_t collectives = 0;
  /// Nodes whose position changed.
  int64_t moved = 0;
  /// Nodes between a collective and its first reader, before and after.
  int64_t overlapBefore = 0, overlapAfter = 0;
};

/// \returns whether `op` is a collective the scheduler moves (not Send/Recv).
bool isOverlappableCollective(OpKind op);

/// \returns the scheduled order of `g`'s nodes, a topological order, without
/// changing `g`. Deterministic (a function of the node order and edges only).
///
///  - Barriers keep their place and nothing crosses them: Send, Recv, region
///    ops (If, Loop, Scan), nodes without outputs, and Fused nodes whose body
///    holds any of these or a collective. The pipeline's receive posting
///    (runtime/executor.cpp, rule 5) and the matching of sends and receives
///    between stages see the same order as before.
///  - Between barriers, a list scheduler over the data dependences issues:
///    a ready collective first; else the lowest-positioned ready node unless
///    it reads a collective still in flight (no reader of it issued yet),
///    in which case the lowest-positioned ready node that reads none, within
///    `window` positions of it, goes first; else the reader.
///  - The collectives keep their relative order (each depends on the one
///    before), so every rank issues its collectives in the order of the
///    unscheduled program: the ranks of a group match as they did.
std::vector<Node*> overlapOrder(const Graph& g, const OverlapScheduleOptions& opts = {},
                                OverlapScheduleStats* stats = nullptr);

/// Reorders `g`'s nodes to overlapOrder. \returns its statistics, or an
/// internal error when the order is not a topological one.
StatusOr<OverlapScheduleStats> scheduleOverlap(Graph& g, const OverlapScheduleOptions& opts = {});

/// \returns the number of nodes between each overlappable collective of
/// `order` and its first reader, summed (a collective never read counts the
/// nodes after it to the end).
int64_t nodesBeforeFirstReaders(const std::vector<Node*>& order);

}  // namespace pcc
