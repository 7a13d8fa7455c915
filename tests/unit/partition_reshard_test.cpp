// The resharding steps (passes/partition/reshard.h): which collectives bring a
// value from one layout to another. Lowering and the search share them.
#include <gtest/gtest.h>

#include "passes/partition/reshard.h"

namespace pcc {
namespace {

constexpr MeshAxis N = MeshAxis::kNone, DP = MeshAxis::kDP, TP = MeshAxis::kTP;

Sharding sh(std::vector<MeshAxis> dims, MeshAxis partial = N) { return Sharding{std::move(dims), partial}; }

/// "all_reduce(tp) all_gather(tp,1) ..." with the dims each step touches.
std::string describe(const std::vector<ReshardStep>& steps) {
  std::string s;
  for (const ReshardStep& st : steps) {
    if (!s.empty()) s += " ";
    const std::string axis(meshAxisName(st.axis));
    switch (st.kind) {
      case ReshardStep::kAllReduce: s += "all_reduce(" + axis + ")"; break;
      case ReshardStep::kReduceScatter: s += "reduce_scatter(" + axis + "," + std::to_string(st.dim) + ")"; break;
      case ReshardStep::kAllGather: s += "all_gather(" + axis + "," + std::to_string(st.dim) + ")"; break;
      case ReshardStep::kAllToAll:
        s += "all_to_all(" + axis + "," + std::to_string(st.fromDim) + "->" + std::to_string(st.dim) + ")";
        break;
      case ReshardStep::kSlice: s += "slice(" + axis + "," + std::to_string(st.dim) + ")"; break;
    }
  }
  return s;
}

/// The steps from `cur` to `req`, checked to end at `req` with each step's
/// result the next one's start.
std::string steps(const Sharding& cur, const Sharding& req) {
  std::vector<ReshardStep> st = reshardSteps(cur, req);
  Sharding at = cur;
  for (const ReshardStep& s : st) {
    EXPECT_FALSE(s.result == at) << "a step that changes nothing: " << describe({s});
    at = s.result;
  }
  EXPECT_TRUE(at == req) << "ends at " << at.str() << ", wanted " << req.str();
  return describe(st);
}

TEST(PartitionReshard, PartialToSplitIsOneReduceScatter) {
  EXPECT_EQ(steps(sh({N, N}, TP), sh({N, TP})), "reduce_scatter(tp,1)");
  EXPECT_EQ(steps(sh({N, N, N}, TP), sh({TP, N, N})), "reduce_scatter(tp,0)");
  // Another axis splitting the batch stays as it is.
  EXPECT_EQ(steps(sh({DP, N}, TP), sh({DP, TP})), "reduce_scatter(tp,1)");
}

TEST(PartitionReshard, PartialWithOtherChangesKeepsTheAllReduce) {
  // The dimension the target splits is split over dp now: gathered first.
  EXPECT_EQ(steps(sh({DP, N}, TP), sh({TP, N})), "all_reduce(tp) all_gather(dp,0) slice(tp,0)");
  // Whole target: nothing to scatter.
  EXPECT_EQ(steps(sh({N, N}, TP), sh({N, N})), "all_reduce(tp)");
  // The target splits over another axis than the partial sum's.
  EXPECT_EQ(steps(sh({N, N}, TP), sh({DP, N})), "all_reduce(tp) slice(dp,0)");
}

TEST(PartitionReshard, SplitToAnotherDimIsOneAllToAll) {
  EXPECT_EQ(steps(sh({N, TP}), sh({TP, N})), "all_to_all(tp,1->0)");
  EXPECT_EQ(steps(sh({TP, N, N}), sh({N, N, TP})), "all_to_all(tp,0->2)");
  EXPECT_EQ(steps(sh({DP, N, TP}), sh({DP, TP, N})), "all_to_all(tp,2->1)");
}

TEST(PartitionReshard, AllToAllNeedsTheTargetDimWhole) {
  // Dim 0 is split over dp, which the target moves to dim 1: both change.
  EXPECT_EQ(steps(sh({DP, TP}), sh({TP, DP})), "all_gather(dp,0) all_to_all(tp,1->0) slice(dp,1)");
}

TEST(PartitionReshard, OldCasesAreUnchanged) {
  EXPECT_EQ(steps(sh({N, N}), sh({N, N})), "");
  EXPECT_EQ(steps(sh({TP, N}), sh({TP, N})), "");
  EXPECT_EQ(steps(sh({N, TP}), sh({N, N})), "all_gather(tp,1)");
  EXPECT_EQ(steps(sh({N, N}), sh({N, TP})), "slice(tp,1)");
  EXPECT_EQ(steps(sh({DP, N}), sh({DP, TP})), "slice(tp,1)");
  EXPECT_EQ(steps(sh({DP, TP}), sh({N, N})), "all_gather(dp,0) all_gather(tp,1)");
  EXPECT_EQ(steps(sh({N, N}, TP), sh({N, N}, TP)), "");
}

TEST(PartitionReshard, IsLocalMeansSlicesOnly) {
  EXPECT_TRUE(isLocal(reshardSteps(sh({N, N}), sh({TP, N}))));
  EXPECT_TRUE(isLocal({}));
  EXPECT_FALSE(isLocal(reshardSteps(sh({N, TP}), sh({TP, N}))));
  EXPECT_FALSE(isLocal(reshardSteps(sh({N, N}, TP), sh({TP, N}))));
}

}  // namespace
}  // namespace pcc
