// Checks of REGION instructions:
//  1. the op is If, Loop or Scan with its number of bodies (2, 1, 1);
//  2. the attributes give the layout (captures, num_scan_inputs), which must
//     fit the instruction's inputs; each body's parameters and results are
//     counted against the inputs and outputs;
//  3. each body is checked as a small program: its buffers, its parameter and
//     result lists, its instructions (nested REGIONs recurse, depth-bounded).
// Types are checked where the runtime prepares the region (runtime/region.cpp).
#include "runtime/plan_regions.h"

#include <algorithm>
#include <map>
#include <set>

#include "runtime/plan_io.h"

namespace pcc {

namespace {

/// \returns int attribute `name` of `ins`, `dflt` when absent, or an error when it is not an int.
StatusOr<int64_t> intAttr(const plan::Instruction& ins, const std::string& name, int64_t dflt, const std::string& ctx) {
  for (const plan::Attr& a : ins.attrs()) {
    if (a.name() != name) continue;
    if (a.value_case() != plan::Attr::kI) return invalidInput(ctx, ": attribute '", name, "' is not an int");
    return a.i();
  }
  return dflt;
}

Status checkBody(const plan::Body& b, const plan::RankProgram& prog, const std::string& ctx, int depth) {
  std::map<int, const plan::Buffer*> byId;
  for (const plan::Buffer& buf : b.buffers()) {
    std::string bctx = strCat(ctx, ": buffer ", buf.id(), " '", buf.name(), "'");
    if (buf.id() < 0) return invalidInput(bctx, ": a buffer id must not be negative");
    if (!byId.emplace(buf.id(), &buf).second) return invalidInput(bctx, ": id ", buf.id(), " is defined twice");
    RETURN_IF_ERROR(checkTensorDesc(buf.desc(), bctx));
    if (buf.weight() < -1 || buf.weight() >= prog.weights_size())
      return invalidInput(bctx, ": weight index ", buf.weight(), " is out of range (", prog.weights_size(), " weights)");
    if (buf.weight() >= 0) {
      const plan::TensorDesc& w = prog.weights(buf.weight()).desc();
      if (w.dtype() != buf.desc().dtype() ||
          !std::equal(w.shape().begin(), w.shape().end(), buf.desc().shape().begin(), buf.desc().shape().end()))
        return invalidInput(bctx, ": its type differs from its weight '", prog.weights(buf.weight()).name(), "'");
    }
    if (buf.arena_offset() != -1 || buf.in_place_of() != -1)
      return invalidInput(bctx, ": a body buffer is placed in the arena or in place (arena_offset ", buf.arena_offset(),
                          ", in_place_of ", buf.in_place_of(), "); body buffers are allocated when the body runs");
  }
  std::set<int> params;
  for (int id : b.params()) {
    if (!byId.count(id)) return invalidInput(ctx, ": parameter names no buffer (", id, ")");
    if (!params.insert(id).second) return invalidInput(ctx, ": buffer ", id, " is bound to two parameters");
    if (byId.at(id)->weight() >= 0) return invalidInput(ctx, ": parameter buffer ", id, " holds a weight");
  }
  for (int id : b.results())
    if (!byId.count(id)) return invalidInput(ctx, ": result names no buffer (", id, ")");
  for (int i = 0; i < b.instructions_size(); ++i) {
    const plan::Instruction& ins = b.instructions(i);
    std::string ictx = strCat(ctx, ": instruction #", i);
    if (!ins.node().empty()) ictx += strCat(" (node '", ins.node(), "')");
    using K = plan::Instruction;
    bool free = ins.kind() == K::FREE;
    if (ins.kind() != K::KERNEL && ins.kind() != K::REGION && !free)
      return invalidInput(ictx, ": a body holds KERNEL, FREE and REGION instructions only, not ",
                          K::Kind_IsValid(ins.kind()) ? K::Kind_Name(ins.kind()) : strCat("kind ", static_cast<int>(ins.kind())));
    for (int id : ins.inputs())
      if (!byId.count(id) && !(id == -1 && !free)) return invalidInput(ictx, ": input names no buffer (", id, ")");
    for (int id : ins.outputs()) {
      if (!byId.count(id) && !(id == -1 && !free)) return invalidInput(ictx, ": output names no buffer (", id, ")");
      if (id >= 0 && (params.count(id) || byId.at(id)->weight() >= 0))
        return invalidInput(ictx, ": writes buffer ", id, ", which holds a parameter or a weight");
    }
    if (free && ins.outputs_size() != 0) return invalidInput(ictx, ": FREE has outputs");
    if (ins.kind() == K::KERNEL && ins.op().empty()) return invalidInput(ictx, ": a kernel without an op");
    if (ins.kind() == K::REGION) RETURN_IF_ERROR(checkRegion(ins, prog, ictx, depth + 1));
  }
  return Status::OK();
}

}  // namespace

StatusOr<RegionLayout> regionLayout(const plan::Instruction& ins, const std::string& ctx) {
  RegionLayout l;
  int64_t numIn = ins.inputs_size(), numOut = ins.outputs_size();
  size_t wantBodies = 1;
  if (ins.op() == "If") {
    l.op = RegionLayout::Op::kIf;
    wantBodies = 2;
  } else if (ins.op() == "Loop") {
    l.op = RegionLayout::Op::kLoop;
  } else if (ins.op() == "Scan") {
    l.op = RegionLayout::Op::kScan;
  } else {
    return invalidInput(ctx, ": REGION op '", ins.op(), "' is not If, Loop or Scan");
  }
  if (static_cast<size_t>(ins.bodies_size()) != wantBodies)
    return invalidInput(ctx, ": ", ins.op(), " has ", ins.bodies_size(), " bodies, expected ", wantBodies);
  if (l.op == RegionLayout::Op::kIf) {
    if (numIn < 1) return invalidInput(ctx, ": If takes its condition first, the plan gives no input");
    l.captures = numIn - 1;
  } else {
    ASSIGN_OR_RETURN(l.captures, intAttr(ins, "captures", 0, ctx));
    int64_t fixed = 0;
    if (l.op == RegionLayout::Op::kLoop) {
      fixed = 2;
    } else {
      ASSIGN_OR_RETURN(l.scanInputs, intAttr(ins, "num_scan_inputs", 0, ctx));
      if (l.scanInputs < 1) return invalidInput(ctx, ": Scan num_scan_inputs = ", l.scanInputs, " is below 1");
      fixed = l.scanInputs;
    }
    if (l.captures < 0 || fixed > numIn || l.captures > numIn - fixed)
      return invalidInput(ctx, ": ", ins.op(), " with ", fixed, l.op == RegionLayout::Op::kLoop ? " leading" : " scan",
                          " inputs and captures = ", l.captures, " does not fit its ", numIn, " inputs");
    l.carried = numIn - fixed - l.captures;
  }
  for (int64_t i = 0; i < numIn; ++i)
    if (ins.inputs(static_cast<int>(i)) == -1 && !(l.op == RegionLayout::Op::kLoop && i < 2))
      return invalidInput(ctx, ": input ", i, " of ", ins.op(), " is absent");
  int64_t wantParams = l.op == RegionLayout::Op::kIf ? numIn - 1 : numIn;
  int64_t wantResults = l.op == RegionLayout::Op::kLoop ? numOut + 1 : numOut;  // Loop: the condition first
  if (l.op != RegionLayout::Op::kIf) {
    l.scanOutputs = numOut - l.carried;
    if (l.scanOutputs < 0)
      return invalidInput(ctx, ": ", ins.op(), " has ", numOut, " outputs, fewer than its ", l.carried,
                          l.op == RegionLayout::Op::kLoop ? " loop-carried values" : " states");
  }
  for (const plan::Body& b : ins.bodies())
    if (b.params_size() != wantParams || b.results_size() != wantResults)
      return invalidInput(ctx, ": body '", b.name(), "' has ", b.params_size(), " parameters and ", b.results_size(),
                          " results, the ", ins.op(), " passes ", wantParams, " and takes ", wantResults);
  return l;
}

Status checkRegion(const plan::Instruction& ins, const plan::RankProgram& prog, const std::string& ctx, int depth) {
  if (depth > kMaxRegionDepth) return invalidInput(ctx, ": regions nest deeper than ", kMaxRegionDepth, " levels");
  RETURN_IF_ERROR(regionLayout(ins, ctx).status());
  for (const plan::Body& b : ins.bodies())
    RETURN_IF_ERROR(checkBody(b, prog, strCat(ctx, ": body '", b.name(), "'"), depth));
  return Status::OK();
}

}  // namespace pcc
