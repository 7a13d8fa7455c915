// The TCP rendezvous store (runtime/tcp_store.h): a server on a free loopback
// port and clients in this process; raw sockets stand for broken or hostile
// peers.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <tuple>

#include "runtime/comm_gloo.h"
#include "runtime/tcp_store.h"

namespace pcc {
namespace {

using Ms = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

std::vector<char> bytes(const std::string& s) { return {s.begin(), s.end()}; }

/// The run's secret every member presents.
const std::string kSecret = "0123456789abcdef0123456789abcdef";

struct Served {
  std::unique_ptr<TcpStoreServer> server;
  TcpAddress addr;
};

Served serve(const std::string& runId, int world) {
  Served s;
  auto started = TcpStoreServer::start({"127.0.0.1", 0}, runId, kSecret, world);
  EXPECT_TRUE(started.ok()) << started.status().message();
  s.server = std::move(started).value();
  s.addr = {"127.0.0.1", s.server->port()};
  return s;
}

std::shared_ptr<TcpStoreClient> client(const TcpAddress& a, int rank, int world = 4, const std::string& id = "run") {
  auto c = TcpStoreClient::connect(a, id, kSecret, rank, world, Ms(5000));
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : nullptr;
}

/// \returns a raw socket connected to `a`.
int rawSocket(const TcpAddress& a) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(a.port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  return fd;
}

/// \returns whether something accepts a TCP connection on `ip` (an IPv4 or
/// IPv6 address) port `port`.
bool accepts(const std::string& ip, int port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (ip.find(':') != std::string::npos) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&ss);
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(inet_pton(AF_INET6, ip.c_str(), &sa->sin6_addr), 1) << ip;
    len = sizeof *sa;
  } else {
    auto* sa = reinterpret_cast<sockaddr_in*>(&ss);
    sa->sin_family = AF_INET;
    sa->sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(inet_pton(AF_INET, ip.c_str(), &sa->sin_addr), 1) << ip;
    len = sizeof *sa;
  }
  int fd = socket(ss.ss_family, SOCK_STREAM, 0);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0;
  close(fd);
  return ok;
}

void sendRaw(int fd, const std::string& data) {
  ASSERT_EQ(send(fd, data.data(), data.size(), MSG_NOSIGNAL), static_cast<ssize_t>(data.size()));
}

/// \returns true when the server closed `fd` (read returns 0 or an error) within 5 s.
bool closedByServer(int fd) {
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[256];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

std::string le32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

TEST(TcpStore, ParsesAddresses) {
  auto a = parseTcpAddress("tcp:node1.example:29500", false);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "node1.example");
  EXPECT_EQ(a->port, 29500);
  EXPECT_EQ(a->str(), "node1.example:29500");
  EXPECT_FALSE(parseTcpAddress("tcp:127.0.0.1:0", false).ok());
  EXPECT_TRUE(parseTcpAddress("tcp:127.0.0.1:0", true).ok());
  for (const char* bad : {"127.0.0.1:80", "tcp:", "tcp::80", "tcp:host", "tcp:host:", "tcp:host:65536",
                          "tcp:host:-1", "tcp:host:8x", "tcp:::1:80"}) {
    auto p = parseTcpAddress(bad, true);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("tcp:HOST:PORT"), std::string::npos) << p.status().message();
  }
}

