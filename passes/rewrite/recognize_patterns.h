// The patterns of the recognize pass (passes/recognize.cpp holds the pass
// and its algorithm), by family.
#pragma once

#include "passes/rewrite/pattern.h"

namespace pcc {

/// Appends the LayerNormalization and RMSNormalization patterns (the cores
/// first, then the absorption of scale and bias) to `out`.
void addNormPatterns(PatternList& out);

/// Appends the Gelu, Swish and HardSwish patterns to `out`.
void addActivationPatterns(PatternList& out);

/// Appends the Attention patterns (the 4-D core, then the absorption of the
/// head Reshape/Transpose into the 3-D layout) to `out`.
void addAttentionPatterns(PatternList& out);

}  // namespace pcc
