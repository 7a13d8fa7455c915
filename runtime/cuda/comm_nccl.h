// NCCL communicators for the cuda backend: one per plan group the rank
// belongs to, and one over all ranks for send/recv. Ranks meet through the
// same rendezvous store as gloo's (in-process, or a directory shared by rank
// processes): the group's first rank writes its ncclUniqueId there and the
// others read it.
#pragma once

#include <memory>

#include "runtime/comm_gloo.h"
#include "runtime/communicator.h"
#include "runtime/cuda/device.h"

namespace pcc::cuda {

/// \returns the NCCL type of `d`, or false when NCCL has none (bool is
/// carried as uint8, which only all-gather, send and recv accept).
bool ncclTypeOf(DType d, ncclDataType_t* out);

/// \returns the store key of the unique id of group `group` ("world" for the
/// send/recv communicator): "pcc/nccl/<group>".
std::string ncclIdKey(const std::string& group);

/// \returns a factory whose communicators run on `dev`'s communication
/// stream; every collective waits at most `options.timeout`, then aborts the
/// communicator and fails naming the rank and the collective.
std::unique_ptr<CommunicatorFactory> ncclCommunicatorFactory(std::shared_ptr<Device> dev,
                                                             std::shared_ptr<GlooStore> store,
                                                             const GlooOptions& options);

}  // namespace pcc::cuda