TEST(TcpStore, ParsesIpv6AddressesInBrackets) {
  const std::vector<std::tuple<std::string, std::string, int, std::string>> good = {
      {"tcp:127.0.0.1:29500", "127.0.0.1", 29500, "127.0.0.1:29500"},
      {"tcp:localhost:1", "localhost", 1, "localhost:1"},
      {"tcp:[::1]:29500", "::1", 29500, "[::1]:29500"},
      {"tcp:[fd00::2]:65535", "fd00::2", 65535, "[fd00::2]:65535"},
      {"tcp:[::ffff:10.0.0.1]:7", "::ffff:10.0.0.1", 7, "[::ffff:10.0.0.1]:7"},
      {"tcp:[fe80::1%eth0]:80", "fe80::1%eth0", 80, "[fe80::1%eth0]:80"},
  };
  for (const auto& [spec, host, port, str] : good) {
    auto a = parseTcpAddress(spec, false);
    ASSERT_TRUE(a.ok()) << spec << ": " << a.status().message();
    EXPECT_EQ(a->host, host) << spec;
    EXPECT_EQ(a->port, port) << spec;
    EXPECT_EQ(a->str(), str) << spec;
  }
  // A bare IPv6 address: one line saying how to write it.
  auto bare = parseTcpAddress("tcp:::1:29500", false);
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(bare.status().message().find("must be in brackets: tcp:[::1]:29500"), std::string::npos)
      << bare.status().message();
  EXPECT_EQ(bare.status().message().find('\n'), std::string::npos);
  for (const char* bad : {"tcp:fd00::2:80", "tcp:fd00::2", "tcp:[::1]", "tcp:[::1]:", "tcp:[::1:80", "tcp:[]:80",
                          "tcp:[127.0.0.1]:80", "tcp:[node1]:80", "tcp:[::1]x80", "tcp:[::1]:65536",
                          "tcp:[::1]:0", "tcp:[::1]]:80", "tcp:[:::1]:80", "tcp:node[1]:80", "tcp:]:80"}) {
    auto p = parseTcpAddress(bad, false);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidInput) << bad;
    const std::string m = p.status().message();
    EXPECT_NE(m.find(std::string("'") + bad + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("tcp:[IPV6]:PORT"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(TcpStore, ParsesHosts) {
  for (const char* same : {"127.0.0.1", "node1.example", "::1", "fd00::2", "fe80::1%lo"}) {
    auto h = parseHost(same);
    ASSERT_TRUE(h.ok()) << same << ": " << h.status().message();
    EXPECT_EQ(*h, same);
  }
  auto h = parseHost("[fd00::2]");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, "fd00::2");
  EXPECT_TRUE(isIpv6Literal("::1"));
  EXPECT_FALSE(isIpv6Literal("127.0.0.1"));
  EXPECT_FALSE(isIpv6Literal("[::1]"));
  for (const char* bad : {"[127.0.0.1]", "[::1", "::1]", "[]", "[node1]", "fd00:::2", "a:b", "node:80"}) {
    auto p = parseHost(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidInput) << bad;
    EXPECT_NE(p.status().message().find(bad), std::string::npos) << p.status().message();
  }
}

TEST(TcpStore, RoundTripOnIpv6LoopbackOnly) {
  auto started = TcpStoreServer::start({"::1", 0}, "run", kSecret, 2);
  ASSERT_TRUE(started.ok()) << started.status().message();
  const TcpAddress at{"::1", (*started)->port()};
  auto a = client(at, 0, 2), b = client(at, 1, 2);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->set("k", bytes("over ::1")).ok());
  auto v = b->get("k", Ms(1000));
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(std::string(v->begin(), v->end()), "over ::1");
  // Served on ::1 only: not on 127.0.0.1, nor on another address.
  EXPECT_TRUE(accepts("::1", at.port));
  EXPECT_FALSE(accepts("127.0.0.1", at.port));
  // Errors name the address in brackets.
  started->reset();
  auto gone = TcpStoreClient::connect(at, "run", kSecret, 1, 2, Ms(300));
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("rank 1: cannot reach the rendezvous store at [::1]:" +
                                         std::to_string(at.port)),
            std::string::npos)
      << gone.status().message();
}

TEST(TcpStore, NamesAndFamiliesOfTheListeningAddress) {
  // A name: "localhost" (127.0.0.1, perhaps ::1 too) is served on its first
  // address, and a client tries each of its addresses.
  {
    auto started = TcpStoreServer::start({"localhost", 0}, "run", kSecret, 1);
    ASSERT_TRUE(started.ok()) << started.status().message();
    auto c = client({"localhost", (*started)->port()}, 0, 1);
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->set("k", bytes("v")).ok());
  }
  // A host with an IPv6 address that is not loopback: every interface, both
  // families (dual-stack `::`).
  {
    auto started = TcpStoreServer::start({"2001:db8::1", 0}, "run", kSecret, 2);
    ASSERT_TRUE(started.ok()) << started.status().message();
    const int port = (*started)->port();
    EXPECT_TRUE(accepts("::1", port));
    EXPECT_TRUE(accepts("127.0.0.1", port));
    auto six = client({"::1", port}, 0, 2), four = client({"127.0.0.1", port}, 1, 2);
    ASSERT_TRUE(six && four);
    EXPECT_TRUE(six->set("k", bytes("both")).ok());
    auto v = four->get("k", Ms(1000));
    ASSERT_TRUE(v.ok()) << v.status().message();
    EXPECT_EQ(std::string(v->begin(), v->end()), "both");
  }
  // An IPv4 host that is not loopback: every IPv4 interface only, as before.
  {
    auto started = TcpStoreServer::start({"192.0.2.1", 0}, "run", kSecret, 2);
    ASSERT_TRUE(started.ok()) << started.status().message();
    const int port = (*started)->port();
    EXPECT_TRUE(client({"127.0.0.1", port}, 0, 2) != nullptr);
    EXPECT_FALSE(accepts("::1", port));
  }
}

