// A small key-value store over TCP for the rendezvous of rank processes on
// several machines (`pcc-run --rendezvous tcp:HOST:PORT`): rank 0 serves it,
// every rank (rank 0 included) is a client. It carries what ranks must tell
// each other before they can talk through a real library (gloo's addresses,
// a NCCL unique id), never tensors or collectives.
//
// Protocol (IPv4 or IPv6, one connection per client, requests answered in
// order):
//   1. Every message is a frame: a 4-byte little-endian body length (at most
//      kMaxFrameBytes), then the body: one byte (the request op or the answer
//      status) and fields, each a 4-byte little-endian length and its bytes.
//   2. A client first says HELLO (run id, rank, world size, "host pid", the
//      run's secret); the server refuses a wrong secret (before anything
//      else, telling nothing of the run), another run id, a rank that is not
//      in its one decimal spelling ("01", "+1", " 1") or outside the world, a
//      second connection of the same rank and another world size, and closes
//      a refused connection. Before its HELLO a connection may hold one
//      HELLO frame (kMaxHelloFrameBytes) and all of them together
//      kMaxPendingHelloBytes: more closes it.
//   3. SET key value, GET key (found or missing), CHECK keys (all present or
//      not), FAIL reason (this rank gave up: its peers read why), BYE (this
//      rank ended on its own), PEERS (every rank's state, and for a live one
//      how long it has been silent). A key belongs to
//      the rank that set it first: another rank's SET of it is refused.
//   4. A client whose connection closes without BYE is recorded as died; a
//      malformed or oversized frame closes that client's connection and
//      nothing else. Keys, values and the store's total size are bounded.
//   5. Waiting for a key is the client's loop of CHECK requests with a
//      growing pause, bounded by its timeout; every socket operation is
//      bounded by the same deadline.
//   6. Out of file descriptors, the server stops accepting for a pause that
//      grows to 200 ms instead of polling its listening socket in a loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/support/status.h"

namespace pcc {

/// Limits of the store (per frame, key, value, and all values together).
constexpr uint32_t kMaxFrameBytes = 17u << 20;
constexpr uint32_t kMaxKeyBytes = 4096;
constexpr uint32_t kMaxValueBytes = 16u << 20;
constexpr uint64_t kMaxStoreBytes = 256ull << 20;
/// Limits before a connection's HELLO: its one frame, and the bytes held
/// for all such connections together.
constexpr size_t kMaxHelloFrameBytes = 8192;
constexpr uint64_t kMaxPendingHelloBytes = 1u << 20;
/// Limits of the run's secret and of a FAIL reason.
constexpr size_t kMaxSecretBytes = 1024;
constexpr size_t kMaxReasonBytes = 2048;

/// A rendezvous endpoint: `tcp:HOST:PORT`, or `tcp:[ADDR]:PORT` for an IPv6
/// address.
struct TcpAddress {
  /// A name, an IPv4 address, or an IPv6 address without its brackets.
  std::string host;
  int port = 0;
  /// "HOST:PORT", or "[ADDR]:PORT" when the host is an IPv6 address.
  std::string str() const;
};

/// \returns the address in `spec` ("tcp:HOST:PORT" or "tcp:[IPV6]:PORT";
/// PORT 0 only with `allowPortZero`), or an invalid-input error naming `spec`
/// (an IPv6 address without brackets is one, and says how to write it).
StatusOr<TcpAddress> parseTcpAddress(const std::string& spec, bool allowPortZero);

/// \returns whether `host` is an IPv6 address literal ("::1", "fd00::2",
/// "fe80::1%eth0" with a zone), without brackets.
bool isIpv6Literal(const std::string& host);

/// \returns the host in `text` as getaddrinfo takes it: a name, an IPv4
/// address, or an IPv6 address bare or in brackets ("[::1]" -> "::1"); or an
/// invalid-input error when it has brackets around anything but an IPv6
/// address, or colons without being an IPv6 address.
StatusOr<std::string> parseHost(const std::string& text);

/// The server: a thread that answers every client until it is destroyed.
class TcpStoreServer {
 public:
  /// Listens on `host`'s port `port` (0: a free port, see port()): on the
  /// loopback address when `host`'s first address is one (127.0.0.0/8, ::1),
  /// else on every interface (a machine's name often resolves to an address
  /// other machines cannot reach): every IPv4 one (0.0.0.0) when `host` has
  /// IPv4 addresses only, every IPv6 and IPv4 one (`::`, dual-stack) when it
  /// has an IPv6 address. Clients must present `secret` (not empty) and say
  /// run id `runId` and world size `worldSize`; all keys and values together
  /// take at most `maxStoreBytes`.
  /// \returns the running server, an invalid-input error for an empty
  /// secret, or an environment error naming HOST:PORT when the port cannot
  /// be bound.
  static StatusOr<std::unique_ptr<TcpStoreServer>> start(const TcpAddress& addr, const std::string& runId,
                                                         const std::string& secret, int worldSize,
                                                         uint64_t maxStoreBytes = kMaxStoreBytes);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  /// \returns the port it listens on.
  int port() const { return port_; }

