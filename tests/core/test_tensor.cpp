// Tensor: construction, views (shared storage, offsets, strides), strided copies, and the errors
// that bad shapes and indices raise.
#include <gtest/gtest.h>

#include <numeric>

#include "core/cuda/cuda_api.h"
#include "core/tensor.h"
#include "test_util.h"

namespace vela {
namespace {

std::vector<float> iota(int n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

// [2, 3, 4] holding 0..23: element [i][j][k] is 12 i + 4 j + k.
Tensor base3() { return Tensor::from_vector(iota(24), {2, 3, 4}); }

TEST(Tensor, EmptyZerosFromVector) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_EQ(u.str(), "<undefined tensor>");

  Tensor e = Tensor::empty({2, 3}, DType::kBF16);
  EXPECT_TRUE(e.defined());
  EXPECT_EQ(e.shape(), (Shape{2, 3}));
  EXPECT_EQ(e.strides(), (Shape{3, 1}));
  EXPECT_EQ(e.dim(), 2);
  EXPECT_EQ(e.size(-1), 3);
  EXPECT_EQ(e.numel(), 6);
  EXPECT_EQ(e.element_size(), 2u);
  EXPECT_EQ(e.nbytes(), 12u);
  EXPECT_EQ(e.offset(), 0);
  EXPECT_TRUE(e.is_cpu());
  EXPECT_TRUE(e.is_contiguous());
  EXPECT_EQ(e.str(), "bf16[2, 3] cpu");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(e.data_ptr()) % kCpuAlignment, 0u);

  Tensor z = Tensor::zeros({3, 5}, DType::kI64);
  for (int64_t v : z.to_vector<int64_t>()) EXPECT_EQ(v, 0);

