#include "runtime/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

namespace pcc {

namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

// Request ops and answer statuses (one byte each).
constexpr char kHello = 'H', kSet = 'S', kGet = 'G', kCheck = 'C', kBye = 'B', kPeers = 'P', kFail = 'A';
constexpr char kOk = 'O', kFound = 'F', kMissing = 'M', kError = 'E';
// A server keeps at most this many connections (the process's limit on open
// files may be lower) and this many answer bytes queued for one client that
// does not read them.
constexpr size_t kMaxClients = 1 << 16;
constexpr size_t kMaxQueuedBytes = 64u << 20;

void putU32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint32_t getU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

/// \returns the frame of one message: its length, its op or status, its fields.
std::string frame(char op, const std::vector<std::string>& fields) {
  std::string body(1, op);
  for (const std::string& f : fields) {
    putU32(body, static_cast<uint32_t>(f.size()));
    body += f;
  }
  std::string out;
  putU32(out, static_cast<uint32_t>(body.size()));
  return out + body;
}

/// Splits a frame's body into its op and fields. \returns false when a
/// field's length runs past the body.
bool parseBody(const char* p, size_t n, char* op, std::vector<std::string>* fields) {
  if (n < 1) return false;
  *op = p[0];
  size_t pos = 1;
  while (pos < n) {
    if (n - pos < 4) return false;
    uint32_t len = getU32(p + pos);
    pos += 4;
    if (len > n - pos) return false;
    fields->emplace_back(p + pos, len);
    pos += len;
  }
  return true;
}

/// \returns the integer in `s` when it is all decimal digits within [lo, hi],
/// in its one canonical spelling: no sign, no space, no leading zero ("01"
/// is refused, so that no rank has two names).
std::optional<int> parseInt(const std::string& s, int lo, int hi) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  if (s.size() > 1 && s[0] == '0') return std::nullopt;
  int v = std::stoi(s);
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

std::string errnoText(int e) { return std::strerror(e); }

/// One address of a host, as getaddrinfo gives it.
struct Resolved {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_UNSPEC;

  bool loopback() const {
    if (family == AF_INET)
      return (ntohl(reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr.s_addr) >> 24) == 127;
    return family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr);
  }
};

/// \returns the IPv4 and IPv6 addresses of `host` with port `port`, in
/// getaddrinfo's order, or an error text.
StatusOr<std::vector<Resolved>> resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || !res) return environmentError("cannot resolve '", host, "': ", gai_strerror(rc));
  std::vector<Resolved> out;
  for (addrinfo* a = res; a; a = a->ai_next) {
    if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || a->ai_addrlen > sizeof(sockaddr_storage)) continue;
    Resolved r;
    std::memcpy(&r.addr, a->ai_addr, a->ai_addrlen);
    r.len = a->ai_addrlen;
    r.family = a->ai_family;
    out.push_back(r);
  }
  freeaddrinfo(res);
  if (out.empty()) return environmentError("cannot resolve '", host, "': no IPv4 or IPv6 address");
  return out;
}

/// \returns `r` as text ("127.0.0.1", "::1").
std::string addressText(const Resolved& r) {
  char buf[INET6_ADDRSTRLEN] = {};
  const void* a = r.family == AF_INET ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&r.addr)->sin_addr)
                                      : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&r.addr)->sin6_addr);
  inet_ntop(r.family, a, buf, sizeof buf);
  return buf;
}

Ms left(Clock::time_point deadline) {
  return std::max(Ms(0), std::chrono::duration_cast<Ms>(deadline - Clock::now()));
}

/// Waits until `fd` is ready for `events` or `deadline` passes. \returns
/// false on the deadline (errno ETIMEDOUT) or a poll error.
bool waitFd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = static_cast<int>(std::min<int64_t>(left(deadline).count(), 1 << 30));
    int rc = poll(&p, 1, ms);
    if (rc > 0) return true;
    if (rc == 0) {
      errno = ETIMEDOUT;
      return false;
    }
    if (errno != EINTR) return false;
  }
}

