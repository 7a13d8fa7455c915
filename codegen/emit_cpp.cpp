// emitCppLibrary: KernelSpecs -> one C++ source for the CPU shared object.
//
// Algorithm, per kernel:
//  1. View the index space as R rows of C elements (C the last merged
//     dimension, R the product of the others; one element when empty).
//  2. Cut each row into blocks of kBlock elements and share the R * blocks
//     tasks among OpenMP threads (only when there are enough elements to pay
//     for the threads).
//  3. Per task: split the row number into its index along each outer
//     dimension once, and from it each input's base offset.
//  4. The inner loop over the block is an `omp simd` loop whose loads are
//     base + c * (input's last stride) and whose stores are r * C + c: unit
//     or zero strides that the compiler vectorizes. Output 0 may be input 0's
//     memory (planned in place): element c is read before it is written and
//     no element is read by another, so the loop stays correct.
//     float16 and bfloat16 elements are `unsigned short`, widened to float
//     on load and rounded to nearest even on store by the prelude's portable
//     pk_from_f16 / pk_to_f16 (bf16 alike), which the library holds only
//     when one of its kernels needs them.
//
// A reduction kernel (KernelSpec::reduces) instead, per row (OpenMP over rows):
//  5. One pass over the row per reduction, in Expr order: an `omp simd` loop
//     that evaluates the reduction's operand at each point (earlier
//     reductions are in scope) and sums it with a compensated (Kahan) sum in
//     float32, or takes its max.
//  6. A last `omp simd` pass evaluates and stores the outputs over the whole
//     index space at r * C + c, then the outputs over the rows are evaluated
//     once and stored at r. Every read of row r precedes every write of it,
//     so output 0 may still lie over input 0.
//
// For the whole library:
//  7. Each kernel is cloned per x86-64 vector width (target_clones: AVX-512,
//     AVX2, the baseline), the loader picking one for the processor; the
//     scalar helpers are inlined into each clone. exp, tanh, sigmoid, erf and
//     both GELUs come from vectorMathPrelude (the C library's expf, tanhf and
//     erff would keep those loops scalar).
#include "codegen/attention_kernel.h"
#include "codegen/kernel_emit.h"

namespace pcc {

namespace {

constexpr int64_t kBlock = 4096;
constexpr int64_t kParallelElements = 32768;

/// \returns the kernel's opening: its signature and typed parameter pointers.
std::string opening(const std::string& name, const KernelSpec& spec) {
  std::string s = strCat("extern \"C\" PK_KERNEL void ", name, "(const void* const* pk_in, void* const* pk_out) {\n");
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    std::string t = storageTypeOf(spec.inputs[k].type.dtype, false);
    s += strCat("  const ", t, "* in", k, " = (const ", t, "*)pk_in[", k, "];\n");
  }
  for (size_t k = 0; k < spec.outputs.size(); ++k) {
    std::string t = storageTypeOf(spec.outputs[k].type.dtype, false);
    s += strCat("  ", t, "* out", k, " = (", t, "*)pk_out[", k, "];\n");
  }
  return s;
}

/// \returns the statements that split row number `r` into its index along
/// each outer dimension and give each input its base offset `bK` there.
std::string rowBases(const KernelSpec& spec, const std::string& indent) {
  const std::vector<int64_t>& d = spec.dims;
  size_t outer = d.empty() ? 0 : d.size() - 1;
  std::string s;
  if (outer > 0) {
    s += indent + "long long q = r;\n";
    for (size_t j = outer; j-- > 0;) {
      if (j == 0) {
        s += indent + "const long long i0 = q;\n";
      } else {
        s += strCat(indent, "const long long i", j, " = q % ", d[j], "LL; q /= ", d[j], "LL;\n");
      }
    }
  }
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    std::string base = "0LL";
    for (size_t j = 0; j < outer; ++j)
      if (spec.inputs[k].strides[j] != 0) base += strCat(" + i", j, " * ", spec.inputs[k].strides[j], "LL");
    s += strCat(indent, "const long long b", k, " = ", base, ";\n");
  }
  return s;
}

