// fold-batchnorm: folds an inference BatchNormalization that follows a Conv
// into the Conv's weights and bias.
//
// Algorithm (one pattern of passes/rewrite/pattern.h, rooted at
// BatchNormalization):
//  1. Match BatchNormalization(Conv(X, W[, b]), scale, B, mean, var) where
//     the Conv's output has no other reader, W, b, scale, B, mean and var
//     are constants, and the types are f32 or f64. Anything else is left alone.
//  2. Per output channel m: k[m] = scale[m] / sqrt(var[m] + epsilon),
//     computed in double.
//  3. New constants W'[m, ...] = W[m, ...] * k[m] and
//     b'[m] = (b[m] - mean[m]) * k[m] + B[m] (b = 0 without a bias).
//  4. A new Conv(X, W', b') with the old Conv's attributes replaces the
//     BatchNormalization; the old Conv and unused constants go.
// Each fold counts as "batchnorm_folded" in PassContext::stats.

#include <cmath>
#include <memory>

#include "passes/registry.h"
#include "passes/rewrite/pattern.h"

namespace pcc {

namespace {

bool isFoldableFloat(DType t) { return t == DType::kF32 || t == DType::kF64; }

class FoldConvBatchNorm : public RewritePattern {
 public:
  OpKind rootOp() const override { return OpKind::BatchNormalization; }
  std::string_view name() const override { return "batchnorm_folded"; }
  bool countsAsStat() const override { return true; }

  StatusOr<bool> matchAndRewrite(Node& bn, PatternRewriter& rw) const override {
    // Step 1.
    Node* conv = producerOf(bn.input(0), OpKind::Conv);
    if (!conv || !hasOneUse(rw.graph(), conv->output()) || bn.attrs().getInt("training_mode", 0) != 0) return false;
    Value* w = conv->input(1);
    Value* b = conv->input(2);
    if (!w || !w->isConstant() || (b && !b->isConstant())) return false;
    for (size_t i = 1; i < 5; ++i)
      if (!bn.input(i) || !bn.input(i)->isConstant()) return false;
    const Tensor& wt = w->constantData();
    DType dt = wt.dtype();
    if (!isFoldableFloat(dt) || bn.output()->type().dtype != dt || wt.rank() < 1) return false;
    int64_t channels = wt.shape()[0];
    for (size_t i = 1; i < 5; ++i)
      if (bn.input(i)->type() != TensorType{dt, {channels}}) return false;
    if (b && b->type() != TensorType{dt, {channels}}) return false;

    // Step 2.
    const Tensor& scale = bn.input(1)->constantData();
    const Tensor& shift = bn.input(2)->constantData();
    const Tensor& mean = bn.input(3)->constantData();
    const Tensor& var = bn.input(4)->constantData();
    double eps = bn.attrs().getFloat("epsilon", 1e-5f);
    std::vector<double> k(static_cast<size_t>(channels));
    for (int64_t m = 0; m < channels; ++m) k[m] = scale.getDouble(m) / std::sqrt(var.getDouble(m) + eps);

    // Step 3.
    Tensor w2 = Tensor::zeros(wt.type());
    int64_t per = channels ? wt.numel() / channels : 0;
    for (int64_t m = 0; m < channels; ++m)
      for (int64_t i = 0; i < per; ++i) w2.setDouble(m * per + i, wt.getDouble(m * per + i) * k[m]);
    Tensor b2 = Tensor::zeros(dt, {channels});
    for (int64_t m = 0; m < channels; ++m) {
      double bias = b ? b->constantData().getDouble(m) : 0.0;
      b2.setDouble(m, (bias - mean.getDouble(m)) * k[m] + shift.getDouble(m));
    }

    // Step 4.
    Value* wv = rw.constant(w->name() + "_bn", std::move(w2));
    Value* bv = rw.constant((b ? b->name() : w->name()) + "_bn_bias", std::move(b2));
    ASSIGN_OR_RETURN(Node * folded, rw.create(OpKind::Conv, {conv->input(0), wv, bv}, conv->attrs()));
    if (folded->output()->type() != bn.output()->type())
      return internalError("folded Conv typed ", folded->output()->type().str(), ", not ", bn.output()->type().str());
    rw.replace(bn.output(), folded->output());
    return true;
  }
};

class FoldBatchNormPass : public Pass {
 public:
  FoldBatchNormPass() { patterns_.push_back(std::make_unique<FoldConvBatchNorm>()); }
  std::string_view name() const override { return "fold-batchnorm"; }
  StatusOr<bool> run(Graph& g, PassContext& ctx) override { return applyPatterns(g, patterns_, ctx); }

 private:
  PatternList patterns_;
};

}  // namespace

std::unique_ptr<Pass> createFoldBatchNormPass() { return std::make_unique<FoldBatchNormPass>(); }

}  // namespace pcc