/// Sends all of `data` on non-blocking `fd` by `deadline`. \returns false
/// with errno set otherwise.
bool sendAll(int fd, const std::string& data, Clock::time_point deadline) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!waitFd(fd, POLLOUT, deadline)) return false;
      continue;
    }
    return false;
  }
  return true;
}

/// Receives exactly `n` bytes into `out` by `deadline`. \returns false with
/// errno set otherwise (ECONNRESET for a closed connection).
bool recvAll(int fd, char* out, size_t n, Clock::time_point deadline) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = recv(fd, out + done, n - done, 0);
    if (got > 0) {
      done += static_cast<size_t>(got);
      continue;
    }
    if (got == 0) {
      errno = ECONNRESET;
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!waitFd(fd, POLLIN, deadline)) return false;
      continue;
    }
    return false;
  }
  return true;
}

void setNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

std::string TcpAddress::str() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

bool isIpv6Literal(const std::string& host) {
  // A zone ("%eth0", for a link-local address) is getaddrinfo's to check.
  const std::string addr = host.substr(0, host.find('%'));
  in6_addr a;
  return !addr.empty() && host.size() < 256 && inet_pton(AF_INET6, addr.c_str(), &a) == 1;
}

StatusOr<std::string> parseHost(const std::string& text) {
  if (!text.empty() && text.front() == '[') {
    if (text.size() < 2 || text.back() != ']' || !isIpv6Literal(text.substr(1, text.size() - 2)))
      return invalidInput("'", text, "': brackets must hold an IPv6 address, as in [::1]");
    return text.substr(1, text.size() - 2);
  }
  if (text.find_first_of(":[]") != std::string::npos && !isIpv6Literal(text))
    return invalidInput("'", text, "' is neither a host name, an IPv4 address nor an IPv6 address");
  return text;
}

StatusOr<TcpAddress> parseTcpAddress(const std::string& spec, bool allowPortZero) {
  const std::string prefix = "tcp:";
  auto bad = [&](const std::string& why) {
    return invalidInput("rendezvous '", spec, "': ", why, " (expected tcp:HOST:PORT, or tcp:[IPV6]:PORT)");
  };
  if (spec.rfind(prefix, 0) != 0) return bad("not a tcp: address");
  const std::string rest = spec.substr(prefix.size());
  TcpAddress a;
  std::string port;
  if (!rest.empty() && rest.front() == '[') {
    // tcp:[IPV6]:PORT: the host is whatever the brackets hold.
    size_t close = rest.find(']');
    if (close == std::string::npos) return bad("no ']' after '['");
    a.host = rest.substr(1, close - 1);
    if (!isIpv6Literal(a.host)) return bad("brackets must hold an IPv6 address, not '" + a.host + "'");
    if (close + 1 >= rest.size() || rest[close + 1] != ':') return bad("no ':PORT' after ']'");
    port = rest.substr(close + 2);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0) return bad("no HOST");
    a.host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (a.host.find_first_of(":[]") != std::string::npos) {
      // The last ':' of a bare IPv6 address cannot be told from the port's.
      if (isIpv6Literal(a.host) && !port.empty())
        return bad("an IPv6 address must be in brackets: tcp:[" + a.host + "]:" + port);
      return bad("HOST must be a name or an IPv4 address, or an IPv6 address in brackets");
    }
  }
  std::optional<int> p = parseInt(port, 0, 65535);
  if (!p) return bad("PORT must be an integer in [0, 65535]");
  if (*p == 0 && !allowPortZero) return bad("PORT 0 cannot be used: every rank must know the port");
  a.port = *p;
  return a;
}

// ---------------------------------------------------------------- server

/// \returns whether `a` equals `b`, in a time that does not depend on where
/// they differ (a stranger cannot find the secret byte by byte by timing).
bool sameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(1, b.size())]);
  return diff == 0 && !b.empty();
}