/// \returns the C expression of input k's element at point c of the row.
std::string rowLoad(const KernelSpec& spec, int k) {
  int64_t last = spec.dims.empty() ? 0 : spec.inputs[k].strides.back();
  if (last == 0) return strCat("in", k, "[b", k, "]");
  if (last == 1) return strCat("in", k, "[b", k, " + c]");
  return strCat("in", k, "[b", k, " + c * ", last, "LL]");
}

/// \returns the pragma sharing the loop that follows over the OpenMP threads
/// when `elements` pay for waking them, else nothing: the sizes are known
/// here, and a parallel region whose `if` is false still costs a call into
/// the OpenMP runtime on every run (most of a small kernel's time).
std::string parallelFor(int64_t elements) {
  if (elements < kParallelElements) return "";
  return "#pragma omp parallel for schedule(static)\n";
}

/// Steps 5 and 6: a reduction kernel.
std::string emitReduction(const std::string& name, const KernelSpec& spec) {
  std::string s = opening(name, spec);
  s += strCat("  const long long R = ", spec.rows(), "LL, C = ", spec.rowLength(), "LL;\n");
  s += parallelFor(spec.rows() * spec.rowLength());
  s += "  for (long long r = 0; r < R; ++r) {\n";
  s += rowBases(spec, "    ");
  auto load = [&](int k) { return rowLoad(spec, k); };
  std::vector<bool> have(spec.exprs.size(), false);
  // Step 5.
  for (size_t i = 0; i < spec.exprs.size(); ++i) {
    const Expr& e = spec.exprs[i];
    if (!isReduceOp(e.op)) continue;
    int a = e.args.at(0);
    std::string body = exprLines(spec, {a}, have, "        ", load);
    s += strCat("    float v", i, ";\n    {\n");
    if (e.op == ScalarOp::kReduceSum) {
      s += "      float pk_s = 0.0f, pk_c = 0.0f;\n#pragma omp simd reduction(+ : pk_s, pk_c)\n";
      s += "      for (long long c = 0; c < C; ++c) {\n" + body;
      s += strCat("        const float pk_y = v", a, " - pk_c, pk_t = pk_s + pk_y;\n");
      s += "        pk_c = (pk_t - pk_s) - pk_y;\n        pk_s = pk_t;\n      }\n";
      s += strCat("      v", i, " = pk_s - pk_c;\n");
    } else {
      s += "      float pk_m = -1.0f / 0.0f;\n#pragma omp simd reduction(max : pk_m)\n";
      s += "      for (long long c = 0; c < C; ++c) {\n" + body;
      s += strCat("        pk_m = pk_max(pk_m, v", a, ");\n      }\n");
      s += strCat("      v", i, " = pk_m;\n");
    }
    s += "    }\n";
    have[i] = true;
  }
  // Step 6.
  std::vector<int> full, perRow;
  for (const KernelOutput& o : spec.outputs) (o.perRow ? perRow : full).push_back(o.expr);
  if (!full.empty()) {
    s += "#pragma omp simd\n    for (long long c = 0; c < C; ++c) {\n";
    s += exprLines(spec, full, have, "      ", load);
    for (size_t k = 0; k < spec.outputs.size(); ++k)
      if (!spec.outputs[k].perRow) s += strCat("      out", k, "[r * C + c] = ", outputValue(spec, k), ";\n");
    s += "    }\n";
  }
  if (!perRow.empty()) {
    s += "    {\n";
    s += exprLines(spec, perRow, have, "      ", load);
    for (size_t k = 0; k < spec.outputs.size(); ++k)
      if (spec.outputs[k].perRow) s += strCat("      out", k, "[r] = ", outputValue(spec, k), ";\n");
    s += "    }\n";
  }
  s += "  }\n}\n";
  return s;
}

