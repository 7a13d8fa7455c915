#include "runtime/onnx_tensor.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>

#include "runtime/support/confined_path.h"

namespace pcc {

namespace {

std::string tensorLabel(const onnx::TensorProto& p) {
  return strCat("tensor '", p.name().empty() ? std::string("<unnamed>") : p.name(), "'");
}

/// Parses a non-negative decimal integer of an external_data entry.
std::optional<uint64_t> parseUnsigned(const std::string& s) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

/// \returns the bytes a tensor of `numel` elements of `dtype` takes in an ONNX
/// file: the 4-bit types pack two elements a byte, low nibble first.
uint64_t fileBytes(DType dtype, uint64_t numel) {
  return isSubByte(dtype) ? (numel + 1) / 2 : numel * dtypeSize(dtype);
}

/// \returns a tensor holding the 4-bit elements of `packed` one per byte
/// (int4 sign-extended).
Tensor unpack4(DType dtype, Dims dims, const uint8_t* packed) {
  Tensor t = Tensor::zeros(dtype, std::move(dims));
  uint8_t* out = t.mutableData<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint8_t v = (packed[i / 2] >> (i % 2 ? 4 : 0)) & 0xf;
    out[i] = dtype == DType::kI4 && v >= 8 ? static_cast<uint8_t>(v | 0xf0) : v;
  }
  return t;
}

StatusOr<Tensor> fromExternal(const onnx::TensorProto& p, DType dtype, Dims dims, size_t nbytes,
                              const std::string& baseDir, ExternalDataFiles* files) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      auto v = parseUnsigned(kv.value());
      if (!v) return invalidInput(tensorLabel(p), ": external data ", kv.key(), " '", kv.value(), "' is not a number");
      (kv.key() == "offset" ? offset : length.emplace()) = *v;
    }
    // "checksum" and unknown keys are informational.
  }
  if (location.empty()) return invalidInput(tensorLabel(p), ": external data without a location");
  // As the ONNX specification requires: relative to the file's folder, and inside it.
  auto confined = confinedPath(baseDir, location, tensorLabel(p) + ": external data location");
  if (!confined.ok()) return confined.status();
  std::filesystem::path path(*confined);

  std::shared_ptr<MappedFile> file;
  if (files) {
    auto f = files->get(path.string());
    if (!f.ok()) return f.status().withContext(strCat(tensorLabel(p), ": external data"));
    file = *f;
  } else {
    auto f = MappedFile::open(path.string());
    if (!f.ok()) return f.status().withContext(strCat(tensorLabel(p), ": external data"));
    file = *f;
  }
  uint64_t len = length ? *length : (offset <= file->size() ? file->size() - offset : 0);
  if (offset > file->size() || len > file->size() - offset)
    return invalidInput(tensorLabel(p), ": external data [", offset, ", ", offset, "+", len,
                        ") lies outside ", file->path(), " (", file->size(), " bytes)");
  if (len != nbytes)
    return invalidInput(tensorLabel(p), ": external data holds ", len, " bytes, ", dtypeName(dtype),
                        dimsToString(dims), " needs ", nbytes);
  const uint8_t* ptr = nbytes ? file->data() + offset : file->data();
  if (isSubByte(dtype)) return unpack4(dtype, std::move(dims), ptr);  // unpacked copy
  // A misaligned element pointer is undefined behaviour for the kernels; such
  // (rare) files are copied, all others are used in place.
  if (nbytes && reinterpret_cast<uintptr_t>(ptr) % dtypeSize(dtype) != 0) {
    Tensor t = Tensor::zeros(dtype, std::move(dims));
    std::memcpy(t.mutableData(), ptr, nbytes);
    return t;
  }
  if (const size_t forbid = forbiddenReadBytes(); forbid > 0 && nbytes >= forbid) forbidMappedReads(ptr, nbytes);
  return Tensor::mappedView(dtype, std::move(dims), ptr, std::shared_ptr<const void>(file, file->data()));
}

/// Copies `count` typed values into a new tensor, narrowing each with `conv`.
template <typename Dst, typename Src, typename Conv>
Tensor fromTyped(DType dtype, Dims dims, const Src& src, Conv conv) {
  Tensor t = Tensor::zeros(dtype, std::move(dims));
  Dst* out = t.mutableData<Dst>();
  for (int i = 0; i < src.size(); ++i) out[i] = conv(src.Get(i));
  return t;
}

}  // namespace

