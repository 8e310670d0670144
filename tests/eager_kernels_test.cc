// The kernels around the GEMMs (src/cost/ops.cc, Layout::kernels): the fused RoPE kernel every
// RoPE model runs, and what PyTorch eager (kernels=eager, torchtitan without torch.compile)
// runs instead: separate wq/wk/wv and w1/w3 GEMMs, RoPE as three kernels, RMSNorm as six,
// SiLU and the multiply apart, the logits cast to fp32 for the loss, and what that keeps in memory; and
// torchtitan compiled (kernels=compiled): the separate GEMMs with the rest fused.
// Every expected value is worked by hand from the shapes in the comments.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/cost/memory.h"
#include "src/cost/ops.h"
#include "src/hardware/hardware_spec.h"
#include "src/io/torchtitan_config.h"
#include "src/layout/layout.h"
#include "src/layout/stack.h"
#include "tests/find_op.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// testing::GqaTestModel: h 1024, 16 heads of 64 with 4 KV heads (q = 1024, kv = 256 per token),
// SwiGLU f = 2816, vocab 8192, RoPE, 1024-token sequences. One sequence a micro-batch, tp 1:
// T = 1024 tokens. bf16: e = 2 bytes.
Layout OneSequence(const std::string& kernels) {
  StatusOr<Layout> l = ParseLayout("tp=1,pp=1,dp=1,mbs=1,gbs=1,dtype=bf16,kernels=" + kernels);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return *l;
}

// Fused RoPE reads and writes Q and K: 2 x e x T x (q + kv) = 2 x 2 x 1024 x 1280 = 5,242,880
// bytes, the same in backward. Eager: (2e + 16) = 20 bytes an element, 20 x 1024 x 1280 =
// 26,214,400.
TEST(EagerKernels, RopeIsOneFusedKernelOrThreeEagerOnes) {
  const ModelSpec m = testing::GqaTestModel();
  const Op fused = testing::FindOp(LayerOps(m, OneSequence("fused"), false), "rope");
  EXPECT_EQ(fused.kind, OpKind::kMemory);
  EXPECT_EQ(fused.bytes, 5242880.0);
  EXPECT_EQ(fused.backward_factor, 1.0);
  EXPECT_EQ(testing::FindOp(LayerOps(m, OneSequence("eager"), false), "rope").bytes, 26214400.0);
  // Learned positions: no rotary kernel.
  for (const Op& op : LayerOps(testing::GptModel(2, 1024, 16, 8192, 1024), OneSequence("fused"), false)) {
    EXPECT_NE(op.name, "rope");
  }
}

// Eager: wq (T x 1024), wk and wv (T x 256) instead of one qkv (T x 1536); w1 and w3 (T x 2816)
// instead of gate_up (T x 5632). The same FLOPs: 2 x T x h x 1536 = 3,221,225,472 for the
// attention's, 2 x T x h x 5632 = 11,811,160,064 for the MLP's.
TEST(EagerKernels, LinearsAreSeparateGemms) {
  const ModelSpec m = testing::GqaTestModel();
  const std::vector<Op> eager = LayerOps(m, OneSequence("eager"), false);
  EXPECT_EQ(testing::FindOp(eager, "wq").n, 1024);
  EXPECT_EQ(testing::FindOp(eager, "wk").n, 256);
  EXPECT_EQ(testing::FindOp(eager, "wv").n, 256);
  EXPECT_EQ(testing::FindOp(eager, "mlp_w1").n, 2816);
  EXPECT_EQ(testing::FindOp(eager, "mlp_w3").n, 2816);
  double attention_flops = 0, mlp_up_flops = 0;
  for (const Op& op : eager) {
    if (op.role == OpRole::kQkv) attention_flops += op.flops;
    if (op.role == OpRole::kMlpUp) mlp_up_flops += op.flops;
    EXPECT_NE(op.name, "qkv");
    EXPECT_NE(op.name, "mlp_gate_up");
  }
  EXPECT_EQ(attention_flops, 3221225472.0);
  EXPECT_EQ(mlp_up_flops, 11811160064.0);
  EXPECT_EQ(testing::FindOp(LayerOps(m, OneSequence("fused"), false), "qkv").n, 1536);
}