std::string emitOne(const std::string& name, const KernelSpec& spec) {
  if (spec.attention) return emitAttentionCpp(name, *spec.attention);
  if (spec.reduces) return emitReduction(name, spec);
  // Step 1.
  const std::vector<int64_t>& d = spec.dims;
  int64_t C = d.empty() ? 1 : d.back();
  int64_t R = spec.numel() / (C ? C : 1);
  if (C == 0) R = 0;
  std::string s = opening(name, spec);
  s += strCat("  const long long R = ", R, "LL, C = ", C, "LL, NB = (C + ", kBlock - 1, "LL) / ", kBlock, "LL;\n");
  // Step 2.
  s += parallelFor(R * C);
  s += "  for (long long t = 0; t < R * NB; ++t) {\n";
  s += strCat("    const long long r = t / NB, c0 = (t % NB) * ", kBlock, "LL, c1 = c0 + ", kBlock, "LL < C ? c0 + ",
              kBlock, "LL : C;\n");
  // Step 3.
  size_t outer = d.empty() ? 0 : d.size() - 1;
  if (outer > 0) {
    s += "    long long q = r;\n";
    for (size_t j = outer; j-- > 0;) {
      if (j == 0) {
        s += "    const long long i0 = q;\n";
      } else {
        s += strCat("    const long long i", j, " = q % ", d[j], "LL; q /= ", d[j], "LL;\n");
      }
    }
  }
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    std::string base = "0LL";
    for (size_t j = 0; j < outer; ++j)
      if (spec.inputs[k].strides[j] != 0) base += strCat(" + i", j, " * ", spec.inputs[k].strides[j], "LL");
    s += strCat("    const long long b", k, " = ", base, ";\n");
  }
  if (outer == 0) s += "    (void)r;\n";
  // Step 4.
  s += "#pragma omp simd\n";
  s += "    for (long long c = c0; c < c1; ++c) {\n";
  auto load = [&](int k) {
    int64_t last = d.empty() ? 0 : spec.inputs[k].strides.back();
    if (last == 0) return strCat("in", k, "[b", k, "]");
    if (last == 1) return strCat("in", k, "[b", k, " + c]");
    return strCat("in", k, "[b", k, " + c * ", last, "LL]");
  };
  s += exprStatements(spec, "      ", load, "r * C + c");
  s += "    }\n  }\n}\n";
  return s;
}

}  // namespace

std::string emitCppLibrary(const std::vector<std::pair<std::string, const KernelSpec*>>& kernels) {
  std::string s = "// Generated by pcc: the fused kernels of one plan (docs/kernels.md).\n#include <math.h>\n";
  // Step 7: one copy of each kernel per x86-64 vector width, picked when the
  // library is loaded (an ifunc), so the library runs on any x86-64 machine
  // and uses AVX-512 or AVX2 where the processor has them.
  s += "#if defined(__x86_64__) && defined(__has_attribute)\n"
       "#if __has_attribute(target_clones)\n"
       "#define PK_KERNEL __attribute__((target_clones(\"avx512f\", \"avx2\", \"default\")))\n"
       "#endif\n"
       "#endif\n"
       "#ifndef PK_KERNEL\n"
       "#define PK_KERNEL\n"
       "#endif\n";
  bool half = false;
  for (const auto& kernel : kernels) half = half || usesHalfTypes(*kernel.second);
  if (half) s += "#include <string.h>\n";
  s += "\n";
  s += scalarPrelude("static inline", /*vectorMath=*/true);
  if (half) s += halfConversionsCpp();
  // The group's name: model text, encoded so that it cannot leave the comment.
  for (const auto& [name, spec] : kernels)
    s += strCat("\n// ", sourceSafeText(spec->group), "\n", emitOne(name, *spec));
  return s;
}

}  // namespace pcc