TEST(TcpStore, SetGetWaitAcrossClients) {
  Served s = serve("run", 2);
  auto a = client(s.addr, 0, 2), b = client(s.addr, 1, 2);
  ASSERT_TRUE(a && b);
  // b waits for a key a sets later.
  std::thread setter([&] {
    std::this_thread::sleep_for(Ms(200));
    EXPECT_TRUE(a->set("k1", bytes("hello")).ok());
    EXPECT_TRUE(a->set("k2", std::vector<char>(100000, 'x')).ok());
  });
  EXPECT_TRUE(b->wait({"k1", "k2"}, Ms(5000)).ok());
  setter.join();
  auto v = b->get("k1", Ms(100));
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(std::string(v->begin(), v->end()), "hello");
  auto big = b->get("k2", Ms(100));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->size(), 100000u);
  // Overwritten by its owner (TcpStore.AMemberWritesOnlyItsOwnKeys), and an empty value.
  EXPECT_TRUE(a->set("k1", {}).ok());
  v = a->get("k1", Ms(100));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->empty());
}

TEST(TcpStore, WaitAndGetTimeOutNamingTheKey) {
  Served s = serve("run", 1);
  auto c = client(s.addr, 0, 1);
  ASSERT_TRUE(c);
  auto t0 = Clock::now();
  Status w = c->wait({"never"}, Ms(300));
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.code(), StatusCode::kEnvironment);
  EXPECT_NE(w.message().find("'never'"), std::string::npos) << w.message();
  EXPECT_NE(w.message().find(s.addr.str()), std::string::npos) << w.message();
  EXPECT_GE(secs, 0.29);
  EXPECT_LT(secs, 2.0);
  EXPECT_FALSE(c->get("never", Ms(50)).ok());
  // The client still works after a timeout.
  EXPECT_TRUE(c->set("now", bytes("1")).ok());
  EXPECT_TRUE(c->wait({"now"}, Ms(50)).ok());
}

TEST(TcpStore, UnreachableStoreFailsWithinTheTimeoutNamingRankAndAddress) {
  // A port nobody serves: bind one, learn it, close it.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  TcpAddress a{"127.0.0.1", ntohs(sa.sin_port)};
  close(fd);
  auto t0 = Clock::now();
  auto c = TcpStoreClient::connect(a, "run", kSecret, 3, 4, Ms(700));
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kEnvironment);
  EXPECT_NE(c.status().message().find("rank 3"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find(a.str()), std::string::npos) << c.status().message();
  EXPECT_LT(secs, 2.0);
}