/// \returns `s` cut to `n` bytes, line breaks as spaces (it goes into a
/// one-line message and into PEERS answers).
std::string oneLine(const std::string& s, size_t n) {
  std::string out = s.substr(0, n);
  std::replace(out.begin(), out.end(), '\n', ' ');
  std::replace(out.begin(), out.end(), '\r', ' ');
  return out;
}

struct TcpStoreServer::State {
  struct Conn {
    int fd = -1;
    std::string in, out;
    int rank = -1;  ///< set by its HELLO
    bool closed = false;
    /// A refused HELLO: closed once its answer is sent.
    bool closeAfterWrite = false;
  };
  /// A value and the rank that set it first (the only one that may set it again).
  struct Entry {
    std::vector<char> value;
    int owner = -1;
  };
  std::string runId, secret;
  int worldSize = 0;
  std::map<std::string, Entry> kv;
  uint64_t bytes = 0, maxBytes = kMaxStoreBytes;
  /// Bytes held for connections that have not said a good HELLO yet.
  uint64_t pendingBytes = 0;
  std::vector<PeerState> peers;
  /// Per rank: when its last request came (a rank's watcher asks PEERS a few
  /// times a second, so a long silence means its process stopped).
  std::vector<Clock::time_point> lastSeen;
  std::vector<Conn> conns;

  /// Closes `c`; its rank, if still alive, died.
  void drop(Conn& c) {
    if (c.closed) return;
    close(c.fd);
    c.closed = true;
    if (c.rank < 0) pendingBytes -= c.in.size();
    c.in.clear();
    if (c.rank >= 0 && peers[c.rank].kind == PeerState::kAlive) peers[c.rank].kind = PeerState::kDied;
  }

