// Helpers for the runtime tests: building plans by hand with the protobuf API.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/launcher.h"
#include "runtime/plan_convert.h"
#include "runtime/plan_io.h"

namespace pcc::testing_rt {

/// \returns a fresh, empty directory path for bundle `name` (not yet created),
/// private to this process (two test binaries may run at once).
inline std::string freshDir(const std::string& name) {
  std::string d = ::testing::TempDir() + "pcc_rt_" + std::to_string(::getpid()) + "_" + name;
  std::filesystem::remove_all(d);
  return d;
}

inline TensorType f32(Dims shape) { return {DType::kF32, std::move(shape)}; }

/// Builds one RankProgram.
class ProgBuilder {
 public:
  ProgBuilder(plan::RankProgram* p, int rank, WeightFileWriter* weights = nullptr)
      : p_(p), weights_(weights) {
    p_->set_rank(rank);
    if (weights_) p_->set_weight_file("rank" + std::to_string(rank) + ".bin");
  }

  /// \returns the id of a new run-time buffer.
  int buffer(const std::string& name, const TensorType& t) {
    plan::Buffer* b = p_->add_buffers();
    b->set_id(next_);
    b->set_name(name);
    *b->mutable_desc() = toDesc(t);
    b->set_weight(-1);
    b->set_arena_offset(-1);  // outside the arena unless the test plans memory
    b->set_in_place_of(-1);
    return next_++;
  }
  /// \returns the id of a new buffer bound to weight `t`.
  int weight(const std::string& name, const Tensor& t) {
    *p_->add_weights() = weights_->add(name, t);
    int id = buffer(name, t.type());
    p_->mutable_buffers(p_->buffers_size() - 1)->set_weight(p_->weights_size() - 1);
    return id;
  }
  plan::Instruction* kernel(const std::string& op, std::vector<int> in, std::vector<int> out,
                            const std::string& node = "") {
    plan::Instruction* i = add(plan::Instruction::KERNEL, std::move(in), std::move(out));
    i->set_op(op);
    i->set_node(node.empty() ? op + std::to_string(p_->instructions_size()) : node);
    return i;
  }
  plan::Instruction* collective(plan::Instruction::Kind k, int in, int out, int group, int dim = 0) {
    plan::Instruction* i = add(k, {in}, {out});
    i->set_group(group);
    i->set_dim(dim);
    return i;
  }
  void send(int in, int peer) { add(plan::Instruction::SEND, {in}, {})->set_peer(peer); }
  void recv(int out, int peer) { add(plan::Instruction::RECV, {}, {out})->set_peer(peer); }
  void free(std::vector<int> ids) { add(plan::Instruction::FREE, std::move(ids), {}); }
  void input(int buf, int index, int splitDim = -1, int64_t off = 0, int64_t len = 0) {
    bind(p_->add_inputs(), buf, index, splitDim, off, len);
  }
  void output(int buf, int index, int splitDim = -1, int64_t off = 0, int64_t len = 0) {
    bind(p_->add_outputs(), buf, index, splitDim, off, len);
  }

 private:
  plan::Instruction* add(plan::Instruction::Kind k, std::vector<int> in, std::vector<int> out) {
    plan::Instruction* i = p_->add_instructions();
    i->set_kind(k);
    for (int x : in) i->add_inputs(x);
    for (int x : out) i->add_outputs(x);
    return i;
  }
  static void bind(plan::IoBinding* b, int buf, int index, int splitDim, int64_t off, int64_t len) {
    b->set_buffer(buf);
    b->set_index(index);
    b->set_split_dim(splitDim);
    b->set_offset(off);
    b->set_length(len);
  }

  plan::RankProgram* p_;
  WeightFileWriter* weights_;
  int next_ = 0;
};

inline void addIo(plan::Plan* p, bool input, const std::string& name, const TensorType& t) {
  plan::IoDesc* d = input ? p->add_inputs() : p->add_outputs();
  d->set_name(name);
  *d->mutable_desc() = toDesc(t);
}

inline void addGroup(plan::Plan* p, const std::string& axis, std::vector<int> ranks) {
  plan::Group* g = p->add_groups();
  g->set_axis(axis);
  for (int r : ranks) g->add_ranks(r);
}

/// \returns a tensor of `t` filled with a deterministic pattern.
inline Tensor pattern(const TensorType& t, float scale = 0.1f, float shift = 0.f) {
  Tensor x = Tensor::zeros(t);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.mutableData<float>()[i] = scale * static_cast<float>((i * 7) % 11) - 0.5f + shift;
  return x;
}

/// Sets the plan's mesh and every rank program's mesh_coord (ranks laid out
/// as the compiler does: tp fastest, then dp, then pp).
inline void setMesh(plan::Plan* p, int pp, int dp, int tp) {
  p->mutable_mesh()->set_pp(pp);
  p->mutable_mesh()->set_dp(dp);
  p->mutable_mesh()->set_tp(tp);
  for (plan::RankProgram& r : *p->mutable_ranks()) {
    r.clear_mesh_coord();
    for (int c : {r.rank() / (tp * dp), (r.rank() / tp) % dp, r.rank() % tp}) r.add_mesh_coord(c);
  }
}

/// \returns `p` with a mesh: its own, or pp=1 dp=1 tp=N for a plan built
/// without one.
inline plan::Plan withMesh(plan::Plan p) {
  if (!p.has_mesh()) setMesh(&p, 1, 1, p.ranks_size());
  else setMesh(&p, p.mesh().pp(), p.mesh().dp(), p.mesh().tp());
  return p;
}

/// Writes the bundle (with a mesh, see withMesh). \returns its directory.
inline std::string writeBundle(const std::string& name, const plan::Plan& p,
                               std::map<std::string, WeightFileWriter*> files = {}) {
  std::string dir = freshDir(name);
  Status st = writePlanBundle(dir, withMesh(p), files, "{}");
  EXPECT_TRUE(st.ok()) << st.message();
  return dir;
}

/// Writes the bundle and loads it back.
inline LoadedPlan writeAndLoad(const std::string& name, const plan::Plan& p,
                               std::map<std::string, WeightFileWriter*> files = {}) {
  std::string dir = writeBundle(name, p, files);
  auto lp = loadPlanBundle(dir);
  EXPECT_TRUE(lp.ok()) << lp.status().message();
  return lp.ok() ? std::move(lp).value() : LoadedPlan{};
}

/// Expects `got` to equal `want` within 1e-5.
inline void expectClose(const Tensor& got, const Tensor& want) {
  Diff d = compareTensors(got, want, 1e-5, 1e-5);
  EXPECT_TRUE(d.ok) << d.where << " got " << got.str() << " want " << want.str();
}

}  // namespace pcc::testing_rt
