// Socket lookup by address pair and a non-blocking hang-up poll.
#include "serve/client_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

namespace day0 {
namespace {

// The address as cpp-httplib prints it (getnameinfo, numeric host) and the port.
bool address_of(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char buf[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, buf, sizeof buf, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  host = buf;
  port = std::atoi(serv);
  return true;
}

// The port straight from the address, so that most descriptors are ruled out without formatting anything.
int port_of(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return -1;
}

bool socket_matches(int fd, const std::string& local_addr, int local_port, const std::string& remote_addr,
                    int remote_port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  std::string host;
  int port = -1;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || port_of(addr) != remote_port) return false;
  if (!address_of(addr, len, host, port) || port != remote_port || host != remote_addr) return false;
  len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  return address_of(addr, len, host, port) && port == local_port && host == local_addr;
}

}  // namespace

ClientWatch ClientWatch::of_connection(const std::string& local_addr, int local_port, const std::string& remote_addr,
                                       int remote_port) {
  if (local_port < 0 || remote_port < 0) return ClientWatch();
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return ClientWatch();
  int found = -1;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (socket_matches(static_cast<int>(fd), local_addr, local_port, remote_addr, remote_port)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return ClientWatch(found);
}

bool ClientWatch::gone() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace day0