  /// Answers one request of `c`. \returns false when the request is malformed
  /// (the connection is then dropped).
  bool handle(Conn& c, char op, const std::vector<std::string>& f) {
    auto answer = [&](char status, const std::vector<std::string>& fields) { c.out += frame(status, fields); };
    if (op == kHello) {
      if (f.size() != 5 || c.rank >= 0 || c.closeAfterWrite) return false;
      // The secret first: a stranger learns nothing of the run (its id, its
      // world, who connected) and gets one try per connection.
      if (!sameSecret(f[4], secret)) {
        answer(kError, {"wrong or missing rendezvous secret (PCC_RDZV_SECRET)"});
        c.closeAfterWrite = true;
        return true;
      }
      std::optional<int> rank = parseInt(f[1], 0, (1 << 24)), world = parseInt(f[2], 1, (1 << 24));
      if (!rank || !world) return false;
      std::string why;
      if (f[0] != runId)
        why = "it serves run '" + runId + "', not '" + f[0] + "'";
      else if (*world != worldSize)
        why = "it serves a world of " + std::to_string(worldSize) + " ranks, not " + std::to_string(*world);
      else if (*rank >= worldSize)
        why = "rank " + std::to_string(*rank) + " is outside the world of " + std::to_string(worldSize);
      else if (peers[*rank].kind != PeerState::kNeverArrived)
        why = "rank " + std::to_string(*rank) + " already connected (from " + peers[*rank].where + ")";
      if (!why.empty()) {
        answer(kError, {why});
        c.closeAfterWrite = true;
        return true;
      }
      c.rank = *rank;
      peers[c.rank] = {PeerState::kAlive, oneLine(f[3], 256), {}, 0};
      lastSeen[c.rank] = Clock::now();
      answer(kOk, {});
      return true;
    }
    if (c.rank < 0) return false;  // HELLO first
    lastSeen[c.rank] = Clock::now();
    switch (op) {
      case kSet: {
        if (f.size() != 2 || f[0].empty() || f[0].size() > kMaxKeyBytes) return false;
        if (f[1].size() > kMaxValueBytes) {
          answer(kError, {"a value of " + std::to_string(f[1].size()) + " bytes is over the limit"});
          return true;
        }
        auto it = kv.find(f[0]);
        // A key belongs to the rank that set it first: no other member may
        // overwrite it (another rank's gloo address, say).
        if (it != kv.end() && it->second.owner != c.rank) {
          answer(kError, {"the key belongs to rank " + std::to_string(it->second.owner)});
          return true;
        }
        uint64_t old = it == kv.end() ? 0 : it->second.value.size() + it->first.size();
        if (bytes - old + f[0].size() + f[1].size() > maxBytes) {
          answer(kError, {"the store is full"});
          return true;
        }
        bytes = bytes - old + f[0].size() + f[1].size();
        kv[f[0]] = Entry{std::vector<char>(f[1].begin(), f[1].end()), c.rank};
        answer(kOk, {});
        return true;
      }
      case kGet: {
        if (f.size() != 1 || f[0].size() > kMaxKeyBytes) return false;
        auto it = kv.find(f[0]);
        if (it == kv.end()) answer(kMissing, {});
        else answer(kFound, {std::string(it->second.value.begin(), it->second.value.end())});
        return true;
      }
      case kCheck: {
        if (f.empty()) return false;
        bool all = true;
        for (const std::string& k : f) {
          if (k.size() > kMaxKeyBytes) return false;
          all &= kv.count(k) > 0;
        }
        answer(all ? kFound : kMissing, {});
        return true;
      }
      case kBye:
        if (!f.empty()) return false;
        if (peers[c.rank].kind == PeerState::kAlive) peers[c.rank].kind = PeerState::kEnded;
        answer(kOk, {});
        return true;
      case kFail:
        // The rank gave up (a timeout, a peer that stopped answering): its
        // reason stays with it, for every peer to read and stop at once.
        if (f.size() != 1) return false;
        if (peers[c.rank].kind == PeerState::kAlive) {
          peers[c.rank].kind = PeerState::kFailed;
          peers[c.rank].reason = oneLine(f[0], kMaxReasonBytes);
        }
        answer(kOk, {});
        return true;
      case kPeers: {
        if (!f.empty()) return false;
        std::vector<std::string> out;
        const Clock::time_point now = Clock::now();
        for (size_t r = 0; r < peers.size(); ++r) {
          const PeerState& p = peers[r];
          const int64_t silent =
              p.kind == PeerState::kAlive ? std::chrono::duration_cast<Ms>(now - lastSeen[r]).count() : 0;
          out.push_back(std::string(1, static_cast<char>(p.kind)) + p.where + "\n" + p.reason + "\n" +
                        std::to_string(silent));
        }
        answer(kOk, out);
        return true;
      }
      default: return false;
    }
  }