TEST(TcpStore, ClientConnectsBeforeTheServerStarts) {
  // Learn a free port, then start the server on it after the client began.
  Served probe = serve("run", 1);
  TcpAddress a = probe.addr;
  probe.server.reset();
  std::unique_ptr<TcpStoreServer> late;
  std::thread starter([&] {
    std::this_thread::sleep_for(Ms(300));
    auto s = TcpStoreServer::start(a, "run", kSecret, 1);
    ASSERT_TRUE(s.ok()) << s.status().message();
    late = std::move(s).value();
  });
  auto c = TcpStoreClient::connect(a, "run", kSecret, 0, 1, Ms(5000));
  starter.join();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE((*c)->set("k", bytes("v")).ok());
}

TEST(TcpStore, RefusesAnotherRunAWrongWorldAndARankTwice) {
  Served s = serve("job1", 2);
  auto other = TcpStoreClient::connect(s.addr, "job2", kSecret, 0, 2, Ms(2000));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("'job1', not 'job2'"), std::string::npos) << other.status().message();
  EXPECT_FALSE(TcpStoreClient::connect(s.addr, "job1", kSecret, 0, 3, Ms(2000)).ok());
  EXPECT_FALSE(TcpStoreClient::connect(s.addr, "job1", kSecret, 2, 2, Ms(2000)).ok());
  auto first = client(s.addr, 1, 2, "job1");
  ASSERT_TRUE(first);
  auto twice = TcpStoreClient::connect(s.addr, "job1", kSecret, 1, 2, Ms(2000));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("rank 1 already connected"), std::string::npos)
      << twice.status().message();
}

TEST(TcpStore, EnforcesLimits) {
  Served s = serve("run", 1);
  auto c = client(s.addr, 0, 1);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->set(std::string(kMaxKeyBytes + 1, 'k'), bytes("v")).ok());
  EXPECT_FALSE(c->set("", bytes("v")).ok());
  EXPECT_FALSE(c->set("k", std::vector<char>(kMaxValueBytes + 1)).ok());
  EXPECT_TRUE(c->set("k", std::vector<char>(kMaxValueBytes)).ok());
  auto v = c->get("k", Ms(1000));
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->size(), kMaxValueBytes);
}

/// \returns the frame `op` + fields, as the protocol lays it out.
std::string rawFrame(char op, const std::vector<std::string>& fields) {
  std::string body(1, op);
  for (const std::string& f : fields) body += le32(static_cast<uint32_t>(f.size())) + f;
  return le32(static_cast<uint32_t>(body.size())) + body;
}

/// \returns the body of the next frame the server sends on `fd` ("" on failure).
std::string readFrame(int fd) {
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  auto readN = [&](size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
      ssize_t r = recv(fd, out.data() + got, n - got, 0);
      if (r <= 0) return std::string();
      got += static_cast<size_t>(r);
    }
    return out;
  };
  std::string head = readN(4);
  if (head.size() != 4) return "";
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= static_cast<uint32_t>(static_cast<unsigned char>(head[i])) << (8 * i);
  return readN(len);
}

TEST(TcpStore, ServerRefusesAnOversizedValueFromAClientThatSkipsItsChecks) {
  Served s = serve("run", 2);
  int fd = rawSocket(s.addr);
  sendRaw(fd, rawFrame('H', {"run", "1", "2", "raw 1", kSecret}));
  EXPECT_EQ(readFrame(fd), "O");
  sendRaw(fd, rawFrame('S', {"z", std::string(kMaxValueBytes + 1, 'v')}));
  std::string answer = readFrame(fd);
  ASSERT_FALSE(answer.empty());
  EXPECT_EQ(answer[0], 'E');
  EXPECT_NE(answer.find("over the limit"), std::string::npos) << answer;
  // Still served, and the value was not stored.
  sendRaw(fd, rawFrame('G', {"z"}));
  EXPECT_EQ(readFrame(fd), "M");
  close(fd);
}

