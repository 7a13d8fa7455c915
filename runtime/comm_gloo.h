// Communicator over gloo (CPU ranks, TCP on loopback by default). Ranks meet
// through a rendezvous store: one in-process store shared by rank threads, or
// a directory (FileStore) shared by rank processes. Each group of the plan gets
// its own gloo context (its own connections), keyed in the store by the group
// index, so collectives of different groups never match each other.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/support/status.h"

namespace gloo::rendezvous {
class Store;
}

namespace pcc {

class TcpStoreClient;

/// A rendezvous store shared by all ranks of one run. Use a fresh one per run:
/// keys of an earlier run would be mistaken for this run's.
class GlooStore {
 public:
  /// \returns a store for rank threads of this process.
  static std::shared_ptr<GlooStore> inProcess();
  /// \returns a store in directory `dir` (created if needed) for rank
  /// processes. Its waits are bounded by `timeout` (gloo's file store would
  /// wait its own 30 seconds).
  static StatusOr<std::shared_ptr<GlooStore>> inDirectory(const std::string& dir, std::chrono::milliseconds timeout);
  /// \returns a store over a client of the TCP rendezvous store
  /// (runtime/tcp_store.h), for rank processes on one or several machines.
  /// Its waits are bounded by the client's request timeout.
  static std::shared_ptr<GlooStore> overTcp(std::shared_ptr<TcpStoreClient> client);
  /// \returns a store whose keys are this store's under `prefix`: a second
  /// set of communicators of the same ranks (another program of the same
  /// session) meets there without mistaking the first set's keys for its own.
  std::shared_ptr<GlooStore> withPrefix(const std::string& prefix) const;

  gloo::rendezvous::Store& store() { return *store_; }
  /// \returns the gloo store, to share with other libraries' rendezvous (a
  /// NCCL unique id) for as long as they need it.
  std::shared_ptr<gloo::rendezvous::Store> shared() const { return store_; }

 private:
  explicit GlooStore(std::shared_ptr<gloo::rendezvous::Store> s) : store_(std::move(s)) {}
  std::shared_ptr<gloo::rendezvous::Store> store_;
};

/// One group of ranks (a Plan.groups entry).
using GlooGroup = CommGroup;

struct GlooOptions {
  /// Bound on connecting and on every collective or transfer.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  /// Address the rank listens on (and its peers connect to): loopback by
  /// default, which only serves ranks on one machine. A name, an IPv4
  /// address, or an IPv6 address bare or in brackets ("::1", "[fd00::2]").
  std::string hostname = "127.0.0.1";
  /// When not empty, the network interface whose address the rank listens on
  /// instead of `hostname` ("eth0").
  std::string iface;
};

/// Connects global rank `rank` of `worldSize`: a communicator for every group
/// in `groups` that contains it (with the other members, which must call this
/// concurrently), and a world communicator when `withWorld`.
/// \returns the communicators, or an internal error naming the rank and group
/// when a connection cannot be made within the timeout.
StatusOr<RankComms> connectGloo(GlooStore& store, int rank, int worldSize,
                                const std::vector<GlooGroup>& groups, bool withWorld,
                                const GlooOptions& options);

/// \returns a factory that connects ranks with connectGloo through `store`.
std::unique_ptr<CommunicatorFactory> glooCommunicatorFactory(std::shared_ptr<GlooStore> store,
                                                             const GlooOptions& options);

}  // namespace pcc
