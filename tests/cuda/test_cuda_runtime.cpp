// CUDA runtime: device discovery, the caching allocator's counters and reuse, OOM, host/device
// copies (to, copy_, strided gather, zero_), current-stream handling, and device Philox == host;
// the request table's entry-wise asynchronous sync (engine/cache/req_to_token_pool.h) and its
// patch op (ops/write_ranges.h); the workspace's packed decode metadata and its side-stream
// uploads (engine/runtime/inference_workspace.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/cuda/cuda_allocator.h"
#include "core/cuda/device_kernels.h"
#include "core/cuda/stream.h"
#include "core/rng.h"
#include "cuda/cuda_test_util.h"
#include "engine/cache/req_to_token_pool.h"
#include "engine/runtime/inference_workspace.h"
#include "ops/elementwise.h"
#include "ops/write_ranges.h"

namespace vela {
namespace {

using test::CudaTest;

class CudaRuntimeTest : public CudaTest {};

// The request table on the device equals the host mirror, entry by entry, once the stream ran.
void expect_device_table_is_mirror(const ReqToTokenPool& pool, const char* what) {
  cuda::synchronize(0);
  Tensor dev = pool.table().to(Device::cpu());
  for (int32_t r = 0; r < pool.max_reqs(); ++r)
    for (int32_t p = 0; p < pool.max_ctx(); ++p)
      ASSERT_EQ(dev.data<int32_t>()[r * pool.max_ctx() + p], pool.row(r)[p])
          << what << ": row " << r << " position " << p;
}

// The device table equals the host mirror after every sync, each sync copies only the entries
// changed since the last one, and host writes right after a sync (before the stream ran it) are
// safe: they wait for the copies.
TEST_F(CudaRuntimeTest, RequestTableSyncCopiesOnlyChangedEntries) {
  const int32_t max_reqs = 8, max_ctx = 4096;
  ReqToTokenPool pool(max_reqs, max_ctx, gpu());
  auto expect_mirror = [&](const char* what) { expect_device_table_is_mirror(pool, what); };
  std::vector<int32_t> rows;
  for (int i = 0; i < 5; ++i) rows.push_back(*pool.alloc());
  std::vector<int32_t> slots(1000);
  for (int32_t i = 0; i < 1000; ++i) slots[static_cast<size_t>(i)] = 7 * i + 1;
  // Prompts of different lengths, then decode-like page appends to two rows.
  for (size_t i = 0; i < rows.size(); ++i)
    pool.set(rows[i], 0, slots.data(), 100 + 200 * static_cast<int32_t>(i));
  pool.sync();
  EXPECT_EQ(pool.last_sync_entries(), 5 * 100 + 200 * (0 + 1 + 2 + 3 + 4));
  for (int step = 0; step < 3; ++step) {  // writes right behind the sync's copies
    pool.set(rows[1], 300 + 16 * step, slots.data() + 500, 16);
    pool.set(rows[3], 700 + 16 * step, slots.data() + 600, 16);
    pool.sync();
    EXPECT_EQ(pool.last_sync_entries(), 32);
  }
  expect_mirror("appends");
  pool.free(rows[2]);  // wipes only what the row held
  pool.clear(rows[3], 700, 48);
  pool.sync();
  EXPECT_EQ(pool.last_sync_entries(), 500 + 48);
  expect_mirror("free and clear");
  pool.sync();
  EXPECT_EQ(pool.last_sync_entries(), 0);
  const int32_t again = *pool.alloc();  // the freed row, all kNoSlot on the device too
  EXPECT_EQ(again, rows[2]);
  expect_mirror("recycled row");
}

// Short runs of three or more rows go up as one patch written by ops::write_ranges (a batch
// crossing a page boundary together), long runs and one or two rows as copies, and both mixed in
// one sync; the device table equals the host mirror after each, also with host writes right behind.
TEST_F(CudaRuntimeTest, RequestTableSyncPatchesShortRunsOfManyRows) {
  const int32_t max_reqs = 64, max_ctx = 2048;
  ReqToTokenPool pool(max_reqs, max_ctx, gpu());
  auto expect_mirror = [&](const char* what) { expect_device_table_is_mirror(pool, what); };
  std::vector<int32_t> rows;
  for (int i = 0; i < 48; ++i) rows.push_back(*pool.alloc());
  std::vector<int32_t> slots(max_ctx);
  for (int32_t i = 0; i < max_ctx; ++i) slots[static_cast<size_t>(i)] = 3 * i + 5;
  for (size_t i = 0; i < rows.size(); ++i)  // prompts: long runs, copied row by row
    pool.set(rows[i], 0, slots.data() + i, 300 + static_cast<int32_t>(i));
  pool.sync();
  expect_mirror("prompts");
  for (int step = 0; step < 4; ++step) {  // every row takes a page: one patch, written at once
    for (size_t i = 0; i < rows.size(); ++i)
      pool.set(rows[i], 400 + 16 * step, slots.data() + 7 * i + step, 16);
    pool.sync();
    EXPECT_EQ(pool.last_sync_entries(), 48 * 16);
  }
  expect_mirror("pages of every row");
  // A long run and short ones in one sync; then two short rows alone (copies); then a patch at
  // the largest run it takes, with rows freed (long wipes) beside it.
  pool.set(rows[5], 1000, slots.data(), 700);
  for (int i = 10; i < 15; ++i) pool.set(rows[static_cast<size_t>(i)], 464, slots.data() + i, 3);
  pool.sync();
  EXPECT_EQ(pool.last_sync_entries(), 700 + 5 * 3);
  expect_mirror("mixed");
  pool.set(rows[20], 470, slots.data(), 2);
  pool.set(rows[21], 470, slots.data() + 1, 2);
  pool.sync();
  expect_mirror("two rows");
  for (int i = 30; i < 40; ++i)
    pool.set(rows[static_cast<size_t>(i)], 1500, slots.data() + i,
             i == 30 ? ReqToTokenPool::kPatchRun : 5);
  pool.free(rows[41]);
  pool.free(rows[42]);
  pool.sync();
  expect_mirror("largest run and wipes");
}

// A decode step's metadata (InferenceWorkspace::decode_meta / upload_decode): packed right before
// the input ids, each tensor equal to the host's first rows after the (side-stream) upload, the
// ids left alone when the device holds them already; the full upload still carries every tensor.
TEST_F(CudaRuntimeTest, WorkspaceDecodeUploadPacksTheRows) {
  InferenceWorkspace ws(WorkspaceConfig{8, 64, 100, gpu()});
  auto fill = [&](int32_t base) {
    ws.wait_staging();
    auto [ids, pos, loc, rows, lens, qo, kvp, last] = ws.host_pointers();
    for (int32_t i = 0; i < 64; ++i) {
      ids[i] = base + i;
      pos[i] = base + 100 + i;
      loc[i] = base + 200 + i;
    }
    for (int32_t i = 0; i <= 8; ++i) {
      if (i < 8) {
        rows[i] = base + 300 + i;
        lens[i] = base + 400 + i;
        last[i] = base + 500 + i;
      }
      qo[i] = base + 600 + i;
      kvp[i] = base + 700 + i;
    }
  };
  auto expect_head = [](const Tensor& dev, const Tensor& host, int64_t n, const char* what) {
    std::vector<int32_t> got = dev.to(Device::cpu()).to_vector<int32_t>();
    ASSERT_EQ(static_cast<int64_t>(got.size()), n) << what;
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[i], host.data<int32_t>()[i]) << what << " " << i;
  };
  fill(1000);
  ws.upload(64, 8);
  expect_head(ws.positions, ws.host.positions, 64, "full upload: positions");
  expect_head(ws.kv_indptr, ws.host.kv_indptr, 9, "full upload: kv_indptr");
  for (int32_t rows : {1, 5, 8}) {
    fill(rows * 10000);
    ws.upload_decode(rows, /*with_ids=*/true);
    InferenceWorkspace::DecodeMeta m = ws.decode_meta(rows);
    EXPECT_EQ(m.input_ids.data_ptr(), ws.input_ids.data_ptr());
    // One copy: the packed tensors end where the input ids begin.
    EXPECT_EQ(static_cast<const int32_t*>(m.logits_indices.data_ptr()) + rows,
              static_cast<const int32_t*>(ws.input_ids.data_ptr()));
    expect_head(m.input_ids, ws.host.input_ids, rows, "input_ids");
    expect_head(m.positions, ws.host.positions, rows, "positions");
    expect_head(m.out_cache_loc, ws.host.out_cache_loc, rows, "out_cache_loc");
    expect_head(m.req_pool_indices, ws.host.req_pool_indices, rows, "req_pool_indices");
    expect_head(m.seq_lens, ws.host.seq_lens, rows, "seq_lens");
    expect_head(m.qo_indptr, ws.host.qo_indptr, rows + 1, "qo_indptr");
    expect_head(m.kv_indptr, ws.host.kv_indptr, rows + 1, "kv_indptr");
    expect_head(m.logits_indices, ws.host.logits_indices, rows, "logits_indices");
    ws.mark_consumed();
  }
  fill(777);
  ws.upload_decode(4, /*with_ids=*/false);
  std::vector<int32_t> ids = ws.decode_meta(4).input_ids.to(Device::cpu()).to_vector<int32_t>();
  for (int32_t i = 0; i < 4; ++i) EXPECT_EQ(ids[i], 80000 + i) << "ids kept " << i;
  expect_head(ws.decode_meta(4).seq_lens, ws.host.seq_lens, 4, "seq_lens without ids");
  EXPECT_THROW(ws.decode_meta(9), InternalError);
}

// CUDA write_ranges equals the CPU twin, and a range outside the table is skipped (device
// metadata is trusted, not checked).
TEST_F(CudaRuntimeTest, WriteRangesMatchesCpu) {
  const int64_t rows = 9, cols = 700;
  Rng rng(3);
  std::vector<int32_t> init(rows * cols), values(4000), flat;
  for (auto& x : init) x = static_cast<int32_t>(rng.next_u64() % 1000);
  for (auto& x : values) x = static_cast<int32_t>(rng.next_u64() % 100000);
  int32_t off = 0;
  for (int32_t r = 0; r < rows; ++r) {  // one run per row, lengths 0..~600
    const int32_t n = static_cast<int32_t>(rng.next_u64() % 600), c = r * 11 % (cols - n + 1);
    flat.insert(flat.end(), {r, c, n, off});
    off += n;
  }
  Tensor cpu_table = Tensor::from_vector(init).view({rows, cols});
  Tensor ranges = Tensor::from_vector(flat).view({rows, 4});
  ops::write_ranges(ranges, Tensor::from_vector(values), cpu_table);
  Tensor gpu_table = Tensor::from_vector(init).view({rows, cols}).to(gpu());
  flat.insert(flat.end(), {int32_t{rows}, 0, 5, 0});  // past the last row: skipped on CUDA
  ops::write_ranges(Tensor::from_vector(flat).view({rows + 1, 4}).to(gpu()),
                    Tensor::from_vector(values).to(gpu()), gpu_table);
  EXPECT_EQ(gpu_table.to(Device::cpu()).to_vector<int32_t>(), cpu_table.to_vector<int32_t>());
}

TEST(CudaAvailability, AvailableDoesNotThrow) {
  bool ok = false;
  EXPECT_NO_THROW(ok = cuda::available());
  EXPECT_EQ(ok, cuda::device_count() > 0);
}

TEST_F(CudaRuntimeTest, DeviceDescription) {
  std::string d = cuda::device_description(0);
  EXPECT_NE(d.find(" GiB, "), std::string::npos) << d;
  EXPECT_NE(d.find(" SMs, sm_"), std::string::npos) << d;
  EXPECT_GT(cuda::device_properties(0).multiProcessorCount, 0);
  EXPECT_THROW(cuda::device_description(cuda::device_count()), InvalidArgument);
}

TEST_F(CudaRuntimeTest, AllocatorCountersAndReuse) {
  cuda::empty_cache(0);
  const size_t bytes = size_t{3} << 20;  // large pool, 20 MiB segment
  cuda::AllocatorStats s0 = cuda::allocator_stats(0);
  void* p = cuda::device_alloc(bytes, 0);
  ASSERT_NE(p, nullptr);
  cuda::AllocatorStats s1 = cuda::allocator_stats(0);
  EXPECT_EQ(s1.n_allocs, s0.n_allocs + 1);
  // A cached free block left by earlier tests may serve it whole: a large-pool block is split
  // only when more than kSmallRequestBytes would remain.
  EXPECT_GE(s1.bytes_in_use, s0.bytes_in_use + bytes);
  EXPECT_LE(s1.bytes_in_use, s0.bytes_in_use + bytes + cuda::CachingAllocator::kSmallRequestBytes);
  EXPECT_GE(s1.peak_bytes_in_use, s1.bytes_in_use);
  EXPECT_LE(s1.n_device_mallocs, s0.n_device_mallocs + 1);
  EXPECT_GE(s1.bytes_reserved, s1.bytes_in_use);

  cuda::device_free(p);
  cuda::AllocatorStats s2 = cuda::allocator_stats(0);
  EXPECT_EQ(s2.bytes_in_use, s0.bytes_in_use);
  EXPECT_EQ(s2.bytes_reserved, s1.bytes_reserved);  // cached, not returned
  EXPECT_EQ(s2.n_device_frees, s1.n_device_frees);

  // The same size again comes from the cache: no cudaMalloc.
  void* q = cuda::device_alloc(bytes, 0);
  cuda::AllocatorStats s3 = cuda::allocator_stats(0);
  EXPECT_EQ(s3.n_device_mallocs, s2.n_device_mallocs);
  EXPECT_EQ(s3.n_allocs, s2.n_allocs + 1);
  cuda::device_free(q);

  // empty_cache gives whole free segments back.
  cuda::empty_cache(0);
  cuda::AllocatorStats s4 = cuda::allocator_stats(0);
  EXPECT_EQ(s4.bytes_in_use, s0.bytes_in_use);
  EXPECT_LE(s4.bytes_reserved, s3.bytes_reserved);
  EXPECT_EQ(s4.n_device_frees - s3.n_device_frees, s3.n_device_mallocs - s0.n_device_mallocs);
}

TEST_F(CudaRuntimeTest, AllocatorSmallBlocksShareASegment) {
  cuda::empty_cache(0);
  cuda::AllocatorStats s0 = cuda::allocator_stats(0);
  std::vector<void*> ptrs;
  for (int i = 0; i < 3; ++i) ptrs.push_back(cuda::device_alloc(500 * 1024, 0));  // -> 512000 B
  cuda::AllocatorStats s1 = cuda::allocator_stats(0);
  EXPECT_LE(s1.n_device_mallocs - s0.n_device_mallocs, 1);  // one 2 MiB segment holds all three
  EXPECT_EQ(s1.bytes_in_use - s0.bytes_in_use, 3 * cuda::CachingAllocator::round_size(500 * 1024));
  for (void* p : ptrs) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 512, 0u);
  // Free out of order: neighbours merge back into one segment, which empty_cache releases.
  cuda::device_free(ptrs[1]);
  cuda::device_free(ptrs[0]);
  cuda::device_free(ptrs[2]);
  cuda::AllocatorStats s2 = cuda::allocator_stats(0);
  EXPECT_EQ(s2.bytes_in_use, s0.bytes_in_use);
  cuda::empty_cache(0);
  cuda::AllocatorStats s3 = cuda::allocator_stats(0);
  EXPECT_EQ(s3.n_device_frees - s2.n_device_frees, s1.n_device_mallocs - s0.n_device_mallocs);
}