TEST(TcpStore, BoundsTheStoreTotal) {
  auto started = TcpStoreServer::start({"127.0.0.1", 0}, "run", kSecret, 1, /*maxStoreBytes=*/1 << 20);
  ASSERT_TRUE(started.ok());
  auto c = client({"127.0.0.1", (*started)->port()}, 0, 1);
  ASSERT_TRUE(c);
  Status full;
  int stored = 0;
  for (; stored < 20 && full.ok(); ++stored) full = c->set("v" + std::to_string(stored), std::vector<char>(100000));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(stored, 11);  // 10 values of 100 kB fit in 1 MiB, the 11th does not
  EXPECT_NE(full.message().find("full"), std::string::npos) << full.message();
  // Overwriting a value with a smaller one frees room.
  EXPECT_TRUE(c->set("v0", bytes("small")).ok());
  EXPECT_TRUE(c->set("v10", std::vector<char>(90000)).ok());
}

TEST(TcpStore, GarbageClosesOnlyThatConnection) {
  Served s = serve("run", 2);
  auto good = client(s.addr, 0, 2);
  ASSERT_TRUE(good);
  std::mt19937 gen(7);
  const std::vector<std::string> hostile = {
      le32(0),                                       // an empty frame
      le32(kMaxFrameBytes + 1),                      // an oversized frame
      le32(0xFFFFFFFFu) + "xxxx",                    // a huge length
      le32(3) + std::string("S\x01\x00", 3),       // a request before HELLO, field cut short
      le32(5) + "Zabcd",                             // an unknown op
      le32(9) + std::string("H") + le32(100) + "abcd",  // a field longer than its frame
  };
  for (const std::string& h : hostile) {
    int fd = rawSocket(s.addr);
    sendRaw(fd, h);
    EXPECT_TRUE(closedByServer(fd)) << "frame of " << h.size() << " bytes";
    close(fd);
  }
  for (int i = 0; i < 20; ++i) {  // random bytes
    std::string junk(1 + gen() % 300, '\0');
    for (char& ch : junk) ch = static_cast<char>(gen());
    int fd = rawSocket(s.addr);
    sendRaw(fd, junk);
    shutdown(fd, SHUT_WR);
    EXPECT_TRUE(closedByServer(fd));
    close(fd);
  }
  // The honest client never noticed, and rank 1 can still arrive.
  EXPECT_TRUE(good->set("k", bytes("v")).ok());
  auto v = good->get("k", Ms(100));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(std::string(v->begin(), v->end()), "v");
  EXPECT_TRUE(client(s.addr, 1, 2) != nullptr);
}

TEST(TcpStore, ClientDisconnectingMidMessage) {
  Served s = serve("run", 2);
  auto good = client(s.addr, 0, 2);
  ASSERT_TRUE(good);
  // Half a frame (length says 1000 bytes, 10 arrive), then the socket closes.
  int fd = rawSocket(s.addr);
  sendRaw(fd, le32(1000) + "S123456789");
  close(fd);
  // Half a frame that stays open: the server keeps serving others meanwhile.
  int slow = rawSocket(s.addr);
  sendRaw(slow, le32(1000) + "S12");
  EXPECT_TRUE(good->set("k", bytes("v")).ok());
  EXPECT_TRUE(good->wait({"k"}, Ms(100)).ok());
  close(slow);
  EXPECT_TRUE(good->set("k2", bytes("v")).ok());
}

TEST(TcpStore, PeersTellAliveEndedDiedAndNeverArrived) {
  Served s = serve("run", 4);
  auto r0 = client(s.addr, 0), r1 = client(s.addr, 1), r2 = client(s.addr, 2);
  ASSERT_TRUE(r0 && r1 && r2);
  EXPECT_TRUE(r1->bye().ok());
  r1.reset();  // ended on its own: closing is no death
  r2.reset();  // closed without BYE: died
  std::vector<PeerState> p;
  for (int i = 0; i < 100; ++i) {  // the server sees the close shortly
    auto got = r0->peers();
    ASSERT_TRUE(got.ok()) << got.status().message();
    p = *got;
    if (p[2].kind == PeerState::kDied) break;
    std::this_thread::sleep_for(Ms(20));
  }
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].kind, PeerState::kAlive);
  EXPECT_EQ(p[1].kind, PeerState::kEnded);
  EXPECT_EQ(p[2].kind, PeerState::kDied);
  EXPECT_EQ(p[3].kind, PeerState::kNeverArrived);
  EXPECT_NE(p[2].where.find(std::to_string(getpid())), std::string::npos) << p[2].where;
}