  /// Reads what `c` sent and answers every whole request in it.
  void readFrom(Conn& c) {
    char buf[65536];
    for (;;) {
      if (c.closeAfterWrite) return;  // refused: nothing more is read
      // Before its HELLO a connection is a stranger's: it may hold one HELLO
      // frame at most, and all of them together kMaxPendingHelloBytes.
      const bool pending = c.rank < 0;
      size_t room = sizeof buf;
      if (pending) room = std::min(room, 4 + kMaxHelloFrameBytes + 1 - c.in.size());
      ssize_t n = recv(c.fd, buf, room, 0);
      if (n > 0) {
        if (pending) {
          if (c.in.size() + n > 4 + kMaxHelloFrameBytes || pendingBytes + n > kMaxPendingHelloBytes) return drop(c);
          pendingBytes += static_cast<uint64_t>(n);
        }
        c.in.append(buf, static_cast<size_t>(n));
        // Answer as frames complete, so that a large burst is not held whole.
        while (c.in.size() >= 4 && !c.closeAfterWrite) {
          uint32_t len = getU32(c.in.data());
          if (len == 0 || len > kMaxFrameBytes || (c.rank < 0 && len > kMaxHelloFrameBytes)) return drop(c);
          if (c.in.size() < 4 + static_cast<size_t>(len)) break;
          char op = 0;
          std::vector<std::string> fields;
          const bool wasPending = c.rank < 0;
          if (!parseBody(c.in.data() + 4, len, &op, &fields) || !handle(c, op, fields)) return drop(c);
          c.in.erase(0, 4 + static_cast<size_t>(len));
          if (wasPending) pendingBytes -= 4 + static_cast<uint64_t>(len);
          if (wasPending && c.rank >= 0) pendingBytes -= c.in.size();  // now a member's
        }
        if (c.out.size() > kMaxQueuedBytes) return drop(c);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      return drop(c);  // closed by the client, or an error
    }
  }

  void writeTo(Conn& c) {
    while (!c.out.empty()) {
      ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out.erase(0, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      return drop(c);
    }
    if (c.closeAfterWrite) drop(c);
  }
};

StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const TcpAddress& addr, const std::string& runId,
                                                                const std::string& secret, int worldSize,
                                                                uint64_t maxStoreBytes) {
  if (secret.empty() || secret.size() > kMaxSecretBytes)
    return invalidInput("the rendezvous store on ", addr.str(), " needs a secret of 1 to ", kMaxSecretBytes,
                        " bytes that every rank presents (PCC_RDZV_SECRET)");
  auto resolved = resolve(addr.host, addr.port);
  if (!resolved.ok())
    return environmentError("cannot serve the rendezvous store on ", addr.str(), ": ", resolved.status().message());
  const std::vector<Resolved>& hosts = *resolved;
  std::unique_ptr<TcpStoreServer> s(new TcpStoreServer());
  auto failed = [&](const std::string& what) {
    return environmentError("cannot serve the rendezvous store on ", addr.str(), ": ", what, ": ",
                            errnoText(errno));
  };
  // Where to listen. A loopback host (its first address decides: "localhost"
  // may give ::1 or 127.0.0.1 first) serves this machine only, on that
  // address. Any other host is served on every interface, since the address
  // a machine's name resolves to here is not always the one other machines
  // reach it by. The family follows the host's: with IPv4 addresses only,
  // 0.0.0.0 as an IPv4 socket, which also works where IPv6 is off; with an
  // IPv6 address, `::` with IPV6_V6ONLY cleared (dual-stack), so that ranks
  // whose resolver gives them an IPv4 address of the same name (another
  // /etc/hosts, an A record before the AAAA one) reach it too.
  Resolved listenOn = hosts.front();
  if (!listenOn.loopback()) {
    const bool v6 = std::any_of(hosts.begin(), hosts.end(), [](const Resolved& r) { return r.family == AF_INET6; });
    listenOn = Resolved{};
    listenOn.family = v6 ? AF_INET6 : AF_INET;
    if (v6) {
      auto* sa = reinterpret_cast<sockaddr_in6*>(&listenOn.addr);
      sa->sin6_family = AF_INET6;
      sa->sin6_addr = in6addr_any;
      sa->sin6_port = htons(static_cast<uint16_t>(addr.port));
      listenOn.len = sizeof *sa;
    } else {
      auto* sa = reinterpret_cast<sockaddr_in*>(&listenOn.addr);
      sa->sin_family = AF_INET;
      sa->sin_addr.s_addr = htonl(INADDR_ANY);
      sa->sin_port = htons(static_cast<uint16_t>(addr.port));
      listenOn.len = sizeof *sa;
    }
  }
  s->listenFd_ = socket(listenOn.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listenFd_ < 0) return failed(std::string("socket (") + (listenOn.family == AF_INET6 ? "IPv6" : "IPv4") + ")");
  int one = 1, zero = 0;
  setsockopt(s->listenFd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (listenOn.family == AF_INET6 && !listenOn.loopback())
    setsockopt(s->listenFd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (bind(s->listenFd_, reinterpret_cast<sockaddr*>(&listenOn.addr), listenOn.len) != 0)
    return failed("bind to " + addressText(listenOn));
  if (listen(s->listenFd_, 512) != 0) return failed("listen");
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(s->listenFd_, reinterpret_cast<sockaddr*>(&bound), &len);
  s->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  setNonBlocking(s->listenFd_);
  if (pipe2(s->wakeFd_, O_CLOEXEC | O_NONBLOCK) != 0) return failed("pipe");
  s->state_ = std::make_unique<State>();
  s->state_->runId = runId;
  s->state_->secret = secret;
  s->state_->worldSize = worldSize;
  s->state_->maxBytes = maxStoreBytes;
  s->state_->peers.assign(worldSize, PeerState{});
  s->state_->lastSeen.assign(worldSize, Clock::now());
  s->thread_ = std::thread([srv = s.get()] { srv->serve(); });
  return s;
}

TcpStoreServer::~TcpStoreServer() {
  if (thread_.joinable()) {
    char c = 0;
    ssize_t ignored = write(wakeFd_[1], &c, 1);
    (void)ignored;
    thread_.join();
  }
  if (state_)
    for (State::Conn& c : state_->conns)
      if (!c.closed) close(c.fd);
  for (int fd : {listenFd_, wakeFd_[0], wakeFd_[1]})
    if (fd >= 0) close(fd);
}

void TcpStoreServer::serve() {
  State& st = *state_;
  std::vector<pollfd> fds;
  // Out of file descriptors (EMFILE, ENFILE) or memory, accept fails while
  // the connection stays queued, so the listening socket stays readable: it
  // is left out of poll for a pause that doubles from 10 ms to 200 ms, rather
  // than polled again at once (a loop that would take a whole processor).
  Clock::time_point acceptAfter = Clock::now();
  Ms acceptPause(0);
  for (;;) {
    const Ms paused = left(acceptAfter);
    fds.clear();
    fds.push_back({wakeFd_[0], POLLIN, 0});
    fds.push_back({listenFd_, static_cast<short>(paused.count() > 0 ? 0 : POLLIN), 0});
    for (const State::Conn& c : st.conns)
      fds.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
    if (poll(fds.data(), fds.size(), paused.count() > 0 ? static_cast<int>(paused.count()) + 1 : -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) return;
    const size_t known = st.conns.size();  // fds[2 + i] is conns[i] for i < known
    if ((fds[1].revents & POLLIN) || (acceptPause.count() > 0 && left(acceptAfter).count() == 0)) {
      for (;;) {
        int fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            acceptPause = std::clamp(acceptPause * 2, Ms(10), Ms(200));
            acceptAfter = Clock::now() + acceptPause;
          } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            acceptPause = Ms(0);
          }
          break;
        }
        acceptPause = Ms(0);
        if (st.conns.size() >= kMaxClients) {
          close(fd);
          continue;
        }
        setNoDelay(fd);
        State::Conn c;
        c.fd = fd;
        st.conns.push_back(std::move(c));
      }
    }
    for (size_t i = 0; i < known; ++i) {
      State::Conn& c = st.conns[i];
      short ev = fds[2 + i].revents;
      if (!c.closed && (ev & (POLLIN | POLLHUP | POLLERR))) st.readFrom(c);
      if (!c.closed && !c.out.empty()) st.writeTo(c);
    }
    st.conns.erase(std::remove_if(st.conns.begin(), st.conns.end(), [](const State::Conn& c) { return c.closed; }),
                   st.conns.end());
  }
}

// ---------------------------------------------------------------- client

StatusOr<std::shared_ptr<TcpStoreClient>> TcpStoreClient::connect(const TcpAddress& addr, const std::string& runId,
                                                                  const std::string& secret, int rank,
                                                                  int worldSize, Ms timeout) {
  if (secret.size() > kMaxSecretBytes)
    return invalidInput("rank ", rank, ": the rendezvous secret is over ", kMaxSecretBytes, " bytes");
  const Clock::time_point deadline = Clock::now() + timeout;
  auto unreachable = [&](const std::string& why) {
    return environmentError("rank ", rank, ": cannot reach the rendezvous store at ", addr.str(), " within ",
                            timeout.count() / 1000.0, " s (", why, ")");
  };
  std::string lastError = "no attempt";
  int fd = -1;
  Ms pause(20);
  while (fd < 0) {
    // Resolved again on every round: a name may get its address late.
    auto hosts = resolve(addr.host, addr.port);
    if (hosts.ok()) {
      // Each address in getaddrinfo's order (IPv6 and IPv4 ones of a name).
      for (const Resolved& h : *hosts) {
        fd = socket(h.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
          lastError = "socket: " + errnoText(errno);
          continue;
        }
        int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&h.addr), h.len);
        if (rc != 0 && errno == EINPROGRESS) {
          rc = -1;
          if (waitFd(fd, POLLOUT, std::min(deadline, Clock::now() + Ms(2000)))) {
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err == 0) rc = 0;
            else errno = err;
          }
        }
        if (rc == 0) break;
        lastError = "connect" + (hosts->size() > 1 ? " to " + addressText(h) : std::string()) + ": " +
                    errnoText(errno);
        close(fd);
        fd = -1;
        if (Clock::now() >= deadline) break;
      }
    } else {
      lastError = hosts.status().message();
    }
    if (fd >= 0) break;
    if (Clock::now() + pause >= deadline) return unreachable(lastError);
    std::this_thread::sleep_for(pause);
    pause = std::min(Ms(250), pause * 2);
  }
  setNoDelay(fd);
  std::shared_ptr<TcpStoreClient> c(new TcpStoreClient());
  c->fd_ = fd;
  c->addr_ = addr;
  c->rank_ = rank;
  c->timeout_ = std::max(Ms(1), left(deadline));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  ASSIGN_OR_RETURN(auto hello, c->call(kHello, {runId, std::to_string(rank), std::to_string(worldSize),
                                                std::string(host) + " " + std::to_string(getpid()), secret}));
  if (hello.first == kError)
    return environmentError("rank ", rank, ": the rendezvous store at ", addr.str(), " refuses it: ",
                            hello.second.empty() ? "" : hello.second[0]);
  if (hello.first != kOk) return c->lost("an unexpected answer to HELLO");
  c->timeout_ = timeout;
  return c;
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) close(fd_);
}

