// Per-instruction estimates.
//
// Algorithm:
//  1. Walk each rank's graph in the order the plan emitter emits it
//     (codegen/plan_emitter.cpp): a Fused node stands for one LAUNCH of its
//     generated kernel, or else for its body's nodes in order, where a LAUNCH
//     stands for the run of generatable nodes (mayBeGenerated) it starts, as
//     many as it lists in `computes`; a reduction outside any group may be a
//     LAUNCH of its own too; every other node for one instruction.
//  2. Walk the rank program's instructions alongside, skipping FREE ones;
//     each must run the op of the node it meets, else the two walks disagree
//     (an internal error, never a silently shifted estimate).
//  3. A kernel or region instruction gets CostModel::nodeTime of its node (a
//     LAUNCH the sum over its group's nodes, an upper bound); any other
//     instruction what the search charges its node (rankNodeSeconds: a
//     collective over its mesh group, a send over its link).
#include "compiler/instruction_costs.h"

#include "codegen/kernel_desc.h"

#include <algorithm>
#include <map>
#include <optional>

#include "passes/partition/search.h"

namespace pcc {

namespace {

class Annotator {
 public:
  /// `programRank`: the rank whose program `rank` runs (RankGraph::replicaOf), or -1.
  Annotator(int rank, int programRank, const Mesh& mesh, const CostModel& cm, plan::RankProgram& prog)
      : rank_(rank), programRank_(programRank), mesh_(mesh), cm_(cm), prog_(prog) {}

  Status walk(const Graph& g) {
    std::vector<Node*> nodes = g.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node* n = nodes[i];
      while (next_ < prog_.instructions_size() && prog_.instructions(next_).kind() == plan::Instruction::FREE)
        ++next_;
      bool launch = next_ < prog_.instructions_size() && prog_.instructions(next_).kind() == plan::Instruction::LAUNCH;
      if (n->op() == OpKind::Fused) {
        // One LAUNCH for the whole node, unless the LAUNCH is that of a run of its body.
        if (launch && describeFused(*n).ok()) {
          double t = 0;
          for (const Node* m : n->body(0)->nodes()) t += cm_.nodeTime(*m);
          prog_.mutable_instructions(next_++)->set_estimated_seconds(t);
          continue;
        }
        RETURN_IF_ERROR(walk(*n->body(0)));
        continue;
      }
      if (launch && n->op() != OpKind::Fused && mayBeGenerated(*n)) {
        // A run of a fused body, or a reduction of its own (codegen/plan_emitter.cpp): the LAUNCH lists the
        // nodes it computes, in order.
        const int len = std::max(1, prog_.instructions(next_).computes_size());
        double t = 0;
        for (int k = 0; k < len && i < nodes.size(); ++k, ++i) t += cm_.nodeTime(*nodes[i]);
        --i;
        prog_.mutable_instructions(next_++)->set_estimated_seconds(t);
        continue;
      }
      if (next_ >= prog_.instructions_size())
        return internalError("rank ", rank_, ": node ", n->describe(), " has no instruction");
      plan::Instruction& ins = *prog_.mutable_instructions(next_++);
      if (ins.op() != n->opName())
        return internalError("rank ", rank_, ": instruction ", next_ - 1, " runs ", ins.op(), " but node ",
                             n->describe(), " comes next");
      ins.set_estimated_seconds(rankNodeSeconds(*n, rank_, mesh_, cm_, programRank_));
    }
    return Status::OK();
  }

 private:
  int rank_;
  int programRank_;
  const Mesh& mesh_;
  const CostModel& cm_;
  plan::RankProgram& prog_;
  int next_ = 0;
};

}  // namespace

Status recordInstructionEstimates(const std::vector<RankGraph>& ranks, const Mesh& mesh, const CostModel& cm,
                                  plan::Plan& plan) {
  std::map<int, plan::RankProgram*> byRank;
  for (plan::RankProgram& p : *plan.mutable_ranks()) byRank[p.rank()] = &p;
  for (const RankGraph& rg : ranks) {
    auto it = byRank.find(rg.rank);
    if (it == byRank.end()) return internalError("rank ", rg.rank, " has no program in the plan");
    RETURN_IF_ERROR(Annotator(rg.rank, rg.graph ? -1 : rg.replicaOf, mesh, cm, *it->second).walk(programOf(ranks, rg)));
  }
  return Status::OK();
}

}  // namespace pcc
