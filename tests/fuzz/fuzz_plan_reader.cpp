// Bytes -> plan.pb of a bundle whose weight files come from a real plan
// (PCC_FUZZ_BUNDLE, set by tools/fuzz.sh), then the reader, every weight
// load and one run of the first rank program. A plan either loads whole or is
// refused with a Status, and a plan that loads runs or fails with a Status.
//
//  1. Re-signing: plan.pb ends in the crc32 of every byte before it
//     (docs/plan-format.md). A mutant of a signed seed keeps the seed's
//     trailer, now stale: it is replaced by the mutant's own, and bytes with
//     no trailer get one appended, so mutants reach the parser and the
//     validation behind the checksum instead of stopping at it.
//  2. Loading: loadPlanBundle validates the plan (plan_io.cpp), then every
//     weight of every rank is read and its checksum checked.
//  3. Running: the first rank's program is prepared on the CPU backend (its
//     kernels made for the plan's types, folded epilogues included) and run
//     once on zero inputs, without communicators (a collective is an error,
//     not a wait). Plans whose tensors would exceed kRunBytes are only
//     loaded: the fuzzer's memory limit is for leaks, not for large plans.
#include <filesystem>

#include "runtime/executor.h"
#include "runtime/plan_convert.h"
#include "runtime/plan_io.h"
#include "tests/fuzz/fuzz_util.h"

namespace fs = std::filesystem;

namespace {

constexpr uint8_t kCrcTag = 0x65;  // Plan.plan_crc32: field 12, fixed32
constexpr uint64_t kRunBytes = uint64_t{64} << 20;

uint32_t le32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(b[at + i])) << (8 * i);
  return v;
}

/// \returns `bytes` ending in their own checksum (step 1).
std::string resigned(std::string bytes) {
  const size_t n = bytes.size();
  if (n >= 5 && static_cast<uint8_t>(bytes[n - 5]) == kCrcTag) {
    if (le32(bytes, n - 4) == pcc::crc32Of(bytes.data(), n - 5)) return bytes;
    bytes.resize(n - 5);  // a stale trailer
  }
  uint32_t crc = pcc::crc32Of(bytes.data(), bytes.size());
  bytes.push_back(static_cast<char>(kCrcTag));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return bytes;
}

/// \returns whether rank program `prog` and the plan's inputs fit kRunBytes.
bool smallEnough(const pcc::LoadedPlan& p, const pcc::plan::RankProgram& prog) {
  uint64_t total = prog.arena_bytes();
  for (const pcc::plan::Buffer& b : prog.buffers())
    if (b.arena_offset() < 0 && b.weight() < 0) total += pcc::fromDesc(b.desc()).bytes();
  for (const pcc::plan::IoDesc& d : p.plan.inputs()) total += pcc::fromDesc(d.desc()).bytes();
  return total <= kRunBytes;
}

/// Step 3: prepares and runs the first rank program once on zero inputs.
void runFirstRank(const pcc::LoadedPlan& p) {
  if (p.plan.ranks_size() == 0 || !smallEnough(p, p.plan.ranks(0))) return;
  auto exec = pcc::Executor::create(p, p.plan.ranks(0), /*verifyChecksums=*/false);
  if (!exec.ok()) return;
  std::vector<pcc::Tensor> inputs;
  for (const pcc::plan::IoDesc& d : p.plan.inputs()) inputs.push_back(pcc::Tensor::zeros(pcc::fromDesc(d.desc())));
  std::vector<pcc::OutputPiece> outputs;
  (void)(*exec)->run(inputs, nullptr, &outputs).ok();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* bundle = std::getenv("PCC_FUZZ_BUNDLE");
  fs::path dir = fs::path(pcc::fuzz::scratchDir()) / "plan.pcc";
  fs::create_directories(dir);
  // Every file but plan.pb, the kernels/ directory of generated code included.
  if (bundle)
    for (const auto& e : fs::directory_iterator(bundle))
      if (e.path().filename() != "plan.pb")
        fs::copy(e.path(), dir / e.path().filename(),
                 fs::copy_options::overwrite_existing | fs::copy_options::recursive);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = pcc::fuzz::scratchDir() + "/plan.pcc";
  std::string bytes = resigned(std::string(reinterpret_cast<const char*>(data), size));
  pcc::fuzz::writeFile(dir + "/plan.pb", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto p = pcc::loadPlanBundle(dir);
  if (!p.ok()) return 0;
  bool weightsOk = true;
  for (const auto& prog : p->plan.ranks())
    for (int w = 0; w < prog.weights_size(); ++w) weightsOk &= pcc::loadWeight(*p, prog, w, true).ok();
  if (weightsOk) runFirstRank(*p);
  return 0;
}
