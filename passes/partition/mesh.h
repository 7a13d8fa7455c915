// The logical device mesh pp × dp × tp (tp innermost) and its process groups.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace pcc {

struct Mesh {
  int pp = 1, dp = 1, tp = 1;

  int size() const { return pp * dp * tp; }
  /// \returns the number of ranks along `axis` (1 for kNone).
  int extent(MeshAxis axis) const;
  /// \returns rank = (pp_i * dp + dp_i) * tp + tp_i.
  int rankOf(int ppi, int dpi, int tpi) const { return (ppi * dp + dpi) * tp + tpi; }
  /// \returns the coordinate of `rank` along `axis` (0 for kNone).
  int coord(int rank, MeshAxis axis) const;
  /// \returns the ranks that share every coordinate with `rank` except `axis`, in order.
  std::vector<int> groupOf(int rank, MeshAxis axis) const;
  /// \returns "pp=1 dp=2 tp=2".
  std::string str() const;
};

/// \returns the extent of chunk `index` when `total` is split into `parts`
/// nearly equal chunks (the first total % parts chunks are one larger).
int64_t chunkSize(int64_t total, int parts, int index);
/// \returns the start of chunk `index`.
int64_t chunkOffset(int64_t total, int parts, int index);

/// \returns the shape `rank` holds of a tensor of `global` shape laid out as `s`.
Dims localShape(const Dims& global, const Sharding& s, const Mesh& mesh, int rank);

}  // namespace pcc