// SwiGLU: fused 3 x e x T x f = 3 x 2 x 1024 x 2816 = 17,301,504 bytes, backward 2x; eager
// 5 x e x T x f = 28,835,840, backward 9/5 x.
TEST(EagerKernels, SwigluIsTwoKernels) {
  const ModelSpec m = testing::GqaTestModel();
  const Op fused = testing::FindOp(LayerOps(m, OneSequence("fused"), false), "mlp_swiglu");
  EXPECT_EQ(fused.bytes, 17301504.0);
  EXPECT_EQ(fused.backward_factor, 2.0);
  const Op eager = testing::FindOp(LayerOps(m, OneSequence("eager"), false), "mlp_swiglu");
  EXPECT_EQ(eager.bytes, 28835840.0);
  EXPECT_DOUBLE_EQ(eager.backward_factor, 1.8);
}

// RMSNorm over T x h = 1024 x 1024 = 1,048,576 elements. Fused: read and write 2 bytes each,
// 4 x 1,048,576 = 4,194,304 bytes. Eager, six kernels: x.float() 2 + 4, pow 4 + 4, mean 4, the
// rsqrt multiply 4 + 4, type_as 4 + 2, the weight multiply 2 + 2: 36 bytes an element,
// 37,748,736. At fp32 the casts are no-ops: 8 + 4 + 8 + 8 = 28 bytes, 29,360,128. A LayerNorm
// model runs F.layer_norm, one kernel, eager or not: 2 x 2 bytes.
TEST(EagerKernels, RmsNormIsSixEagerKernels) {
  const ModelSpec m = testing::GqaTestModel();
  EXPECT_EQ(testing::FindOp(LayerOps(m, OneSequence("fused"), false), "norm1").bytes, 4194304.0);
  EXPECT_EQ(testing::FindOp(LayerOps(m, OneSequence("compiled"), false), "norm2").bytes, 4194304.0);
  EXPECT_EQ(testing::FindOp(LayerOps(m, OneSequence("eager"), false), "norm1").bytes, 37748736.0);
  EXPECT_EQ(testing::FindOp(LayerOps(m, OneSequence("eager"), false), "norm2").bytes, 37748736.0);
  StatusOr<Layout> fp32 = ParseLayout("tp=1,pp=1,dp=1,mbs=1,gbs=1,dtype=fp32,kernels=eager");
  ASSERT_TRUE(fp32.ok()) << fp32.status().message();
  EXPECT_EQ(testing::FindOp(LayerOps(m, *fp32, false), "norm1").bytes, 29360128.0);
  ModelSpec layer_norm = m;
  layer_norm.norm = Norm::kLayerNorm;
  EXPECT_EQ(testing::FindOp(LayerOps(layer_norm, OneSequence("eager"), false), "norm1").bytes, 4194304.0);
}

// Cross-entropy over T x V = 1024 x 8192 = 8,388,608 logits: fused 8 bytes a logit
// (67,108,864), backward 0.5x; eager (e + 4) + 8 = 14 bytes (117,440,512), backward
// (16 + 6) / 14 = 11/7 x.
TEST(EagerKernels, TheLossCastsTheLogitsToFp32) {
  const ModelSpec m = testing::GqaTestModel();
  const Op fused = testing::FindOp(HeadOps(m, OneSequence("fused")), "cross_entropy");
  EXPECT_EQ(fused.bytes, 67108864.0);
  EXPECT_EQ(fused.backward_factor, 0.5);
  const Op eager = testing::FindOp(HeadOps(m, OneSequence("eager")), "cross_entropy");
  EXPECT_EQ(eager.bytes, 117440512.0);
  EXPECT_DOUBLE_EQ(eager.backward_factor, 22.0 / 14.0);
}

