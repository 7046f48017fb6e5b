// CpuProcessGroup: rank-order collectives over a Transport, on a communication thread; see
// cpu_process_group.h.
#include "dist/cpu_process_group.h"

#include <cstdlib>
#include <cstring>

#include "core/dtype.h"
#include "core/log.h"

namespace vela::dist {
namespace {

// Largest piece (bytes of the caller's buffer) one transport call moves: keeps every MPI count
// and displacement below 2^31.
constexpr int64_t kPieceBytes = int64_t{1} << 28;

void check_buffer(const Tensor& t, const char* op, const char* what, bool reduce) {
  VELA_CHECK(t.defined() && t.is_cpu() && t.is_contiguous(), "dist ", op, ": ", what,
             " must be a contiguous CPU tensor, got ",
             t.defined() ? t.str() : std::string("undefined"));
  VELA_CHECK(!reduce || t.dtype() == DType::kF32 || t.dtype() == DType::kBF16, "dist ", op, ": ",
             what, " must be f32 or bf16 to be summed, got ", dtype_name(t.dtype()));
}

template <typename T>
void sum_f64_like(const char* parts, int n_parts, int64_t n, char* out) {
  const T* p = reinterpret_cast<const T*>(parts);
  T* o = reinterpret_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) {
    T acc = p[i];
    for (int s = 1; s < n_parts; ++s) acc += p[static_cast<int64_t>(s) * n + i];
    o[i] = acc;
  }
}

}  // namespace

void sum_in_rank_order(DType dtype, const char* parts, int n_parts, int64_t n, char* out) {
  if (dtype == DType::kF32) return sum_f64_like<float>(parts, n_parts, n, out);
  VELA_CHECK(dtype == DType::kBF16, "sum_in_rank_order: f32 or bf16, got ", dtype_name(dtype));
  const bf16* p = reinterpret_cast<const bf16*>(parts);
  bf16* o = reinterpret_cast<bf16*>(out);
  for (int64_t i = 0; i < n; ++i) {
    float acc = static_cast<float>(p[i]);
    for (int s = 1; s < n_parts; ++s) acc += static_cast<float>(p[static_cast<int64_t>(s) * n + i]);
    o[i] = bf16(acc);
  }
}

class CpuProcessGroup::Job final : public Work {
 public:
  Job(std::string what, std::function<void()> fn, std::chrono::milliseconds timeout, int rank)
      : what_(std::move(what)), fn_(std::move(fn)), timeout_(timeout), rank_(rank) {}
  void run() {
    std::exception_ptr err;
    try {
      fn_();
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    error_ = err;
    done_ = true;
    cv_.notify_all();
  }
  void wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout_ + std::chrono::seconds(30), [&] { return done_; })) {
      VELA_LOG_ERROR("[dist] rank ", rank_, ": ", what_, " did not complete within ",
                     (timeout_.count() + 30000) / 1000.0,
                     " s: a peer rank died or hangs; exiting (status ", kExitCollectiveTimeout,
                     ")");
      std::fflush(nullptr);
      std::_Exit(kExitCollectiveTimeout);
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::string what_;
  std::function<void()> fn_;
  std::chrono::milliseconds timeout_;
  int rank_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

CpuProcessGroup::CpuProcessGroup(std::unique_ptr<Transport> transport,
                                 std::chrono::milliseconds timeout)
    : ProcessGroup(transport->rank(), transport->world_size()),
      transport_(std::move(transport)),
      timeout_(timeout) {
  thread_ = std::thread([this] { run_queue(); });
}

CpuProcessGroup::~CpuProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

void CpuProcessGroup::run_queue() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      job = queue_.front();
      queue_.pop_front();
    }
    job->run();
  }
}

WorkHandle CpuProcessGroup::submit(std::string what, std::function<void()> fn) {
  auto job = std::make_shared<Job>(std::move(what), std::move(fn), timeout_, rank_);
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(job);
  cv_.notify_all();
  return job;
}

WorkHandle CpuProcessGroup::all_reduce(Tensor buf) {
  check_buffer(buf, "all_reduce", "the buffer", true);
  return submit("all_reduce of " + buf.str(), [this, buf] {
    const int W = world_size_, me = rank_;
    const int64_t es = static_cast<int64_t>(buf.element_size());
    char* base = static_cast<char*>(buf.data_ptr());
    const int64_t n = buf.numel(), piece = std::max<int64_t>(1, kPieceBytes / es);
    std::vector<int64_t> sc(W), sd(W), rc(W), rd(W);
    std::vector<char> recv, chunk;
    for (int64_t off = 0; off < n; off += piece) {
      const int64_t m = std::min(piece, n - off);
      auto lo = [&](int r) { return m * r / W; };
      const int64_t c = lo(me + 1) - lo(me);
      for (int r = 0; r < W; ++r) {
        sc[r] = (lo(r + 1) - lo(r)) * es;
        sd[r] = lo(r) * es;
        rc[r] = c * es;
        rd[r] = r * c * es;
      }
      recv.resize(static_cast<size_t>(W * c * es));
      chunk.resize(static_cast<size_t>(c * es));
      char* p = base + off * es;
      transport_->alltoallv(p, sc, sd, recv.data(), rc, rd);
      sum_in_rank_order(buf.dtype(), recv.data(), W, c, chunk.data());
      transport_->allgatherv(chunk.data(), c * es, p, sc, sd);
    }
  });
}