TEST_F(CudaRuntimeTest, AllocatorRoundsAndTracksPeak) {
  EXPECT_EQ(cuda::CachingAllocator::round_size(0), 512u);
  EXPECT_EQ(cuda::CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(cuda::CachingAllocator::round_size(513), 1024u);
  cuda::reset_peak_stats(0);
  cuda::AllocatorStats s0 = cuda::allocator_stats(0);
  EXPECT_EQ(s0.peak_bytes_in_use, s0.bytes_in_use);
  void* p = cuda::device_alloc(1000, 0);
  cuda::device_free(p);
  cuda::AllocatorStats s1 = cuda::allocator_stats(0);
  EXPECT_EQ(s1.peak_bytes_in_use, s0.bytes_in_use + 1024);
  EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use);
}

TEST_F(CudaRuntimeTest, OutOfMemoryThrowsAndLeavesCountersAlone) {
  cuda::AllocatorStats s0 = cuda::allocator_stats(0);
  EXPECT_THROW(cuda::device_alloc(size_t{1} << 50, 0), OutOfMemory);  // 1 PiB
  cuda::AllocatorStats s1 = cuda::allocator_stats(0);
  EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use);
  EXPECT_EQ(s1.n_allocs, s0.n_allocs);
  // The device still works afterwards.
  Tensor t = Tensor::zeros({16}, DType::kF32, gpu());
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(16, 0.0f));
}