// Compiled (torch.compile): the eager path's separate linears, the fused path's element-wise
// kernels (RoPE 5,242,880 bytes, SwiGLU 17,301,504 at 2x backward), and the loss compiled on the
// 16-bit logits: e x T x V = 2 x 8,388,608 = 16,777,216 bytes forward, 2x backward.
TEST(EagerKernels, CompiledKeepsTheLinearsAndFusesTheRest) {
  const ModelSpec m = testing::GqaTestModel();
  const std::vector<Op> compiled = LayerOps(m, OneSequence("compiled"), false);
  EXPECT_EQ(testing::FindOp(compiled, "wq").n, 1024);
  EXPECT_EQ(testing::FindOp(compiled, "wk").n, 256);
  EXPECT_EQ(testing::FindOp(compiled, "mlp_w3").n, 2816);
  EXPECT_EQ(testing::FindOp(compiled, "rope").bytes, 5242880.0);
  const Op swiglu = testing::FindOp(compiled, "mlp_swiglu");
  EXPECT_EQ(swiglu.bytes, 17301504.0);
  EXPECT_EQ(swiglu.backward_factor, 2.0);
  const Op loss = testing::FindOp(HeadOps(m, OneSequence("compiled")), "cross_entropy");
  EXPECT_EQ(loss.bytes, 16777216.0);
  EXPECT_EQ(loss.backward_factor, 2.0);
}

// Memory at the head, compiled: the 16-bit logits kept (e = 2 bytes a logit, against the fused
// path's 4-byte probabilities) with the 16-bit gradient beside them (2, the same as fused's
// copy): 2 x 8,388,608 = 16,777,216 bytes less at the peak; a layer keeps what fused keeps.
TEST(EagerKernels, CompiledLossKeepsSixteenBitLogits) {
  const ModelSpec m = testing::GqaTestModel();
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  EXPECT_EQ(LayerActivationBytes(m, OneSequence("compiled"), false), LayerActivationBytes(m, OneSequence("fused"), false));
  const Layout fused = testing::ResolvedOnH100("tp=1,mbs=1,gbs=1,recompute=none,dtype=bf16", 1);
  const Layout compiled = testing::ResolvedOnH100("tp=1,mbs=1,gbs=1,recompute=none,dtype=bf16,kernels=compiled", 1);
  EXPECT_EQ(StageMemory(m, hw, fused, 0).total() - StageMemory(m, hw, compiled, 0).total(), 16777216.0);
}

// Memory, recompute none, one layer's activations: eager keeps SiLU's input beside the
// multiply's two inputs, one more T x f tensor: e x T x f = 2 x 1024 x 2816 = 5,767,168 bytes;
// and each of its two RMSNorms keeps the fp32 copy of its input (4 bytes an element) and the
// normalized tensor (e), where a fused norm keeps its input (e): 2 x 4 x T x h = 2 x 4 x 1024 x
// 1024 = 8,388,608 bytes more; 14,155,776 in all.
// At the head, 8 bytes a logit more than the fused path's 16-bit copy (2): 6 x 8,388,608 =
// 50,331,648 bytes more in the loss copy.
TEST(EagerKernels, EagerKeepsMoreMemory) {
  const ModelSpec m = testing::GqaTestModel();
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  EXPECT_EQ(LayerActivationBytes(m, OneSequence("eager"), false) - LayerActivationBytes(m, OneSequence("fused"), false),
            14155776.0);
  const Layout fused = testing::ResolvedOnH100("tp=1,mbs=1,gbs=1,recompute=none,dtype=bf16", 1);
  const Layout eager = testing::ResolvedOnH100("tp=1,mbs=1,gbs=1,recompute=none,dtype=bf16,kernels=eager", 1);
  EXPECT_EQ(StageMemory(m, hw, eager, 0).loss_logit_copy - StageMemory(m, hw, fused, 0).loss_logit_copy, 50331648.0);
}

