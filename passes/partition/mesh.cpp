#include "passes/partition/mesh.h"

namespace pcc {

int Mesh::extent(MeshAxis axis) const {
  switch (axis) {
    case MeshAxis::kDP: return dp;
    case MeshAxis::kTP: return tp;
    case MeshAxis::kPP: return pp;
    case MeshAxis::kNone: return 1;
  }
  return 1;
}

int Mesh::coord(int rank, MeshAxis axis) const {
  switch (axis) {
    case MeshAxis::kTP: return rank % tp;
    case MeshAxis::kDP: return (rank / tp) % dp;
    case MeshAxis::kPP: return rank / (tp * dp);
    case MeshAxis::kNone: return 0;
  }
  return 0;
}

std::vector<int> Mesh::groupOf(int rank, MeshAxis axis) const {
  int c[3] = {coord(rank, MeshAxis::kPP), coord(rank, MeshAxis::kDP), coord(rank, MeshAxis::kTP)};
  std::vector<int> out;
  for (int i = 0; i < extent(axis); ++i) {
    int p = c[0], d = c[1], t = c[2];
    if (axis == MeshAxis::kPP) p = i;
    if (axis == MeshAxis::kDP) d = i;
    if (axis == MeshAxis::kTP) t = i;
    out.push_back(rankOf(p, d, t));
  }
  return out;
}

std::string Mesh::str() const { return strCat("pp=", pp, " dp=", dp, " tp=", tp); }

int64_t chunkSize(int64_t total, int parts, int index) {
  return total / parts + (index < total % parts ? 1 : 0);
}

int64_t chunkOffset(int64_t total, int parts, int index) {
  int64_t base = total / parts, rem = total % parts;
  return index * base + std::min<int64_t>(index, rem);
}

Dims localShape(const Dims& global, const Sharding& s, const Mesh& mesh, int rank) {
  Dims d = global;
  for (size_t i = 0; i < d.size() && i < s.dims.size(); ++i)
    if (s.dims[i] != MeshAxis::kNone)
      d[i] = chunkSize(d[i], mesh.extent(s.dims[i]), mesh.coord(rank, s.dims[i]));
  return d;
}

}  // namespace pcc