TEST(TcpStore, ServerGoneIsAnErrorNotAHang) {
  Served s = serve("run", 2);
  auto c = client(s.addr, 1, 2);
  ASSERT_TRUE(c);
  s.server.reset();
  auto t0 = Clock::now();
  Status st = c->wait({"never"}, Ms(3000));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("lost the rendezvous store at " + s.addr.str()), std::string::npos) << st.message();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 2.0);
  EXPECT_FALSE(c->peers().ok());
}

TEST(TcpStore, PortInUseIsAnErrorNamingIt) {
  Served s = serve("run", 1);
  auto again = TcpStoreServer::start(s.addr, "run", kSecret, 1);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find(s.addr.str()), std::string::npos) << again.status().message();
}

/// Two rank threads connect a gloo group through the TCP store at `host`,
/// gloo listening on `glooHost`, and sum. \returns each rank's status and sum.
std::vector<std::pair<Status, float>> glooSum(const std::string& host, const std::string& glooHost) {
  auto started = TcpStoreServer::start({host, 0}, "run", kSecret, 2);
  EXPECT_TRUE(started.ok()) << started.status().message();
  if (!started.ok()) return {};
  const TcpAddress at{host, (*started)->port()};
  std::vector<std::pair<Status, float>> out(2, {Status::OK(), 0.0f});
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto c = TcpStoreClient::connect(at, "run", kSecret, r, 2, Ms(10000));
      if (!c.ok()) {
        out[r].first = c.status();
        return;
      }
      std::shared_ptr<GlooStore> store = GlooStore::overTcp(*c);
      GlooOptions o;
      o.timeout = Ms(10000);
      o.hostname = glooHost;
      auto comms = connectGloo(*store, r, 2, {CommGroup{"tp", {0, 1}}}, /*withWorld=*/true, o);
      if (!comms.ok()) {
        out[r].first = comms.status();
        return;
      }
      Tensor t = Tensor::fromVector<float>(DType::kF32, {1}, {static_cast<float>(r + 1)});
      out[r].first = comms->groups[0]->allReduceSum(t);
      out[r].second = t.data<float>()[0];
    });
  for (auto& t : threads) t.join();
  return out;
}

TEST(TcpStore, GlooConnectsThroughIt) {
  for (auto [host, glooHost] : {std::pair{"127.0.0.1", "127.0.0.1"}, std::pair{"::1", "::1"},
                                std::pair{"::1", "[::1]"}, std::pair{"localhost", "localhost"}}) {
    auto got = glooSum(host, glooHost);
    ASSERT_EQ(got.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(got[r].first.ok()) << host << " " << glooHost << ": " << got[r].first.message();
      EXPECT_EQ(got[r].second, 3.0f) << host << " " << glooHost;
    }
  }
  // A gloo host that is no address: an invalid-input error naming it.
  auto got = glooSum("::1", "[::1");
  ASSERT_EQ(got.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(got[r].first.code(), StatusCode::kInvalidInput) << got[r].first.message();
    EXPECT_NE(got[r].first.message().find("[::1"), std::string::npos) << got[r].first.message();
  }
}

// ---------------------------------------------------------------- strangers

/// \returns the status byte of the answer the server sends on `fd` (within
/// 5 s), or 0 when it closes the connection without one.
char answerOf(int fd) {
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char head[5];
  size_t got = 0;
  while (got < sizeof head) {
    ssize_t n = recv(fd, head + got, sizeof head - got, 0);
    if (n <= 0) return 0;
    got += static_cast<size_t>(n);
  }
  return head[4];
}

/// A raw HELLO of rank text `rank` in a world of `world`, with `secret`.
std::string rawHello(const std::string& rank, const std::string& world, const std::string& secret,
                     const std::string& runId = "run") {
  return rawFrame('H', {runId, rank, world, "stranger 1", secret});
}