// The key: written only when eager, read back; the torchtitan stack defaults to eager; a
// torchtitan job config is eager unless its model is compiled.
TEST(EagerKernels, KeyStackAndTorchtitanReader) {
  EXPECT_EQ(FormatLayout(OneSequence("fused")).find("kernels"), std::string::npos);
  const std::string eager = FormatLayout(OneSequence("eager"));
  EXPECT_NE(eager.find(",kernels=eager"), std::string::npos) << eager;
  EXPECT_EQ(ParseLayout(eager)->kernels, Kernels::kEager);
  const std::string compiled_spec = FormatLayout(OneSequence("compiled"));
  EXPECT_NE(compiled_spec.find(",kernels=compiled"), std::string::npos) << compiled_spec;
  EXPECT_EQ(ParseLayout(compiled_spec)->kernels, Kernels::kCompiled);
  EXPECT_FALSE(ParseLayout("kernels=inductor").ok());

  StatusOr<StackSpec> titan = LoadStack("torchtitan-fsdp2");
  ASSERT_TRUE(titan.ok()) << titan.status().message();
  EXPECT_EQ(titan->defaults.at("kernels"), "eager");
  Layout fp8_eager = OneSequence("eager");
  fp8_eager.dtype = DType::kFp8;
  EXPECT_TRUE(StackRefusal(*titan, fp8_eager).has_value());
  Layout fp8_compiled = OneSequence("compiled");
  fp8_compiled.dtype = DType::kFp8;
  EXPECT_FALSE(StackRefusal(*titan, fp8_compiled).has_value());
  EXPECT_TRUE(StackRefusal(*titan, OneSequence("fused")).has_value());  // no fused QKV or gate+up GEMM

  const std::string toml =
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nseq_len = 8192\nlocal_batch_size = 1\n"
      "global_batch_size = 8\n[parallelism]\ndata_parallel_shard_degree = 8\n[activation_checkpoint]\nmode = \"none\"\n";
  StatusOr<TorchtitanRead> plain = ParseTorchtitanToml(toml, "job.toml");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->layout.kernels, Kernels::kEager);
  StatusOr<TorchtitanRead> compiled = ParseTorchtitanToml(toml + "[compile]\nenable = true\n", "job.toml");
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  EXPECT_EQ(compiled->layout.kernels, Kernels::kCompiled);
}

// One of torchtitan's two compile.components compiled. compiled-model: the compiled layer
// (RoPE fused, 5,242,880 bytes; the layer keeps what fused keeps) with the eager loss (14
// bytes a logit, 117,440,512; backward 22/14) and its memory at the head: 4 bytes a logit kept
// against compiled's 2, and the eager copy's 8 against compiled's 2: (2 + 6) x 8,388,608 =
// 67,108,864 bytes more than compiled, the peak being the head's. compiled-loss: the eager
// layer (RoPE 26,214,400 bytes; 14,155,776 more kept than fused) with the compiled loss
// (16,777,216 bytes, 2x backward). Both names read back; the stack refuses float8 and async
// TP with an eager model, and the reader maps compile.components.
TEST(EagerKernels, OneOfTheTwoCompiled) {
  const ModelSpec m = testing::GqaTestModel();
  const Layout model_only = OneSequence("compiled-model");
  EXPECT_EQ(testing::FindOp(LayerOps(m, model_only, false), "rope").bytes, 5242880.0);
  EXPECT_EQ(LayerActivationBytes(m, model_only, false), LayerActivationBytes(m, OneSequence("fused"), false));
  const Op eager_loss = testing::FindOp(HeadOps(m, model_only), "cross_entropy");
  EXPECT_EQ(eager_loss.bytes, 117440512.0);
  EXPECT_DOUBLE_EQ(eager_loss.backward_factor, 22.0 / 14.0);
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  const Layout compiled = testing::ResolvedOnH100("tp=1,mbs=1,gbs=1,recompute=none,dtype=bf16,kernels=compiled", 1);
  const Layout compiled_model =
      testing::ResolvedOnH100("tp=1,mbs=1,gbs=1,recompute=none,dtype=bf16,kernels=compiled-model", 1);
  EXPECT_EQ(StageMemory(m, hw, compiled_model, 0).total() - StageMemory(m, hw, compiled, 0).total(), 67108864.0);

  const Layout loss_only = OneSequence("compiled-loss");
  EXPECT_EQ(testing::FindOp(LayerOps(m, loss_only, false), "rope").bytes, 26214400.0);
  EXPECT_EQ(LayerActivationBytes(m, loss_only, false) - LayerActivationBytes(m, OneSequence("fused"), false),
            14155776.0);
  const Op compiled_loss = testing::FindOp(HeadOps(m, loss_only), "cross_entropy");
  EXPECT_EQ(compiled_loss.bytes, 16777216.0);
  EXPECT_EQ(compiled_loss.backward_factor, 2.0);

  for (const char* k : {"compiled-model", "compiled-loss"}) {
    const std::string spec = FormatLayout(OneSequence(k));
    EXPECT_NE(spec.find(std::string(",kernels=") + k), std::string::npos) << spec;
    EXPECT_EQ(KernelsName(ParseLayout(spec)->kernels), k);
  }
  StatusOr<StackSpec> titan = LoadStack("torchtitan-fsdp2");
  ASSERT_TRUE(titan.ok()) << titan.status().message();
  Layout fp8_loss_only = loss_only;
  fp8_loss_only.dtype = DType::kFp8;
  EXPECT_TRUE(StackRefusal(*titan, fp8_loss_only).has_value());
  Layout fp8_model_only = model_only;
  fp8_model_only.dtype = DType::kFp8;
  EXPECT_FALSE(StackRefusal(*titan, fp8_model_only).has_value());

  const std::string toml =
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nseq_len = 8192\nlocal_batch_size = 1\n"
      "global_batch_size = 8\n[parallelism]\ndata_parallel_shard_degree = 8\n[activation_checkpoint]\nmode = \"none\"\n"
      "[compile]\nenable = true\n";
  StatusOr<TorchtitanRead> model_read = ParseTorchtitanToml(toml + "components = [\"model\"]\n", "job.toml");
  ASSERT_TRUE(model_read.ok()) << model_read.status().message();
  EXPECT_EQ(model_read->layout.kernels, Kernels::kCompiledModel);
  StatusOr<TorchtitanRead> loss_read = ParseTorchtitanToml(toml + "components = [\"loss\"]\n", "job.toml");
  ASSERT_TRUE(loss_read.ok()) << loss_read.status().message();
  EXPECT_EQ(loss_read->layout.kernels, Kernels::kCompiledLoss);
}

