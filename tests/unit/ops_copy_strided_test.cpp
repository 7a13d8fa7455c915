// copyStrided (runtime/ops/op_util.h), the copy under Transpose, Slice,
// Expand and Tile: against an element-by-element walk of the same view, for
// transposes, slices with steps (negative too), broadcasts (stride 0) and
// size-1 dims, in every element size.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "runtime/ops/op_util.h"

namespace pcc::ops {
namespace {

/// The plain walk: one element at a time, the index advanced dim by dim.
std::vector<char> walk(const std::vector<char>& src, int64_t base, const std::vector<int64_t>& strides,
                       const Dims& shape, size_t es) {
  int64_t n = numElements(shape);
  std::vector<char> out(static_cast<size_t>(n) * es);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = base;
    for (size_t k = 0; k < shape.size(); ++k) off += idx[k] * strides[k];
    std::memcpy(out.data() + i * es, src.data() + off * es, es);
    for (size_t k = shape.size(); k-- > 0;)
      if (++idx[k] < shape[k]) break;
      else idx[k] = 0;
  }
  return out;
}

void expectSame(const Dims& inShape, int64_t base, const std::vector<int64_t>& strides, const Dims& shape,
                size_t es) {
  std::vector<char> src(static_cast<size_t>(numElements(inShape)) * es);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  std::vector<char> want = walk(src, base, strides, shape, es);
  std::vector<char> got(want.size() + es, 'x');  // one guard element past the end
  copyStrided(src.data(), base, strides, shape, got.data(), es);
  for (size_t b = 0; b < es; ++b) EXPECT_EQ(got[want.size() + b], 'x') << "wrote past the end";
  got.resize(want.size());
  EXPECT_EQ(got, want) << "element size " << es << ", rank " << shape.size();
}

TEST(CopyStrided, TransposesOfEveryElementSize) {
  for (size_t es : {1u, 2u, 3u, 4u, 8u}) {
    Dims in = {2, 3, 4, 5};
    std::vector<int64_t> s = stridesOf(in);
    expectSame(in, 0, {s[0], s[2], s[1], s[3]}, {2, 4, 3, 5}, es);  // keeps the last dim: rows of 5
    expectSame(in, 0, {s[0], s[2], s[3], s[1]}, {2, 4, 5, 3}, es);  // moves it: strided rows
    expectSame(in, 0, {s[3], s[2], s[1], s[0]}, {5, 4, 3, 2}, es);
    expectSame(in, 0, s, in, es);                                    // identity: one row
  }
}

TEST(CopyStrided, SlicesBroadcastsAndSizeOneDims) {
  for (size_t es : {2u, 4u, 8u}) {
    Dims in = {4, 6, 8};
    std::vector<int64_t> s = stridesOf(in);
    expectSame(in, s[0] + 2, {s[0], s[1], s[2]}, {3, 6, 5}, es);        // a window
    expectSame(in, s[0] + 2 * s[1], {s[0], s[1], s[2]}, {3, 4, 8}, es);  // whole rows
    expectSame(in, 7, {s[0], s[1], -1}, {4, 6, 8}, es);                  // reversed last dim
    expectSame(in, 3 * s[0], {-s[0], 2 * s[1], 3}, {4, 3, 3}, es);       // steps, one negative
    expectSame({8}, 0, {0, 1}, {5, 8}, es);                             // a row broadcast
    expectSame({5, 1}, 0, {1, 0}, {5, 8}, es);                          // a column broadcast
    expectSame({6}, 0, {0, 1, 0}, {1, 6, 1}, es);                       // size-1 dims
    expectSame({1}, 0, {}, {}, es);                                     // a scalar
    expectSame({3}, 0, {0, 0}, {4, 5}, es);                             // all from one element
  }
}

TEST(CopyStrided, RandomViews) {
  std::mt19937 rng(11);
  for (int t = 0; t < 200; ++t) {
    size_t rank = 1 + rng() % 5;
    Dims shape(rank);
    for (int64_t& d : shape) d = 1 + rng() % 4;
    // A random permutation of a random input, with some dims broadcast.
    std::vector<int64_t> s = stridesOf(shape), perm(rank);
    for (size_t k = 0; k < rank; ++k) perm[k] = static_cast<int64_t>(k);
    std::shuffle(perm.begin(), perm.end(), rng);
    Dims out(rank);
    std::vector<int64_t> strides(rank);
    for (size_t k = 0; k < rank; ++k) {
      out[k] = shape[perm[k]];
      strides[k] = rng() % 4 == 0 ? 0 : s[perm[k]];
    }
    expectSame(shape, 0, strides, out, 4);
  }
}

}  // namespace
}  // namespace pcc::ops
