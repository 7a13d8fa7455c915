// Conversion between ONNX TensorProto and pcc::Tensor, and the tensor files of
// the ONNX backend-test layout (input_0.pb, output_0.pb: one serialized
// TensorProto each). Used by the importer for initializers and by the runtime
// tools for inputs and expected outputs.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h

#include "runtime/support/mapped_file.h"
#include "runtime/support/status.h"
#include "runtime/support/tensor.h"

namespace pcc {

/// The external-data files opened while reading one model, so that the many
/// tensors stored in one file share one mapping. Not thread-safe.
class ExternalDataFiles {
 public:
  /// \returns the mapping of `path`, opening it on first use.
  StatusOr<std::shared_ptr<MappedFile>> get(const std::string& path);

 private:
  std::map<std::string, std::shared_ptr<MappedFile>> files_;
};

/// Converts an ONNX tensor. The data comes from raw_data, from the typed fields
/// (float_data; int32_data for i32/i8/u8/bool and for the bits of f16/bf16;
/// int64_data; double_data), or from an external file (data_location EXTERNAL,
/// keys location/offset/length, location relative to `baseDir`). External data
/// is memory-mapped and returned as a view that keeps the mapping alive: it is
/// not copied, except when its offset is not a multiple of the element size.
/// `files` (optional) shares mappings between calls.
/// \returns the tensor, or an invalid-input error naming the tensor when its
/// dtype is unsupported, its data size does not match its dims, or its
/// external file is missing or too short.
StatusOr<Tensor> tensorFromProto(const onnx::TensorProto& p, const std::string& baseDir,
                                 ExternalDataFiles* files = nullptr);

/// Fills `p` with `t` (name, dims, data_type, raw_data little-endian).
void tensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* p);

/// Reads a file holding one serialized TensorProto (external data in it is
/// resolved relative to the file's directory).
/// \returns the tensor, or an invalid-input error naming the file.
/// When `name` is given, it receives the TensorProto's name (may be empty).
StatusOr<Tensor> readTensorFile(const std::string& path, std::string* name = nullptr);

/// Writes `t` as one serialized TensorProto named `name`.
/// \returns ok, or an invalid-input error naming the file when it cannot be written.
Status writeTensorFile(const std::string& path, const Tensor& t, const std::string& name);

}  // namespace pcc