TEST_F(CudaRuntimeTest, TensorLifetimeGoesThroughTheAllocator) {
  cuda::AllocatorStats s0 = cuda::allocator_stats(0);
  {
    Tensor t = Tensor::empty({1000}, DType::kF32, gpu());
    cuda::AllocatorStats s1 = cuda::allocator_stats(0);
    EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use + 4096);
  }
  EXPECT_EQ(cuda::allocator_stats(0).bytes_in_use, s0.bytes_in_use);
}

TEST_F(CudaRuntimeTest, ToAndFromDeviceRoundTrip) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64, DType::kU8}) {
    for (int64_t n : {1, 3, 127, 4096, 100003}) {
      Tensor host = test::random_ints({n}, dt, static_cast<uint64_t>(n), 0, 100);
      Tensor dev = host.to(gpu());
      EXPECT_TRUE(dev.is_cuda());
      EXPECT_EQ(dev.shape(), host.shape());
      Tensor back = dev.to(Device::cpu());
      test::expect_equal(back, host, test::label(dt, host.shape()));
      // device -> device clone
      test::expect_equal(dev.clone().to(Device::cpu()), host, "clone");
    }
  }
}

TEST_F(CudaRuntimeTest, StridedCopiesOnDevice) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kI64, DType::kU8}) {
    Tensor host = test::random_ints({3, 5, 7, 2}, dt, 7, 0, 120);
    Tensor dev = host.to(gpu());
    // Permuted and sliced views, made contiguous on the device (strided gather kernel).
    std::vector<std::pair<Tensor, Tensor>> views = {
        {host.transpose(0, 2), dev.transpose(0, 2)},
        {host.slice(1, 1, 4).transpose(1, 3), dev.slice(1, 1, 4).transpose(1, 3)},
        {host.select(2, 3), dev.select(2, 3)},
        {host.slice(3, 1, 2).unsqueeze(0), dev.slice(3, 1, 2).unsqueeze(0)},
    };
    for (auto& [h, d] : views) {
      Tensor got = d.contiguous();
      EXPECT_TRUE(got.is_cuda());
      EXPECT_TRUE(got.is_contiguous());
      test::expect_equal(got, h.contiguous(), test::label(dt, h.shape()));
    }
  }
}