StatusOr<std::shared_ptr<MappedFile>> ExternalDataFiles::get(const std::string& path) {
  auto it = files_.find(path);
  if (it != files_.end()) return it->second;
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> f, MappedFile::open(path));
  files_[path] = f;
  return f;
}

StatusOr<Tensor> tensorFromProto(const onnx::TensorProto& p, const std::string& baseDir,
                                 ExternalDataFiles* files) {
  std::optional<DType> dtype = dtypeFromOnnx(p.data_type());
  if (!dtype) return invalidInput(tensorLabel(p), ": unsupported data type ", p.data_type());
  if (p.has_segment()) return invalidInput(tensorLabel(p), ": segmented tensors are not supported");
  Dims dims(p.dims().begin(), p.dims().end());
  // Reject negative dims and byte sizes over the limit of one tensor.
  for (int64_t d : dims)
    if (d < 0) return invalidInput(tensorLabel(p), ": negative dimension in ", dimsToString(dims));
  RETURN_IF_ERROR(checkTensorSize(TensorType{*dtype, dims}).withContext(tensorLabel(p)));
  uint64_t numel = *checkedNumElements(dims);
  size_t nbytes = static_cast<size_t>(fileBytes(*dtype, numel));

  if (p.data_location() == onnx::TensorProto::EXTERNAL)
    return fromExternal(p, *dtype, std::move(dims), nbytes, baseDir, files);

  if (p.has_raw_data()) {
    if (p.raw_data().size() != nbytes)
      return invalidInput(tensorLabel(p), ": raw_data holds ", p.raw_data().size(), " bytes, ",
                          dtypeName(*dtype), dimsToString(dims), " needs ", nbytes);
    const auto* bytes = reinterpret_cast<const uint8_t*>(p.raw_data().data());
    if (isSubByte(*dtype)) return unpack4(*dtype, std::move(dims), bytes);
    Tensor t = Tensor::zeros(*dtype, std::move(dims));
    if (nbytes) std::memcpy(t.mutableData(), bytes, nbytes);
    return t;
  }
  auto checkCount = [&](int have, const char* field, uint64_t want) -> Status {
    if (static_cast<uint64_t>(have) != want)
      return invalidInput(tensorLabel(p), ": ", field, " holds ", have, " values, ", dtypeName(*dtype),
                          dimsToString(dims), " needs ", want);
    return Status::OK();
  };
  switch (*dtype) {
    case DType::kF32:
      RETURN_IF_ERROR(checkCount(p.float_data_size(), "float_data", numel));
      return fromTyped<float>(*dtype, std::move(dims), p.float_data(), [](float v) { return v; });
    case DType::kF64:
      RETURN_IF_ERROR(checkCount(p.double_data_size(), "double_data", numel));
      return fromTyped<double>(*dtype, std::move(dims), p.double_data(), [](double v) { return v; });
    case DType::kI64:
      RETURN_IF_ERROR(checkCount(p.int64_data_size(), "int64_data", numel));
      return fromTyped<int64_t>(*dtype, std::move(dims), p.int64_data(), [](int64_t v) { return v; });
    case DType::kI32:
      RETURN_IF_ERROR(checkCount(p.int32_data_size(), "int32_data", numel));
      return fromTyped<int32_t>(*dtype, std::move(dims), p.int32_data(), [](int32_t v) { return v; });
    case DType::kI8:
      RETURN_IF_ERROR(checkCount(p.int32_data_size(), "int32_data", numel));
      return fromTyped<int8_t>(*dtype, std::move(dims), p.int32_data(),
                               [](int32_t v) { return static_cast<int8_t>(v); });
    case DType::kU8:
      RETURN_IF_ERROR(checkCount(p.int32_data_size(), "int32_data", numel));
      return fromTyped<uint8_t>(*dtype, std::move(dims), p.int32_data(),
                                [](int32_t v) { return static_cast<uint8_t>(v); });
    case DType::kBool:
      RETURN_IF_ERROR(checkCount(p.int32_data_size(), "int32_data", numel));
      return fromTyped<uint8_t>(*dtype, std::move(dims), p.int32_data(),
                                [](int32_t v) { return static_cast<uint8_t>(v != 0); });
    case DType::kF16:
    case DType::kBF16:  // the 16 bits of each value are stored in int32_data
      RETURN_IF_ERROR(checkCount(p.int32_data_size(), "int32_data", numel));
      return fromTyped<uint16_t>(*dtype, std::move(dims), p.int32_data(),
                                 [](int32_t v) { return static_cast<uint16_t>(v); });
    case DType::kI16:
      RETURN_IF_ERROR(checkCount(p.int32_data_size(), "int32_data", numel));
      return fromTyped<int16_t>(*dtype, std::move(dims), p.int32_data(),
                                [](int32_t v) { return static_cast<int16_t>(v); });
    case DType::kU16:
      RETURN_IF_ERROR(checkCount(p.int32_data_size(), "int32_data", numel));
      return fromTyped<uint16_t>(*dtype, std::move(dims), p.int32_data(),
                                 [](int32_t v) { return static_cast<uint16_t>(v); });
    case DType::kU32:
      RETURN_IF_ERROR(checkCount(p.uint64_data_size(), "uint64_data", numel));
      return fromTyped<uint32_t>(*dtype, std::move(dims), p.uint64_data(),
                                 [](uint64_t v) { return static_cast<uint32_t>(v); });
    case DType::kU64:
      RETURN_IF_ERROR(checkCount(p.uint64_data_size(), "uint64_data", numel));
      return fromTyped<uint64_t>(*dtype, std::move(dims), p.uint64_data(), [](uint64_t v) { return v; });
    case DType::kF8E4M3FN: case DType::kF8E4M3FNUZ: case DType::kF8E5M2: case DType::kF8E5M2FNUZ:
    case DType::kF8E8M0:  // one code per int32_data value
      RETURN_IF_ERROR(checkCount(p.int32_data_size(), "int32_data", numel));
      return fromTyped<uint8_t>(*dtype, std::move(dims), p.int32_data(),
                                [](int32_t v) { return static_cast<uint8_t>(v); });
    case DType::kI4: case DType::kU4: case DType::kF4E2M1: {  // one packed byte per int32_data value
      RETURN_IF_ERROR(checkCount(p.int32_data_size(), "int32_data", nbytes));
      std::vector<uint8_t> packed(p.int32_data().begin(), p.int32_data().end());
      return unpack4(*dtype, std::move(dims), packed.data());
    }
    case DType::kUndefined: break;
  }
  return invalidInput(tensorLabel(p), ": unsupported data type ", p.data_type());
}

void tensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->Clear();
  p->set_name(name);
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
  if (!isSubByte(t.dtype())) {
    p->set_raw_data(t.raw(), t.nbytes());
    return;
  }
  std::string packed(static_cast<size_t>(fileBytes(t.dtype(), t.numel())), '\0');
  const uint8_t* v = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    packed[i / 2] = static_cast<char>(packed[i / 2] | (v[i] & 0xf) << (i % 2 ? 4 : 0));
  p->set_raw_data(std::move(packed));
}

StatusOr<Tensor> readTensorFile(const std::string& path, std::string* name) {
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::open(path));
  if (file->size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    return invalidInput(path, ": tensor file larger than 2 GiB (use external data)");
  onnx::TensorProto p;
  if (!p.ParseFromArray(file->data(), static_cast<int>(file->size())))
    return invalidInput(path, ": not a valid ONNX TensorProto file");
  std::string baseDir = std::filesystem::path(path).parent_path().string();
  if (name) *name = p.name();
  auto t = tensorFromProto(p, baseDir);
  if (!t.ok()) return t.status().withContext(path);
  return t;
}

Status writeTensorFile(const std::string& path, const Tensor& t, const std::string& name) {
  onnx::TensorProto p;
  tensorToProto(t, name, &p);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return invalidInput(path, ": cannot open for writing");
  if (!p.SerializeToOstream(&out)) return invalidInput(path, ": write failed");
  out.close();
  if (!out) return invalidInput(path, ": write failed");
  return Status::OK();
}

}  // namespace pcc
