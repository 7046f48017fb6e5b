// InferenceWorkspace: buffers sized by the config and allocated once; on the CPU the host mirrors
// are the buffers themselves, so upload() has nothing to copy, and a decode step's metadata
// (decode_meta) is the full tensors' heads. The CUDA packing: tests/cuda/test_cuda_runtime.cpp.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/runtime/inference_workspace.h"

namespace vela {
namespace {

TEST(Workspace, ShapesFollowTheConfig) {
  InferenceWorkspace ws(WorkspaceConfig{4, 32, 100, Device::cpu()});
  EXPECT_EQ(ws.input_ids.shape(), Shape({32}));
  EXPECT_EQ(ws.positions.shape(), Shape({32}));
  EXPECT_EQ(ws.out_cache_loc.shape(), Shape({32}));
  EXPECT_EQ(ws.req_pool_indices.shape(), Shape({4}));
  EXPECT_EQ(ws.seq_lens.shape(), Shape({4}));
  EXPECT_EQ(ws.qo_indptr.shape(), Shape({5}));
  EXPECT_EQ(ws.kv_indptr.shape(), Shape({5}));
  EXPECT_EQ(ws.logits_indices.shape(), Shape({4}));
  EXPECT_EQ(ws.logits.shape(), Shape({4, 100}));
  for (const Tensor* t : {&ws.input_ids, &ws.positions, &ws.out_cache_loc, &ws.req_pool_indices,
                          &ws.seq_lens, &ws.qo_indptr, &ws.kv_indptr, &ws.logits_indices})
    EXPECT_EQ(t->dtype(), DType::kI32);
  EXPECT_EQ(ws.logits.dtype(), DType::kF32);
  EXPECT_EQ(ws.max_seqs(), 4);
  EXPECT_EQ(ws.max_tokens(), 32);
}

TEST(Workspace, CpuHostMirrorIsTheBuffer) {
  InferenceWorkspace ws(WorkspaceConfig{2, 8, 10, Device::cpu()});
  EXPECT_FALSE(ws.has_host_mirror());
  EXPECT_EQ(ws.host.positions.data_ptr(), ws.positions.data_ptr());
  EXPECT_EQ(ws.host.qo_indptr.data_ptr(), ws.qo_indptr.data_ptr());
  void* before = ws.positions.data_ptr();
  ws.host.positions.data<int32_t>()[3] = 42;
  ws.upload(4, 1);
  EXPECT_EQ(ws.positions.data_ptr(), before);
  EXPECT_EQ(ws.positions.to_vector<int32_t>()[3], 42);
  EXPECT_THROW(ws.upload(9, 1), InternalError);
}

TEST(Workspace, CpuDecodeMetaIsTheHeadsOfTheFullTensors) {
  InferenceWorkspace ws(WorkspaceConfig{4, 16, 10, Device::cpu()});
  InferenceWorkspace::DecodeMeta m = ws.decode_meta(3);
  const std::pair<const Tensor*, const Tensor*> pairs[] = {
      {&m.input_ids, &ws.input_ids},         {&m.positions, &ws.positions},
      {&m.out_cache_loc, &ws.out_cache_loc}, {&m.req_pool_indices, &ws.req_pool_indices},
      {&m.seq_lens, &ws.seq_lens},           {&m.qo_indptr, &ws.qo_indptr},
      {&m.kv_indptr, &ws.kv_indptr},         {&m.logits_indices, &ws.logits_indices}};
  for (const auto& [got, full] : pairs) EXPECT_EQ(got->data_ptr(), full->data_ptr());
  EXPECT_EQ(m.positions.shape(), Shape({3}));
  EXPECT_EQ(m.qo_indptr.shape(), Shape({4}));
  EXPECT_EQ(m.kv_indptr.shape(), Shape({4}));
  ws.host.positions.data<int32_t>()[2] = 7;
  ws.upload_decode(3, true);  // nothing to copy
  EXPECT_EQ(m.positions.to_vector<int32_t>()[2], 7);
  ws.mark_consumed();  // nothing to record
  EXPECT_THROW(ws.decode_meta(5), InternalError);
}

TEST(Workspace, RejectsBadConfigs) {
  EXPECT_THROW(InferenceWorkspace(WorkspaceConfig{0, 8, 10, Device::cpu()}), InvalidArgument);
  EXPECT_THROW(InferenceWorkspace(WorkspaceConfig{2, 0, 10, Device::cpu()}), InvalidArgument);
  EXPECT_THROW(InferenceWorkspace(WorkspaceConfig{2, 8, 0, Device::cpu()}), InvalidArgument);
  EXPECT_THROW(InferenceWorkspace(WorkspaceConfig{4, 2, 10, Device::cpu()}), InvalidArgument);
}

}  // namespace
}  // namespace vela