Status TcpStoreClient::lost(const std::string& what) const {
  return environmentError("rank ", rank_, ": lost the rendezvous store at ", addr_.str(), " (", what, ")");
}

StatusOr<std::pair<char, std::vector<std::string>>> TcpStoreClient::call(char op,
                                                                         const std::vector<std::string>& fields) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) return lost("the connection closed earlier");
  const Clock::time_point deadline = Clock::now() + timeout_;
  // Any failure leaves the stream out of step: the connection is closed.
  auto broken = [&](const std::string& what) {
    std::string why = what + ": " + (errno == ECONNRESET ? std::string("closed by the server") : errnoText(errno));
    close(fd_);
    fd_ = -1;
    return lost(why);
  };
  std::string req = frame(op, fields);
  if (req.size() - 4 > kMaxFrameBytes) return invalidInput("a rendezvous store request of ", req.size(), " bytes is over the limit");
  if (!sendAll(fd_, req, deadline)) return broken("sending");
  char head[4];
  if (!recvAll(fd_, head, 4, deadline)) return broken("receiving");
  uint32_t len = getU32(head);
  if (len == 0 || len > kMaxFrameBytes) {
    errno = EPROTO;
    return broken("an answer of " + std::to_string(len) + " bytes");
  }
  std::string body(len, '\0');
  if (!recvAll(fd_, body.data(), len, deadline)) return broken("receiving");
  std::pair<char, std::vector<std::string>> out;
  if (!parseBody(body.data(), body.size(), &out.first, &out.second)) {
    errno = EPROTO;
    return broken("a malformed answer");
  }
  return out;
}

