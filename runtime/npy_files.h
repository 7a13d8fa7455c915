// NumPy tensor files: one tensor per .npy file (a folder of NAME.npy), or many
// in one .npz archive keyed by name (what numpy.savez writes). The .npy header
// dictionary is read and written by xtensor's npy code (xtensor/xnpy.hpp),
// the .npz zip container by libzip. Used by pcc-run's --inputs, --expect and
// --outputs (docs/cli.md#tensor-files).
//
// Taken: C-order arrays of float32 ('<f4'), float16 ('<f2'), float64 ('<f8'),
// int64, int32, int16 ('<i8', '<i4', '<i2'), uint64, uint32, uint16, int8,
// uint8 and bool ('|i1', '|u1', '|b1'), header versions 1.0 and 2.0 in the
// dictionary form numpy writes. Refused with an invalid-input error naming the
// file: Fortran order, object and other dtypes, big-endian data, a truncated or
// over-long file, a header that is not numpy's, a bool other than 0 or 1, a
// damaged zip archive or entry (its CRC), an entry that is not NAME.npy.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// Tensors by name (ordered by name).
using NamedTensors = std::map<std::string, Tensor>;

/// \returns the tensor held by the .npy bytes `bytes`; errors begin with `what` (the file).
StatusOr<Tensor> decodeNpy(std::string_view bytes, const std::string& what);

/// \returns `t` as .npy bytes (version 1.0 header, C order), or an error for a
/// dtype numpy has no .npy form of (bfloat16, the 8- and 4-bit floats).
StatusOr<std::string> encodeNpy(const Tensor& t);

/// Reads one .npy file.
StatusOr<Tensor> readNpyFile(const std::string& path);

/// Reads the .npz archive `path`: every entry NAME.npy as tensor NAME.
/// `sources` (optional) receives, per name, "PATH:NAME.npy".
StatusOr<NamedTensors> readNpz(const std::string& path, std::map<std::string, std::string>* sources = nullptr);

/// \returns the .npz archive (stored, uncompressed entries NAME.npy) of `tensors`.
StatusOr<std::string> encodeNpz(const NamedTensors& tensors);

/// The file name of tensor `name` in a folder: NAME.npy, every byte of NAME
/// but ASCII letters, digits, '_', '-' and '.' (a leading '.' too) written
/// %XX (two upper-case hex digits): "a/b:0" -> "a%2Fb%3A0.npy".
/// \returns the file name, or an error for an empty name or one whose file
/// name would exceed 255 bytes.
StatusOr<std::string> npyFileName(const std::string& name);

/// \returns the tensor name that file name `file` (NAME.npy) spells, or an
/// error when it is not the one spelling npyFileName gives.
StatusOr<std::string> npyTensorName(const std::string& file);

/// \returns whether the folder `dir` holds a file named *.npy.
bool holdsNpyFiles(const std::string& dir);

/// Reads every NAME.npy of folder `dir` (other files are left alone).
/// `sources` (optional) receives each name's file.
StatusOr<NamedTensors> readNpyFolder(const std::string& dir, std::map<std::string, std::string>* sources = nullptr);

/// Reads `path`: an .npz archive when it is a file, else a folder of .npy files.
StatusOr<NamedTensors> readNamedTensors(const std::string& path,
                                        std::map<std::string, std::string>* sources = nullptr);

/// Writes `tensors` as the .npz archive `path`, whole or not at all (a
/// temporary file renamed over it).
Status writeNpz(const std::string& path, const NamedTensors& tensors);

/// Writes every tensor as `dir`/npyFileName(name), creating `dir`.
Status writeNpyFolder(const std::string& dir, const NamedTensors& tensors);

/// \returns the tensors of `wanted` ((name, type) in order) from `got`: exit-2
/// errors for a name `got` lacks, a name `wanted` lacks, and a dtype or shape
/// other than the one wanted, each naming the file (`sources`, else `origin`),
/// the tensor and what was expected. `kind`: "input" or "output".
StatusOr<std::vector<Tensor>> matchNamedTensors(const NamedTensors& got,
                                                const std::vector<std::pair<std::string, TensorType>>& wanted,
                                                const std::string& kind, const std::string& origin,
                                                const std::map<std::string, std::string>& sources = {});

}  // namespace pcc