 private:
  struct State;
  TcpStoreServer() = default;
  void serve();

  int listenFd_ = -1, wakeFd_[2] = {-1, -1}, port_ = 0;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

/// What the store knows of one rank (TcpStoreClient::peers).
struct PeerState {
  enum Kind : char { kNeverArrived = '?', kAlive = 'a', kEnded = 'e', kDied = 'd', kFailed = 'f' };
  Kind kind = kNeverArrived;
  /// "<host> <pid>" as the rank said it in its HELLO.
  std::string where;
  /// kFailed: why the rank gave up, as it said in its FAIL.
  std::string reason;
  /// kAlive: milliseconds since its last request to the store (a live
  /// rank's watcher asks a few times a second; a stopped process is silent).
  int64_t silentMs = 0;
};

/// A client: one connection, shared by the threads of its process (requests
/// are serialized).
class TcpStoreClient {
 public:
  /// Connects to `addr` as rank `rank` of `worldSize` in run `runId`,
  /// presenting the run's `secret`: to each
  /// of its addresses (IPv4 or IPv6) in getaddrinfo's order, retrying all of
  /// them until `timeout` passes (the server may start later).
  /// \returns the client, or an environment error naming the rank and
  /// HOST:PORT (unreachable within the timeout, or refused by the server).
  static StatusOr<std::shared_ptr<TcpStoreClient>> connect(const TcpAddress& addr, const std::string& runId,
                                                           const std::string& secret, int rank, int worldSize,
                                                           std::chrono::milliseconds timeout);
  ~TcpStoreClient();
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  Status set(const std::string& key, const std::vector<char>& value);
  /// \returns the value of `key` once it is set, or an environment error when
  /// it is not within `timeout`.
  StatusOr<std::vector<char>> get(const std::string& key, std::chrono::milliseconds timeout);
  /// \returns OK once every key is set, or an environment error naming the
  /// first missing one when `timeout` passes.
  Status wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  /// Tells the server this rank ended on its own (its connection closing next
  /// is then no death).
  Status bye();
  /// Tells the server this rank gave up, and why (PeerState::reason, cut to
  /// kMaxReasonBytes): its peers stop at once instead of at their timeouts.
  Status fail(const std::string& reason);
  /// \returns the state of every rank of the world, in rank order.
  StatusOr<std::vector<PeerState>> peers();

  const TcpAddress& address() const { return addr_; }
  int rank() const { return rank_; }
  /// The bound on one request (default: the connect timeout).
  std::chrono::milliseconds requestTimeout() const { return timeout_; }

 private:
  TcpStoreClient() = default;
  /// Sends one request, \returns the answer's status byte and fields.
  StatusOr<std::pair<char, std::vector<std::string>>> call(char op, const std::vector<std::string>& fields);
  /// \returns whether every key is set (one CHECK).
  StatusOr<bool> has(const std::vector<std::string>& keys);
  Status lost(const std::string& what) const;

  std::mutex mu_;
  int fd_ = -1;
  TcpAddress addr_;
  int rank_ = 0;
  std::chrono::milliseconds timeout_{0};
};

}  // namespace pcc