Status TcpStoreClient::set(const std::string& key, const std::vector<char>& value) {
  if (key.empty() || key.size() > kMaxKeyBytes || value.size() > kMaxValueBytes)
    return invalidInput("rendezvous store: key '", key.substr(0, 64), "' or its value of ", value.size(),
                        " bytes is over the limits (", kMaxKeyBytes, " and ", kMaxValueBytes, " bytes)");
  ASSIGN_OR_RETURN(auto a, call(kSet, {key, std::string(value.begin(), value.end())}));
  if (a.first == kError)
    return environmentError("rank ", rank_, ": the rendezvous store at ", addr_.str(), " refuses key '", key,
                            "': ", a.second.empty() ? "" : a.second[0]);
  return Status::OK();
}

StatusOr<bool> TcpStoreClient::has(const std::vector<std::string>& keys) {
  ASSIGN_OR_RETURN(auto a, call(kCheck, keys));
  return a.first == kFound;
}

Status TcpStoreClient::wait(const std::vector<std::string>& keys, Ms timeout) {
  if (keys.empty()) return Status::OK();
  for (const std::string& k : keys)
    if (k.empty() || k.size() > kMaxKeyBytes) return invalidInput("rendezvous store: bad key '", k.substr(0, 64), "'");
  const Clock::time_point deadline = Clock::now() + timeout;
  Ms pause(1);
  for (;;) {
    ASSIGN_OR_RETURN(bool all, has(keys));
    if (all) return Status::OK();
    if (Clock::now() >= deadline) {
      std::string missing;
      for (const std::string& k : keys) {
        ASSIGN_OR_RETURN(bool one, has({k}));
        if (!one) {
          missing = k;
          break;
        }
      }
      return environmentError("rank ", rank_, ": key '", missing, "' was not set in the rendezvous store at ",
                              addr_.str(), " within ", timeout.count() / 1000.0, " s");
    }
    std::this_thread::sleep_for(std::min(pause, left(deadline) + Ms(1)));
    pause = std::min(Ms(50), pause * 2);
  }
}