// TP with SP: Megatron-Core keeps a column-parallel GEMM's input sharded (re-gathered in the
// backward); torchtitan's DTensor TP saves the gathered attention and feed-forward inputs for
// wq/wk/wv and w1/w3 whole: 2 x e x T x h x (1 - 1/t) = 2 x 2 x 1024 x 1024 x 1/2 = 2,097,152
// bytes a layer more at t = 2 (compiled and fused keep the same otherwise).
TEST(EagerKernels, TorchtitanTpKeepsTheGatheredInputs) {
  const ModelSpec m = testing::GqaTestModel();
  StatusOr<Layout> fused = ParseLayout("tp=2,pp=1,dp=1,mbs=1,gbs=1,dtype=bf16,sp=on");
  StatusOr<Layout> compiled = ParseLayout("tp=2,pp=1,dp=1,mbs=1,gbs=1,dtype=bf16,sp=on,kernels=compiled");
  ASSERT_TRUE(fused.ok() && compiled.ok());
  EXPECT_EQ(LayerActivationBytes(m, *compiled, false) - LayerActivationBytes(m, *fused, false), 2097152.0);
  Layout fused_no_sp = *fused, compiled_no_sp = *compiled;  // without SP both keep them whole
  fused_no_sp.sp = compiled_no_sp.sp = false;
  EXPECT_EQ(LayerActivationBytes(m, compiled_no_sp, false), LayerActivationBytes(m, fused_no_sp, false));
}

// Dropout inside the fused attention kernel: its executed work grows by 0.614 / 0.594 (the
// H200 cuDNN measurement cited in ops.cc). GptModel(2, 1024, 16, ...) has dropout: with s = T =
// 1024, the kernel's causal half is 4 x T x s x d x a / 2 = 2 x 1024 x 1024 x 64 x 16 =
// 2,147,483,648 FLOPs, times 0.614 / 0.594 with dropout, unchanged without.
TEST(EagerKernels, InKernelAttentionDropoutCostsTime) {
  ModelSpec m = testing::GptModel(2, 1024, 16, 8192, 1024);
  EXPECT_DOUBLE_EQ(testing::FindOp(LayerOps(m, OneSequence("fused"), false), "attention").executed_flops,
                   2147483648.0 * 0.614 / 0.594);
  m.dropout = false;
  EXPECT_EQ(testing::FindOp(LayerOps(m, OneSequence("fused"), false), "attention").executed_flops, 2147483648.0);
}

}  // namespace
}  // namespace shardsim
