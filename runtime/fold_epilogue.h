// The epilogue (runtime/support/epilogue.h) an instruction offered for
// folding (Backend::prepareFolded) computes: read from the plan's kernel table
// for a LAUNCH (Kernel.epilogue), from the op and its attributes for a KERNEL.
#pragma once

#include "runtime/backend.h"
#include "runtime/support/epilogue.h"

namespace pcc {

/// The most steps a folded epilogue holds: oneDNN refuses more post-ops than
/// 32 on one primitive; a longer chain runs unfolded.
inline constexpr size_t kMaxEpilogueSteps = 32;

/// Appends to `e` the steps candidate `c` applies to its chain input (the
/// previous instruction's output) when it is such a chain: one float32 output
/// of the chain input's type, its other inputs float32. The folded kernel
/// takes the candidate's other inputs, in order, from index `firstOperand`
/// (Backend::prepareFolded's convention), which the steps' operands name.
/// \returns whether it is and the steps fit kMaxEpilogueSteps (`e` is left
/// alone when not).
bool appendEpilogue(const FoldCandidate& c, int firstOperand, Epilogue* e);

/// \returns the steps' names joined by '+' ("add+relu"), for profiles.
std::string epilogueSummary(const Epilogue& e);

}  // namespace pcc