  Tensor v = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_EQ(v.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(Tensor::from_vector<uint8_t>({7, 8}).shape(), (Shape{2}));

  Tensor zero_d = Tensor::empty({}, DType::kF32);
  EXPECT_EQ(zero_d.dim(), 0);
  EXPECT_EQ(zero_d.numel(), 1);
  Tensor none = Tensor::zeros({0, 4}, DType::kF32);
  EXPECT_EQ(none.numel(), 0);
  EXPECT_TRUE(none.to_vector<float>().empty());
}

// Large zeroed host blocks are fresh zero-filled mappings (no memset, no resident pages until
// touched): still zero, aligned, writable, counted as allocations, and released cleanly; the
// sizes around the threshold take either path.
TEST(Tensor, LargeZerosAreMappedZeroPages) {
  for (size_t bytes : {kLazyZeroBytes - 4, kLazyZeroBytes, 3 * kLazyZeroBytes + 8}) {
    const uint64_t before = storage_allocation_count();
    Tensor z = Tensor::zeros({static_cast<int64_t>(bytes / 4)}, DType::kF32);
    EXPECT_EQ(storage_allocation_count(), before + 1);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(z.data_ptr()) % kCpuAlignment, 0u);
    const float* p = z.data<float>();
    for (int64_t i = 0; i < z.numel(); i += 997) ASSERT_EQ(p[i], 0.0f) << i;
    EXPECT_EQ(p[z.numel() - 1], 0.0f);
    z.data<float>()[z.numel() - 1] = 3.0f;
    z.data<float>()[0] = 2.0f;
    EXPECT_EQ(z.to_vector<float>().back(), 3.0f);
    Tensor again = Tensor::zeros({static_cast<int64_t>(bytes / 4)}, DType::kF32);
    EXPECT_EQ(again.data<float>()[0], 0.0f);  // a new block is zero whatever the last one held
  }
  EXPECT_THROW_WITH((void)Tensor::zeros({2, -1}, DType::kF32), InvalidArgument, "negative");
}

TEST(Tensor, ConstructionErrors) {
  EXPECT_THROW_WITH((void)Tensor::from_vector<float>({1, 2, 3}, {2, 2}), InvalidArgument,
                    "3 values", "[2, 2]");
  EXPECT_THROW_WITH((void)Tensor::empty({2, -1}, DType::kF32), InvalidArgument, "negative");
  EXPECT_THROW_WITH((Shape{1, 1, 1, 1, 1, 1, 1}), InvalidArgument, "rank");
  Tensor t = Tensor::zeros({2}, DType::kF32);
  EXPECT_THROW_WITH((void)t.data<int32_t>(), InvalidArgument, "f32[2]", "i32");
  EXPECT_THROW_WITH((void)t.to_vector<bf16>(), InvalidArgument, "bf16");
}

TEST(Tensor, ViewSharesStorage) {
  Tensor b = base3();
  Tensor v = b.view({-1, 4});
  EXPECT_EQ(v.shape(), (Shape{6, 4}));
  EXPECT_EQ(v.strides(), (Shape{4, 1}));
  EXPECT_EQ(v.storage(), b.storage());
  Tensor w = b.view({4, -1, 2});
  EXPECT_EQ(w.shape(), (Shape{4, 3, 2}));
  w.data<float>()[5] = 100.0f;  // writes through to b
  EXPECT_EQ(b.to_vector<float>()[5], 100.0f);
  EXPECT_EQ(b.view({24}).shape(), (Shape{24}));
  EXPECT_EQ(Tensor::empty({0, 3}, DType::kF32).view({-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_EQ(Tensor::empty({1}, DType::kF32).view(Shape{}).dim(), 0);

  EXPECT_THROW_WITH((void)b.view({5, 5}), InvalidArgument, "[5, 5]");
  EXPECT_THROW_WITH((void)b.view({5, -1}), InvalidArgument, "cannot infer");
  EXPECT_THROW_WITH((void)b.view({-1, -1}), InvalidArgument, "more than one -1");
  EXPECT_THROW_WITH((void)b.view({-2, 12}), InvalidArgument, "bad extent");
  EXPECT_THROW_WITH((void)b.transpose(0, 1).view({24}), InvalidArgument, "non-contiguous");
}

TEST(Tensor, SliceAndSelectOffsets) {
  Tensor b = base3();
  Tensor s = b.slice(1, 1, 3);  // [2, 2, 4]
  EXPECT_EQ(s.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(s.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(s.offset(), 4);
  EXPECT_EQ(s.storage(), b.storage());
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_EQ(s.to_vector<float>(),
            (std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23}));

  Tensor r = s.select(0, 1);  // [2, 4]
  EXPECT_EQ(r.shape(), (Shape{2, 4}));
  EXPECT_EQ(r.strides(), (Shape{4, 1}));
  EXPECT_EQ(r.offset(), 16);
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_EQ(static_cast<float*>(r.data_ptr())[0], 16.0f);

  Tensor c = b.select(-1, -1);  // [2, 3], every 4th element from 3
  EXPECT_EQ(c.strides(), (Shape{12, 4}));
  EXPECT_EQ(c.offset(), 3);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{3, 7, 11, 15, 19, 23}));

  Tensor neg = b.slice(2, -3, -1);  // [1, 3)
  EXPECT_EQ(neg.offset(), 1);
  EXPECT_EQ(neg.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(b.slice(0, 1, 1).numel(), 0);
  Tensor row = b.slice(0, 1, 2);
  EXPECT_TRUE(row.is_contiguous());
  EXPECT_EQ(row.view({-1}).to_vector<float>()[0], 12.0f);

  EXPECT_THROW_WITH((void)b.slice(0, 0, 3), InvalidArgument, "out of range");
  EXPECT_THROW_WITH((void)b.slice(1, 2, 1), InvalidArgument, "out of range");
  EXPECT_THROW_WITH((void)b.slice(3, 0, 1), InvalidArgument, "dimension 3");
  EXPECT_THROW_WITH((void)b.select(0, 2), InvalidArgument, "out of range");
  EXPECT_THROW_WITH((void)b.select(1, -4), InvalidArgument, "out of range");
}

TEST(Tensor, TransposeUnsqueezeSqueeze) {
  Tensor b = base3();
  Tensor t = b.transpose(0, 2);  // [4, 3, 2]
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  EXPECT_EQ(t.storage(), b.storage());
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(b.transpose(-1, 0).strides(), t.strides());

  EXPECT_EQ(b.unsqueeze(0).shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(b.unsqueeze(0).strides(), (Shape{24, 12, 4, 1}));
  EXPECT_EQ(b.unsqueeze(1).shape(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(b.unsqueeze(1).strides(), (Shape{12, 12, 4, 1}));
  EXPECT_EQ(b.unsqueeze(3).strides(), (Shape{12, 4, 1, 1}));
  EXPECT_EQ(b.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_TRUE(b.unsqueeze(1).is_contiguous());
  EXPECT_EQ(b.unsqueeze(1).squeeze(1).shape(), b.shape());
  EXPECT_EQ(b.unsqueeze(1).squeeze(1).strides(), b.strides());
  Tensor tu = t.unsqueeze(1);  // on a transposed view: [4, 1, 3, 2]
  EXPECT_EQ(tu.to_vector<float>(), t.to_vector<float>());
  EXPECT_THROW_WITH((void)b.squeeze(0), InvalidArgument, "squeeze");
  EXPECT_THROW_WITH((void)b.unsqueeze(5), InvalidArgument, "dimension 5");
}

TEST(Tensor, ContiguousOfTransposed3d) {
  Tensor b = base3();
  Tensor t = b.transpose(0, 2);  // [k][j][i] = 12 i + 4 j + k
  Tensor c = t.contiguous();
  EXPECT_NE(c.storage(), b.storage());
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.offset(), 0);
  EXPECT_EQ(c.shape(), (Shape{4, 3, 2}));
  const float* p = c.data<float>();
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) EXPECT_EQ(p[k * 6 + j * 2 + i], 12 * i + 4 * j + k);
  EXPECT_EQ(t.to_vector<float>(), c.to_vector<float>());
  EXPECT_EQ(b.contiguous().storage(), b.storage());  // already contiguous: self

  // Offset + strides together.
  Tensor s = b.slice(2, 1, 3).transpose(0, 1);  // [3, 2, 2]: [j][i][k'] = 12 i + 4 j + k' + 1
  std::vector<float> got = s.contiguous().to_vector<float>();
  std::vector<float> want;
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 2; ++k) want.push_back(12 * i + 4 * j + k + 1);
  EXPECT_EQ(got, want);
}

TEST(Tensor, CloneAndCopy) {
  Tensor b = base3();
  Tensor cl = b.clone();
  EXPECT_NE(cl.storage(), b.storage());
  cl.data<float>()[0] = -1.0f;
  EXPECT_EQ(b.to_vector<float>()[0], 0.0f);
  EXPECT_EQ(b.transpose(0, 2).clone().to_vector<float>(), b.transpose(0, 2).to_vector<float>());

  // Strided source into a contiguous destination.
  Tensor dst = Tensor::zeros({4, 3, 2}, DType::kF32);
  dst.copy_(b.transpose(0, 2));
  EXPECT_EQ(dst.to_vector<float>(), b.transpose(0, 2).contiguous().to_vector<float>());
  // Contiguous source into a strided destination: writing the transpose back restores b.
  Tensor back = Tensor::zeros({2, 3, 4}, DType::kF32);
  back.transpose(0, 2).copy_(dst);
  EXPECT_EQ(back.to_vector<float>(), iota(24));
  // Strided into strided.
  Tensor back2 = Tensor::zeros({2, 3, 4}, DType::kF32);
  back2.transpose(0, 2).copy_(b.transpose(0, 2));
  EXPECT_EQ(back2.to_vector<float>(), iota(24));
  // 0-d.
  Tensor s0 = Tensor::zeros({}, DType::kI32);
  s0.copy_(Tensor::from_vector<int32_t>({9}).view(Shape{}));
  EXPECT_EQ(s0.item<int32_t>(), 9);

  EXPECT_THROW_WITH(dst.copy_(b), InvalidArgument, "does not match");
  EXPECT_THROW_WITH(b.copy_(Tensor::zeros({2, 3, 4}, DType::kF16)), InvalidArgument,
                    "does not match");
  EXPECT_THROW_WITH(b.copy_(Tensor()), InvalidArgument, "undefined");
}

TEST(Tensor, ZeroStridedView) {
  Tensor b = base3();
  b.transpose(0, 2).slice(0, 1, 2).zero_();  // every element with k == 1
  std::vector<float> v = b.to_vector<float>();
  for (int n = 0; n < 24; ++n) EXPECT_EQ(v[n], n % 4 == 1 ? 0.0f : static_cast<float>(n));
}

TEST(Tensor, Reshape) {
  Tensor b = base3();
  Tensor r = b.reshape({6, 4});
  EXPECT_EQ(r.storage(), b.storage());  // a view when possible
  Tensor t = b.transpose(0, 2);
  Tensor rt = t.reshape({4, 6});
  EXPECT_NE(rt.storage(), b.storage());
  EXPECT_TRUE(rt.is_contiguous());
  EXPECT_EQ(rt.shape(), (Shape{4, 6}));
  EXPECT_EQ(rt.to_vector<float>(), t.contiguous().to_vector<float>());
  EXPECT_EQ(t.reshape({-1}).to_vector<float>(), t.to_vector<float>());
  EXPECT_THROW_WITH((void)t.reshape({5, 5}), InvalidArgument, "[5, 5]");
}

TEST(Tensor, Item) {
  EXPECT_EQ(Tensor::from_vector<float>({2.5f}).item<float>(), 2.5f);
  EXPECT_EQ(Tensor::from_vector<int64_t>({-3}).view(Shape{}).item<int64_t>(), -3);
  EXPECT_EQ(base3().select(0, 1).select(0, 2).select(0, 3).item<float>(), 23.0f);
  EXPECT_THROW_WITH((void)base3().item<float>(), InvalidArgument, "item()", "24 elements");
  EXPECT_THROW_WITH((void)Tensor::zeros({0}, DType::kF32).item<float>(), InvalidArgument, "item()");
}

TEST(Tensor, SixteenBitTypes) {
  Tensor h = Tensor::from_vector<f16>({f16(1.0f), f16(-2.5f), f16(65504.0f)});
  std::vector<f16> hv = h.to_vector<f16>();
  EXPECT_EQ(static_cast<float>(hv[1]), -2.5f);
  EXPECT_EQ(static_cast<float>(hv[2]), 65504.0f);
  Tensor bt = Tensor::from_vector<bf16>({bf16(3.0f), bf16(0.5f), bf16(-1.0f), bf16(7.0f)}, {2, 2});
  std::vector<bf16> bv = bt.transpose(0, 1).to_vector<bf16>();
  EXPECT_EQ(static_cast<float>(bv[1]), -1.0f);
  EXPECT_EQ(static_cast<float>(bv[2]), 0.5f);
}

TEST(Tensor, ToCpuIsNoOp) {
  Tensor t = base3().slice(1, 1, 2);
  Tensor u = t.to(Device::cpu());
  EXPECT_EQ(u.storage(), t.storage());
  EXPECT_EQ(u.offset(), t.offset());
  EXPECT_EQ(u.strides(), t.strides());
}

TEST(Tensor, CudaWithoutCuda) {
  Tensor t = base3();
  if (cuda::available()) {
    Tensor g = t.transpose(0, 2).to(Device::cuda(0));
    EXPECT_TRUE(g.is_cuda());
    EXPECT_EQ(g.to_vector<float>(), t.transpose(0, 2).to_vector<float>());
    EXPECT_EQ(g.to(Device::cpu()).to_vector<float>(), t.transpose(0, 2).to_vector<float>());
    return;
  }
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_THROW_WITH((void)Tensor::empty({2}, DType::kF32, Device::cuda(0)), Unsupported, "CUDA");
  EXPECT_THROW_WITH((void)t.to(Device::cuda(0)), Unsupported, "CUDA");
}

TEST(Device, Parse) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(2).str(), "cuda:2");
  EXPECT_THROW_WITH((void)Device::parse("cuda:"), InvalidArgument, "cuda:");
  EXPECT_THROW_WITH((void)Device::parse("cuda:x"), InvalidArgument, "cuda:x");
  EXPECT_THROW_WITH((void)Device::parse("tpu"), InvalidArgument, "tpu");
}

}  // namespace
}  // namespace vela