TEST(TcpStore, RefusesAClientWithoutTheSecret) {
  EXPECT_EQ(TcpStoreServer::start({"127.0.0.1", 0}, "run", "", 2).status().code(), StatusCode::kInvalidInput);
  Served s = serve("run", 2);
  for (const std::string& wrong : {std::string(), std::string("nope"), kSecret + "x", kSecret.substr(1)}) {
    auto c = TcpStoreClient::connect(s.addr, "run", wrong, 1, 2, Ms(2000));
    ASSERT_FALSE(c.ok()) << "secret '" << wrong << "'";
    EXPECT_NE(c.status().message().find("secret"), std::string::npos) << c.status().message();
    // The refusal tells nothing of the run.
    EXPECT_EQ(c.status().message().find("'run'"), std::string::npos) << c.status().message();
  }
  // A HELLO of the protocol without the secret field is malformed; a
  // refused stranger cannot try again on its connection.
  int old = rawSocket(s.addr);
  sendRaw(old, rawFrame('H', {"run", "1", "2", "stranger 1"}));
  EXPECT_EQ(answerOf(old), 0);
  close(old);
  int again = rawSocket(s.addr);
  sendRaw(again, rawHello("1", "2", "nope"));
  EXPECT_EQ(answerOf(again), 'E');
  sendRaw(again, rawHello("1", "2", kSecret));
  EXPECT_TRUE(closedByServer(again));
  close(again);
  // No stranger holds a rank: both members arrive.
  auto r0 = client(s.addr, 0, 2), r1 = client(s.addr, 1, 2);
  ASSERT_TRUE(r0 && r1);
  auto p = r0->peers();
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)[1].kind, PeerState::kAlive);
}

TEST(TcpStore, ARankHasOneSpelling) {
  Served s = serve("run", 2);
  for (const char* rank : {"01", "+1", " 1", "1 ", "1.0", "0x1", "-0", "00"}) {
    int fd = rawSocket(s.addr);
    sendRaw(fd, rawHello(rank, "2", kSecret));
    EXPECT_NE(answerOf(fd), 'O') << "rank '" << rank << "'";
    close(fd);
  }
  int fd = rawSocket(s.addr);
  sendRaw(fd, rawHello("1", "02", kSecret));
  EXPECT_NE(answerOf(fd), 'O') << "world '02'";
  close(fd);
  // Rank 1 and rank 0 are still free for their members.
  auto r1 = client(s.addr, 1, 2), r0 = client(s.addr, 0, 2);
  EXPECT_TRUE(r1 && r0);
}