TEST_F(CudaRuntimeTest, CopyIntoDeviceTensorAndZero) {
  Tensor host = test::random_cpu({6, 9}, DType::kF32, 3);
  Tensor dev = Tensor::empty({9, 6}, DType::kF32, gpu());
  dev.copy_(host.transpose(0, 1));  // strided host source -> contiguous device destination
  test::expect_equal(dev, host.transpose(0, 1).contiguous(), "copy_ host->device");
  Tensor dev2 = Tensor::empty({6, 9}, DType::kF32, gpu());
  dev2.copy_(dev.transpose(0, 1));  // strided device source
  test::expect_equal(dev2, host, "copy_ device->device strided");
  Tensor back = Tensor::empty({9, 6}, DType::kF32);
  back.copy_(dev);  // device -> host
  test::expect_equal(back, host.transpose(0, 1).contiguous(), "copy_ device->host");
  dev2.zero_();
  test::expect_equal(dev2, Tensor::zeros({6, 9}, DType::kF32), "zero_");
  EXPECT_EQ(dev.slice(0, 2, 3).slice(1, 4, 5).item<float>(),
            host.transpose(0, 1).contiguous().slice(0, 2, 3).slice(1, 4, 5).item<float>());
}

TEST_F(CudaRuntimeTest, PhiloxOnDeviceMatchesHost) {
  const int64_t n = 10007;
  for (uint64_t seed : {0ull, 42ull, 0x123456789abcdefull}) {
    for (uint64_t stream : {0ull, 7ull, 1ull << 40}) {
      const uint64_t first = seed * 3 + 5;
      Tensor dev = Tensor::empty({n}, DType::kI32, gpu());
      cuda::philox_fill(static_cast<uint32_t*>(dev.data_ptr()), seed, stream, first, n);
      std::vector<int32_t> got = dev.to_vector<int32_t>();
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(static_cast<uint32_t>(got[i]), philox_u32(seed, stream, first + i))
            << "seed " << seed << " stream " << stream << " index " << i;
      }
    }
  }
}

TEST_F(CudaRuntimeTest, StreamGuardRunsOpsOnItsStream) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cuda::current_stream(), nullptr);
  Tensor a = test::random_cpu({1000}, DType::kF32, 1);
  Tensor b = test::random_cpu({1000}, DType::kF32, 2);
  Tensor want = Tensor::empty({1000}, DType::kF32);
  ops::add(a, b, want);
  {
    cuda::StreamGuard guard(stream);
    EXPECT_EQ(cuda::current_stream(), stream);
    Tensor da = a.to(gpu()), db = b.to(gpu());
    Tensor out = Tensor::empty({1000}, DType::kF32, gpu());
    ops::add(da, db, out);
    cuda::synchronize(0);
    test::expect_equal(out, want, "add on a side stream");
  }
  EXPECT_EQ(cuda::current_stream(), nullptr);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace vela
