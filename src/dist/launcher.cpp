// The local launcher; see launcher.h.
#include "dist/launcher.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace vela::dist {
namespace {

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal = sig; }

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out_buf, err_buf;
  bool exited = false;
  int status = 0;
};

void emit(FILE* f, int rank, const std::string& line) {
  std::fprintf(f, "[rank %d] %s\n", rank, line.c_str());
  std::fflush(f);
}

// Reads what is there; forwards complete lines. Returns false at EOF.
bool pump(int& fd, std::string& buf, FILE* f, int rank) {
  char tmp[65536];
  const ssize_t n = ::read(fd, tmp, sizeof(tmp));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    if (!buf.empty()) emit(f, rank, buf);
    buf.clear();
    ::close(fd);
    fd = -1;
    return false;
  }
  buf.append(tmp, static_cast<size_t>(n));
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1)
    emit(f, rank, buf.substr(start, nl - start));
  buf.erase(0, start);
  return true;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "ended (status " + std::to_string(status) + ")";
}

}  // namespace

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  VELA_CHECK_T(IoError, fd >= 0, "launcher: socket() failed: ", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  VELA_CHECK_T(IoError, ok, "launcher: cannot find a free port: ", std::strerror(errno));
  return ntohs(a.sin_port);
}

int launch_local_ranks(const LaunchOptions& o) {
  VELA_CHECK(o.nproc_per_node >= 1, "--nproc-per-node must be >= 1, got ", o.nproc_per_node);
  VELA_CHECK(o.nnodes >= 1 && o.node_rank >= 0 && o.node_rank < o.nnodes, "--node-rank ",
             o.node_rank, " must be in [0, --nnodes ", o.nnodes, ")");
  VELA_CHECK(o.nnodes == 1 || o.master_port > 0, "several hosts (--nnodes ", o.nnodes,
             ") need --master-addr and --master-port (rank 0's host and a free port there)");
  const int port = o.master_port > 0 ? o.master_port : pick_free_port();
  const int world = o.nnodes * o.nproc_per_node;
  std::vector<Child> kids(static_cast<size_t>(o.nproc_per_node));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  const pid_t parent = ::getpid();
  for (int l = 0; l < o.nproc_per_node; ++l) {
    Child& c = kids[static_cast<size_t>(l)];
    c.rank = o.node_rank * o.nproc_per_node + l;
    int out[2], err[2];
    VELA_CHECK_T(IoError, ::pipe(out) == 0 && ::pipe(err) == 0, "launcher: pipe() failed");
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    VELA_CHECK_T(IoError, pid >= 0, "launcher: fork() failed: ", std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::close(out[0]);
      ::close(out[1]);
      ::close(err[0]);
      ::close(err[1]);
      ::setenv("RANK", std::to_string(c.rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(l).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node).c_str(), 1);
      ::setenv("GROUP_RANK", std::to_string(o.node_rank).c_str(), 1);
      ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      std::vector<char*> argv;
      std::string argv0 = "vela";
      argv.push_back(argv0.data());
      std::vector<std::string> args = o.args;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "launcher: cannot exec /proc/self/exe: %s\n", std::strerror(errno));
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    c.pid = pid;
    c.out_fd = out[0];
    c.err_fd = err[0];
  }
  std::fprintf(stderr, "[launcher] started ranks %d..%d of %d (MASTER_ADDR=%s MASTER_PORT=%d)\n",
               kids.front().rank, kids.back().rank, world, o.master_addr.c_str(), port);

  int failed_rank = -1;
  std::chrono::steady_clock::time_point kill_at{};
  bool terminating = false;
  auto terminate_all = [&](int sig) {
    for (Child& c : kids)
      if (!c.exited) ::kill(c.pid, sig);
  };
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, bool>> who;  // (child, is_stderr)
    for (Child& c : kids) {
      if (c.out_fd >= 0) {
        fds.push_back({c.out_fd, POLLIN, 0});
        who.emplace_back(&c, false);
      }
      if (c.err_fd >= 0) {
        fds.push_back({c.err_fd, POLLIN, 0});
        who.emplace_back(&c, true);
      }
    }
    if (!fds.empty())
      ::poll(fds.data(), fds.size(), 100);
    else
      ::usleep(20000);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = *who[i].first;
      if (who[i].second)
        pump(c.err_fd, c.err_buf, stderr, c.rank);
      else
        pump(c.out_fd, c.out_buf, stdout, c.rank);
    }
    // Reap every rank that exited since the last pass before naming the failure: when a rank is
    // killed, its peers exit with an error soon after (their connection to it broke), and both
    // can show up in one pass. A rank ended by a signal is the cause, so it is named first.
    const Child* first_failure = nullptr;
    auto reap_exited = [&] {
      for (Child& c : kids) {
        int status = 0;
        if (c.exited || ::waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
        c.exited = true;
        c.status = status;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && (first_failure == nullptr ||
                    (WIFSIGNALED(status) && !WIFSIGNALED(first_failure->status))))
          first_failure = &c;
      }
    };
    reap_exited();
    bool all_done = true;
    for (const Child& c : kids) all_done = all_done && c.exited && c.out_fd < 0 && c.err_fd < 0;
    if (first_failure != nullptr && failed_rank < 0 && !terminating) {
      // A peer's error exit can still come before the death that caused it: a killed rank closes
      // its sockets before it becomes reapable, and the peer that saw the broken connection may
      // exit in between (seen on a loaded 2-core machine). Before naming an error exit, give the
      // other ranks a moment to show a death by signal, the likelier cause.
      const auto settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
      while (!WIFSIGNALED(first_failure->status) && std::chrono::steady_clock::now() < settle) {
        ::usleep(10000);
        reap_exited();
      }
      failed_rank = first_failure->rank;
      std::fprintf(stderr, "[launcher] error: rank %d (pid %d) %s; stopping the other ranks\n",
                   first_failure->rank, static_cast<int>(first_failure->pid),
                   describe(first_failure->status).c_str());
      terminating = true;
      kill_at = std::chrono::steady_clock::now() + o.grace;
      terminate_all(SIGTERM);
    }
    if (all_done) break;
    if (const int sig = g_signal.exchange(0); sig != 0) {
      std::fprintf(stderr, "[launcher] got signal %d; stopping the ranks\n", sig);
      if (failed_rank < 0) failed_rank = -2;
      terminating = true;
      kill_at = std::chrono::steady_clock::now() + o.grace;
      terminate_all(SIGTERM);
    }
    if (terminating && std::chrono::steady_clock::now() > kill_at) {
      terminate_all(SIGKILL);
      kill_at = std::chrono::steady_clock::now() + std::chrono::hours(1);
    }
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (failed_rank == -2) return 1;
  if (failed_rank >= 0) return 1;
  return 0;
}

}  // namespace vela::dist