TEST(TcpStore, AMemberWritesOnlyItsOwnKeys) {
  Served s = serve("run", 3);
  auto r0 = client(s.addr, 0, 3), r1 = client(s.addr, 1, 3);
  ASSERT_TRUE(r0 && r1);
  ASSERT_TRUE(r1->set("group0/1", bytes("rank 1's address")).ok());
  Status st = r0->set("group0/1", bytes("rank 0's lie"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("belongs to rank 1"), std::string::npos) << st.message();
  // The same through raw frames, as a hostile member would send them.
  int fd = rawSocket(s.addr);
  sendRaw(fd, rawHello("2", "3", kSecret));
  ASSERT_EQ(answerOf(fd), 'O');
  sendRaw(fd, rawFrame('S', {"group0/1", "rank 2's lie"}));
  EXPECT_EQ(answerOf(fd), 'E');
  close(fd);
  auto v = r0->get("group0/1", Ms(100));
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(std::string(v->begin(), v->end()), "rank 1's address");
  // Its owner may set it again.
  EXPECT_TRUE(r1->set("group0/1", bytes("moved")).ok());
}

TEST(TcpStore, CapsTheBytesHeldBeforeHello) {
  Served s = serve("run", 2);
  // One frame over a HELLO's size before HELLO closes that connection at once.
  int big = rawSocket(s.addr);
  sendRaw(big, le32(kMaxHelloFrameBytes + 1) + "H" + std::string(1000, 'x'));
  EXPECT_TRUE(closedByServer(big));
  close(big);
  // Many strangers each holding most of a HELLO frame: together they hold
  // at most kMaxPendingHelloBytes; the server closes the rest.
  const size_t each = 4 + 7000, count = 2 * kMaxPendingHelloBytes / each;
  std::vector<int> fds;
  for (size_t i = 0; i < count; ++i) {
    fds.push_back(rawSocket(s.addr));
    sendRaw(fds.back(), le32(8000) + std::string(7000, 'H'));
  }
  auto open = [&] {
    size_t n = 0;
    for (int fd : fds) {
      char b;
      ssize_t got = recv(fd, &b, 1, MSG_DONTWAIT);
      n += got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return n;
  };
  size_t stillOpen = open();
  for (auto until = Clock::now() + Ms(10000); stillOpen * each > kMaxPendingHelloBytes && Clock::now() < until;) {
    std::this_thread::sleep_for(Ms(50));
    stillOpen = open();
  }
  EXPECT_LE(stillOpen * each, kMaxPendingHelloBytes) << stillOpen << " of " << count << " strangers held";
  EXPECT_GT(stillOpen, 0u);
  for (int fd : fds) close(fd);
  // Once they are gone, members arrive as before.
  std::this_thread::sleep_for(Ms(100));
  auto r0 = client(s.addr, 0, 2);
  EXPECT_TRUE(r0 != nullptr);
}

TEST(TcpStore, BacksOffWhenOutOfFileDescriptors) {
  // In a child process: a server whose process has no file descriptor left,
  // with connections queued that it cannot accept. Its processor time over
  // a second must stay far below that second (a loop polling the listening
  // socket again at once takes all of it).
  int toParent[2], toChild[2];
  ASSERT_EQ(pipe(toParent), 0);
  ASSERT_EQ(pipe(toChild), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(toParent[0]);
    close(toChild[1]);
    auto started = TcpStoreServer::start({"127.0.0.1", 0}, "run", kSecret, 2);
    if (!started.ok()) _exit(10);
    int port = (*started)->port();
    rlimit lim{256, 256};
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(11);
    while (open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0) {
    }
    if (write(toParent[1], &port, sizeof port) != sizeof port) _exit(12);
    char go;
    if (read(toChild[0], &go, 1) != 1) _exit(13);  // the parent has queued its connections
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    auto t0 = Clock::now();
    std::this_thread::sleep_for(Ms(1000));
    getrusage(RUSAGE_SELF, &after);
    double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    auto secs = [](const rusage& r) {
      return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
    };
    int permille = static_cast<int>(1000 * (secs(after) - secs(before)) / wall);
    if (write(toParent[1], &permille, sizeof permille) != sizeof permille) _exit(14);
    _exit(0);
  }
  close(toParent[1]);
  close(toChild[0]);
  int port = 0;
  ASSERT_EQ(read(toParent[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) fds.push_back(rawSocket({"127.0.0.1", port}));  // queued: nothing can accept them
  ASSERT_EQ(write(toChild[1], "g", 1), 1);
  int permille = -1;
  ASSERT_EQ(read(toParent[0], &permille, sizeof permille), static_cast<ssize_t>(sizeof permille));
  int status = 0;
  waitpid(pid, &status, 0);
  for (int fd : fds) close(fd);
  close(toParent[0]);
  close(toChild[1]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_LT(permille, 500) << "the server used " << permille / 10.0 << "% of a processor while out of descriptors";
}

TEST(TcpStore, PeersTellWhyARankFailed) {
  Served s = serve("run", 2);
  auto r0 = client(s.addr, 0, 2), r1 = client(s.addr, 1, 2);
  ASSERT_TRUE(r0 && r1);
  ASSERT_TRUE(r1->fail("rank 1: rank 0 stopped answering\nsecond line").ok());
  EXPECT_TRUE(r1->bye().ok());
  r1.reset();
  std::this_thread::sleep_for(Ms(50));
  auto p = r0->peers();
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)[1].kind, PeerState::kFailed);
  EXPECT_EQ((*p)[1].reason, "rank 1: rank 0 stopped answering second line");
  EXPECT_NE((*p)[1].where.find(std::to_string(getpid())), std::string::npos) << (*p)[1].where;
}

}  // namespace
}  // namespace pcc