StatusOr<std::vector<char>> TcpStoreClient::get(const std::string& key, Ms timeout) {
  RETURN_IF_ERROR(wait({key}, timeout));
  ASSIGN_OR_RETURN(auto a, call(kGet, {key}));
  if (a.first != kFound || a.second.size() != 1) return lost("key '" + key + "' vanished");
  return std::vector<char>(a.second[0].begin(), a.second[0].end());
}

Status TcpStoreClient::fail(const std::string& reason) {
  ASSIGN_OR_RETURN(auto a, call(kFail, {reason.substr(0, kMaxReasonBytes)}));
  (void)a;
  return Status::OK();
}

Status TcpStoreClient::bye() {
  ASSIGN_OR_RETURN(auto a, call(kBye, {}));
  (void)a;
  return Status::OK();
}

StatusOr<std::vector<PeerState>> TcpStoreClient::peers() {
  ASSIGN_OR_RETURN(auto a, call(kPeers, {}));
  if (a.first != kOk) return lost("an unexpected answer to PEERS");
  std::vector<PeerState> out;
  for (const std::string& f : a.second) {
    if (f.empty()) return lost("an empty peer state");
    PeerState p;
    p.kind = static_cast<PeerState::Kind>(f[0]);
    // "<kind><where>\n<reason>\n<silent ms>"
    const size_t nl = f.find('\n'), nl2 = nl == std::string::npos ? nl : f.find('\n', nl + 1);
    p.where = f.substr(1, nl == std::string::npos ? std::string::npos : nl - 1);
    if (nl != std::string::npos) p.reason = f.substr(nl + 1, nl2 == std::string::npos ? nl2 : nl2 - nl - 1);
    if (nl2 != std::string::npos) p.silentMs = parseInt(f.substr(nl2 + 1), 0, 999999999).value_or(0);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace pcc