WorkHandle CpuProcessGroup::reduce_scatter(Tensor in, Tensor out) {
  check_buffer(in, "reduce_scatter", "the input", true);
  check_buffer(out, "reduce_scatter", "the output", true);
  VELA_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * world_size_,
             "dist reduce_scatter: input ", in.str(), " must hold world_size (", world_size_,
             ") x output ", out.str());
  return submit("reduce_scatter of " + in.str(), [this, in, out] {
    const int W = world_size_;
    const int64_t es = static_cast<int64_t>(in.element_size()), n = out.numel();
    const int64_t piece = std::max<int64_t>(1, kPieceBytes / (es * W));
    const char* src = static_cast<const char*>(in.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    std::vector<int64_t> sc(W), sd(W), rc(W), rd(W);
    std::vector<char> recv;
    for (int64_t a = 0; a < n; a += piece) {
      const int64_t m = std::min(piece, n - a);
      for (int r = 0; r < W; ++r) {
        sc[r] = rc[r] = m * es;
        sd[r] = (r * n + a) * es;
        rd[r] = r * m * es;
      }
      recv.resize(static_cast<size_t>(W * m * es));
      transport_->alltoallv(src, sc, sd, recv.data(), rc, rd);
      sum_in_rank_order(in.dtype(), recv.data(), W, m, dst + a * es);
    }
  });
}

WorkHandle CpuProcessGroup::all_gather(Tensor in, Tensor out) {
  check_buffer(in, "all_gather", "the input", false);
  check_buffer(out, "all_gather", "the output", false);
  VELA_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * world_size_,
             "dist all_gather: output ", out.str(), " must hold world_size (", world_size_,
             ") x input ", in.str());
  return submit("all_gather of " + in.str(), [this, in, out] {
    const int W = world_size_;
    const int64_t es = static_cast<int64_t>(in.element_size()), n = in.numel();
    const int64_t piece = std::max<int64_t>(1, kPieceBytes / (es * W));
    const char* src = static_cast<const char*>(in.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    std::vector<int64_t> rc(W), rd(W);
    std::vector<char> tmp;
    for (int64_t a = 0; a < n; a += piece) {
      const int64_t m = std::min(piece, n - a);
      for (int r = 0; r < W; ++r) {
        rc[r] = m * es;
        rd[r] = r * m * es;
      }
      tmp.resize(static_cast<size_t>(W * m * es));
      transport_->allgatherv(src + a * es, m * es, tmp.data(), rc, rd);
      for (int r = 0; r < W; ++r)
        std::memcpy(dst + (r * n + a) * es, tmp.data() + r * m * es, static_cast<size_t>(m * es));
    }
  });
}

WorkHandle CpuProcessGroup::broadcast(Tensor buf, int root) {
  check_buffer(buf, "broadcast", "the buffer", false);
  VELA_CHECK(root >= 0 && root < world_size_, "dist broadcast: root ", root, " is not a rank");
  return submit("broadcast of " + buf.str(), [this, buf, root] {
    char* p = static_cast<char*>(buf.data_ptr());
    const int64_t n = static_cast<int64_t>(buf.nbytes());
    for (int64_t a = 0; a < n; a += kPieceBytes)
      transport_->broadcast(p + a, std::min(kPieceBytes, n - a), root);
  });
}

void CpuProcessGroup::barrier() {
  submit("barrier", [this] { transport_->barrier(); })->wait();
}

std::vector<double> CpuProcessGroup::all_reduce_host(std::vector<double> values) {
  submit("all_reduce of " + std::to_string(values.size()) + " host values", [this, &values] {
    const int W = world_size_;
    const int64_t bytes = static_cast<int64_t>(values.size() * sizeof(double));
    std::vector<int64_t> rc(W, bytes), rd(W);
    for (int r = 0; r < W; ++r) rd[r] = r * bytes;
    std::vector<char> all(static_cast<size_t>(W * bytes));
    transport_->allgatherv(reinterpret_cast<const char*>(values.data()), bytes, all.data(), rc, rd);
    sum_f64_like<double>(all.data(), W, static_cast<int64_t>(values.size()),
                         reinterpret_cast<char*>(values.data()));
  })->wait();
  return values;
}

std::string CpuProcessGroup::broadcast_host(const std::string& bytes, int root) {
  std::string out = bytes;
  submit("broadcast of host bytes", [this, &out, root] {
    int64_t n = static_cast<int64_t>(out.size());
    transport_->broadcast(reinterpret_cast<char*>(&n), sizeof(n), root);
    out.resize(static_cast<size_t>(n));
    transport_->broadcast(out.data(), n, root);
  })->wait();
  return out;
}

}  // namespace vela::dist
