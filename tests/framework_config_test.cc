// Tests of the framework-configuration readers (src/io/megatron_args.h,
// src/io/deepspeed_config.h): hand-written launch scripts and configs, read with Megatron-LM's
// and DeepSpeed's defaults (expected values derived in the comments), and their errors.
#include <gtest/gtest.h>

#include <string>

#include "src/io/deepspeed_config.h"
#include "src/io/megatron_args.h"
#include "src/io/nemo_overrides.h"
#include "src/model/model_spec.h"
#include "src/util/strings.h"
#include "tests/contains.h"

namespace shardsim {
namespace {

using testing::Contains;

// A launch script as people write them: torchrun and its flags first, comments, quotes, an
// "=" form and arguments shardsim does not model.
const char* kLlama70bScript = R"(#!/bin/bash
# Llama 3 70B on 64 H100
torchrun --nproc-per-node 8 --nnodes 8 pretrain_gpt.py \
  --num-layers 80 --hidden-size 8192 --num-attention-heads 64 \
  --group-query-attention --num-query-groups 8 \
  --ffn-hidden-size 28672 --seq-length 8192 --max-position-embeddings 8192 \
  --swiglu --normalization RMSNorm --position-embedding-type rope --rotary-base 500000 \
  --untie-embeddings-and-output-weights --disable-bias-linear \
  --attention-dropout 0.0 --hidden-dropout 0.0 \
  --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 \
  --num-layers-per-virtual-pipeline-stage 5 --sequence-parallel \
  --micro-batch-size=1 --global-batch-size 128 \
  --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather \
  --recompute-activations --bf16 --use-flash-attn \
  --lr 3e-4 --tokenizer-type "HuggingFaceTokenizer" --data-path '/data/my corpus' \
  --log-interval 1  # logging is not modelled
)";

TEST(MegatronArgs, ReadsALaunchScript) {
  StatusOr<MegatronRead> r = ParseMegatronArgs(kLlama70bScript, "train.sh");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Layout& l = r->layout;
  EXPECT_EQ(l.tp, 8);
  EXPECT_EQ(l.pp, 4);
  EXPECT_EQ(l.cp, 1);
  EXPECT_EQ(l.vpp, 4);  // 80 layers / 4 stages = 20 per stage, / 5 per virtual stage = 4
  EXPECT_EQ(l.schedule, Schedule::kInterleaved);
  EXPECT_TRUE(l.overlap_pp);  // on by default in the interleaved schedule
  EXPECT_TRUE(l.sp);
  EXPECT_EQ(l.mbs, 1);
  EXPECT_EQ(l.gbs, 128);
  EXPECT_EQ(l.dp, 0);  // Megatron-LM derives it from the world size
  EXPECT_EQ(l.zero, 1);
  EXPECT_TRUE(l.overlap_dp);
  EXPECT_EQ(l.overlap_tp, TpOverlap::kBackward);  // Megatron-LM's default for tp > 1
  EXPECT_EQ(l.recompute, Recompute::kSelective);
  EXPECT_EQ(l.dtype, DType::kBf16);
  EXPECT_EQ(l.attention, AttentionImpl::kFlash);
  const ModelSpec& m = r->model;
  EXPECT_EQ(m.layers, 80);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);  // 8192 / 64, no --kv-channels
  EXPECT_EQ(m.activation, Activation::kSwiglu);
  EXPECT_EQ(m.norm, Norm::kRmsNorm);
  EXPECT_EQ(m.rotary_base, 500000.0);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_FALSE(m.bias);
  EXPECT_FALSE(m.dropout);
  // The unmodelled arguments, with their values skipped (the quoted path is one word).
  ASSERT_EQ(r->ignored.size(), 4u);
  EXPECT_EQ(r->ignored[0], "--lr");
  EXPECT_EQ(r->ignored[2], "--data-path");
  EXPECT_TRUE(r->warnings.empty());
  // The bundled llama3-70b is that model.
  StatusOr<ModelSpec> bundled = LoadModel("llama3-70b");
  ASSERT_TRUE(bundled.ok());
  EXPECT_TRUE(ModelMismatches(*bundled, m).empty());
}

TEST(MegatronArgs, AbsentArgumentsTakeMegatronDefaults) {
  StatusOr<MegatronRead> r =
      ParseMegatronArgs("--num-layers 24 --hidden-size 4096 --num-attention-heads 32 --seq-length 2048 --swiglu",
                        "args");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ModelSpec& m = r->model;
  // validate_args: with --swiglu and no --ffn-hidden-size, int((4 x 4096 x 2/3) / 64) x 64
  // = int(10922.7 / 64) x 64 = 170 x 64 = 10880.
  EXPECT_EQ(m.ffn_hidden, 10880);
  EXPECT_EQ(m.kv_heads, 32);  // no GQA
  EXPECT_EQ(m.norm, Norm::kLayerNorm);
  EXPECT_EQ(m.position, Position::kLearned);  // learned_absolute
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_TRUE(m.bias);     // --add-bias-linear is the default
  EXPECT_TRUE(m.dropout);  // 0.1 and 0.1
  const Layout& l = r->layout;
  EXPECT_EQ(l.tp, 1);
  EXPECT_EQ(l.zero, 0);
  EXPECT_FALSE(l.overlap_dp);  // --overlap-grad-reduce is opt-in
  EXPECT_EQ(l.overlap_tp, TpOverlap::kOff);
  EXPECT_EQ(l.dtype, DType::kFp32);  // neither --bf16 nor --fp16
  EXPECT_EQ(l.attention, AttentionImpl::kFlash);  // --attention-backend auto
}

TEST(MegatronArgs, UnevenSplitsAndAccountedVirtualStages) {
  // 126 layers + embedding + loss = 128 over 8 stages = 16 per stage; 2 per virtual stage: 8.
  StatusOr<MegatronRead> r = ParseMegatronArgs(
      "--num-layers 126 --hidden-size 16384 --num-attention-heads 128 --seq-length 8192 "
      "--pipeline-model-parallel-size 8 --num-layers-per-virtual-pipeline-stage 2 "
      "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "
      "--no-overlap-p2p-communication",
      "args");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->layout.vpp, 8);
  EXPECT_TRUE(r->layout.embedding_in_split);
  EXPECT_TRUE(r->layout.loss_in_split);
  EXPECT_FALSE(r->layout.overlap_pp);
  StatusOr<MegatronRead> meta = ParseMegatronArgs(
      "--num-layers 126 --hidden-size 16384 --num-attention-heads 128 --seq-length 8192 "
      "--pipeline-model-parallel-size 16 --decoder-first-pipeline-num-layers 7 "
      "--decoder-last-pipeline-num-layers 7",
      "args");
  ASSERT_TRUE(meta.ok()) << meta.status().message();
  EXPECT_EQ(meta->layout.first_stage_layers, 7);
  EXPECT_EQ(meta->layout.last_stage_layers, 7);
  EXPECT_EQ(meta->layout.vpp, 1);
}

TEST(MegatronArgs, ErrorsAreLocated) {
  const std::string shape = "--num-layers 8 --hidden-size 512 --num-attention-heads 8 --seq-length 128 ";
  struct Case {
    std::string text, expected;
  } cases[] = {
      {shape + "\n--tensor-model-parallel-size $TP", "args:2:30: --tensor-model-parallel-size: expected an integer, found '$TP' (a shell variable"},
      {shape + "--micro-batch-size", "--micro-batch-size: missing its value"},
      {shape + "--bf16 --bf16", "--bf16 given twice (first at args:1:"},
      {shape + "--data-path 'a b", "args:1:87: unterminated single quote"},
      {shape + "--num-layers-per-virtual-pipeline-stage 2 --num-virtual-stages-per-pipeline-rank 2 --pipeline-model-parallel-size 2",
       "both given; Megatron-LM takes one"},
      {shape + "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 3",
       "8 layers over 2 stages do not split into chunks of that size"},
      {shape + "--bf16 --fp16", "--bf16 and --fp16 both given"},
      {shape + "--normalization RMSnorm", "expected one of LayerNorm, RMSNorm, found 'RMSnorm' (did you mean 'RMSNorm'?)"},
      {shape + "--bf16=1", "--bf16 is a switch and takes no value"},
      {"--hidden-size 512 --num-attention-heads 8 --seq-length 128", "--num-layers: missing"},
      {shape + "--tp-comm-overlap --tensor-model-parallel-size 2", "--tp-comm-overlap needs --sequence-parallel"},
  };
  for (const Case& c : cases) {
    StatusOr<MegatronRead> r = ParseMegatronArgs(c.text, "args");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_TRUE(Contains(r.status().message(), c.expected)) << r.status().message();
  }
  // A near miss of an argument read here is a warning, not an error (Megatron-LM has hundreds
  // of arguments shardsim does not read).
  StatusOr<MegatronRead> typo = ParseMegatronArgs(shape + "--tensor-model-paralel-size 2", "args");
  ASSERT_TRUE(typo.ok());
  ASSERT_EQ(typo->warnings.size(), 1u);
  EXPECT_TRUE(Contains(typo->warnings[0], "did you mean --tensor-model-parallel-size?"));
  EXPECT_EQ(typo->layout.tp, 1);
}

// The experts' tensor parallel size is read into the layout (Layout::etp): Megatron-LM's
// --expert-tensor-parallel-size and NeMo's expert_tensor_parallel_size (None: the TP size, as
// absent); the TP size itself resolves to unset. --moe-extended-tp (experts over TP x EP,
// deprecated) is still refused where it stands; a dense model ignores them, as Megatron does.
TEST(MegatronArgs, ExpertTensorParallelIsRead) {
  const std::string dense = "--num-layers 8 --hidden-size 512 --num-attention-heads 8 --seq-length 128 ";
  const std::string moe = dense + "--num-experts 8 --moe-router-topk 2 --tensor-model-parallel-size 2 ";
  StatusOr<MegatronRead> one = ParseMegatronArgs(moe + "--expert-tensor-parallel-size 1", "args");
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->layout.tp, 2);
  EXPECT_EQ(one->layout.expert_tp(), 1);
  StatusOr<MegatronRead> extended = ParseMegatronArgs(moe + "--moe-extended-tp", "args");
  ASSERT_FALSE(extended.ok());
  EXPECT_TRUE(Contains(extended.status().message(), "--moe-extended-tp")) << extended.status().message();
  StatusOr<MegatronRead> same = ParseMegatronArgs(moe + "--expert-tensor-parallel-size 2", "args");
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(same->layout.tp, 2);
  EXPECT_FALSE(same->layout.own_expert_tp());
  StatusOr<MegatronRead> bad = ParseMegatronArgs(moe + "--expert-tensor-parallel-size 0", "args");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Contains(bad.status().message(), "--expert-tensor-parallel-size")) << bad.status().message();
  StatusOr<MegatronRead> no_experts =
      ParseMegatronArgs(dense + "--tensor-model-parallel-size 2 --expert-tensor-parallel-size 1", "args");
  ASSERT_TRUE(no_experts.ok()) << no_experts.status().message();
  EXPECT_FALSE(no_experts->layout.own_expert_tp());
  const std::string nemo =
      "recipe.model.config.num_layers = 2\nrecipe.model.config.hidden_size = 1024\n"
      "recipe.model.config.num_attention_heads = 8\nrecipe.model.config.seq_length = 2048\n"
      "recipe.model.config.num_moe_experts = 8\nrecipe.model.config.moe_router_topk = 2\n"
      "recipe.trainer.strategy.tensor_model_parallel_size = 2\n";
  StatusOr<MegatronRead> n1 = ParseNemoOverrides(nemo + "recipe.trainer.strategy.expert_tensor_parallel_size = 1\n", "o.py");
  ASSERT_TRUE(n1.ok()) << n1.status().message();
  EXPECT_EQ(n1->layout.expert_tp(), 1);
  StatusOr<MegatronRead> nnone = ParseNemoOverrides(nemo + "recipe.trainer.strategy.expert_tensor_parallel_size = None\n", "o.py");
  ASSERT_TRUE(nnone.ok()) << nnone.status().message();
  EXPECT_EQ(nnone->layout.expert_tp(), 2);
}

// Settings that change what runs but that shardsim does not model are refused where they stand,
// not priced as Megatron-LM's default; their defaults, or values that are the default, read.
TEST(MegatronArgs, WhatIsNotModelledIsRefused) {
  const std::string shape = "--num-layers 8 --hidden-size 512 --num-attention-heads 8 --seq-length 128 ";
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--recompute-granularity selective --recompute-modules mlp moe_act",
            "--recompute-modules mlp moe_act: recomputing other modules than the attention core (core_attn) is not modelled"},
           {"--use-torch-fsdp2", "--use-torch-fsdp2: Megatron-Core's FSDP"},
           {"--use-megatron-fsdp", "--use-megatron-fsdp: Megatron-Core's FSDP"},
           {"--context-parallel-size 2 --cp-comm-type a2a", "context parallelism by a2a"},
           {"--use-distributed-optimizer --num-distributed-optimizer-instances 2", "sharded over part of the data-parallel ranks"},
           {"--pipeline-model-parallel-layout 'E|t*4|t*4,L'", "a custom pipeline layout"},
           {"--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 "
            "--microbatch-group-size-per-virtual-pipeline-stage 4",
            "micro-batch groups are not the pipeline size"},
           {"--fp8-format hybrid --first-last-layers-bf16", "bf16 first and last layers under fp8"},
           {"--fp4-format e2m1", "fp4 training"},
           {"--fp8-format hybrid --fp8-recipe mxfp8", "--fp8-recipe mxfp8: fp8 other than per-tensor scaling"},
           {"--fp8-format e4m3 --fp8-recipe blockwise", "--fp8-recipe blockwise: fp8 other than per-tensor scaling"}}) {
    StatusOr<MegatronRead> r = ParseMegatronArgs(shape + args, "args");
    ASSERT_FALSE(r.ok()) << args;
    EXPECT_TRUE(Contains(r.status().message(), "args:1:")) << r.status().message();
    EXPECT_TRUE(Contains(r.status().message(), expected)) << r.status().message();
  }
  // Overlaps it does not model are read with a warning: priced without them, an upper bound.
  StatusOr<MegatronRead> overlap = ParseMegatronArgs(shape + "--overlap-moe-expert-parallel-comm --delay-wgrad-compute", "args");
  ASSERT_TRUE(overlap.ok()) << overlap.status().message();
  EXPECT_TRUE(Contains(Join(overlap->warnings, "\n"), "--overlap-moe-expert-parallel-comm is not modelled: priced without it"))
      << Join(overlap->warnings, "\n");
  EXPECT_TRUE(Contains(Join(overlap->warnings, "\n"), "--delay-wgrad-compute is not modelled")) << Join(overlap->warnings, "\n");
  for (const std::string& args : {std::string("--recompute-granularity selective --recompute-modules core_attn"),
                                  std::string("--recompute-granularity full --recompute-method uniform "
                                              "--recompute-num-layers 1 --recompute-modules mlp"),
                                  std::string("--context-parallel-size 2 --cp-comm-type p2p"),
                                  std::string("--fp8-format hybrid --fp8-recipe tensorwise"),
                                  std::string("--bf16 --first-last-layers-bf16"),  // no fp8: nothing to keep in bf16
                                  std::string("--pipeline-model-parallel-size 2 "
                                              "--microbatch-group-size-per-virtual-pipeline-stage 4"),  // not interleaved
                                  std::string("--fp8-format hybrid --fp8-recipe delayed"),
                                  std::string("--cp-comm-type a2a"),  // no context parallelism: no effect
                                  std::string("--num-distributed-optimizer-instances 1"),
                                  std::string("--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 "
                                              "--microbatch-group-size-per-virtual-pipeline-stage 2")}) {
    StatusOr<MegatronRead> r = ParseMegatronArgs(shape + args, "args");
    EXPECT_TRUE(r.ok()) << args << ": " << r.status().message();
  }
  // NeMo's overrides, the same settings under their recipe paths.
  const std::string nemo =
      "recipe.model.config.num_layers = 2\nrecipe.model.config.hidden_size = 1024\n"
      "recipe.model.config.num_attention_heads = 8\nrecipe.model.config.seq_length = 2048\n";
  for (const auto& [lines, expected] : std::vector<std::pair<std::string, std::string>>{
           {"recipe.model.config.recompute_granularity = \"selective\"\n"
            "recipe.model.config.recompute_modules = [\"mlp\"]\n",
            "recomputing other modules than the attention core"},
           {"recipe.trainer.strategy.fsdp = \"megatron\"\n", "Megatron-Core's FSDP"},
           {"recipe.trainer.strategy.context_parallel_size = 2\nrecipe.model.config.cp_comm_type = \"a2a\"\n",
            "context parallelism by a2a"},
           {"recipe.optim.config.use_distributed_optimizer = True\n"
            "recipe.trainer.strategy.num_distributed_optimizer_instances = 2\n", "part of the data-parallel ranks"},
           {"recipe.trainer.plugins.fp4 = \"nvfp4\"\n", "fp4 training"}}) {
    StatusOr<MegatronRead> r = ParseNemoOverrides(nemo + lines, "o.py");
    ASSERT_FALSE(r.ok()) << lines;
    EXPECT_TRUE(Contains(r.status().message(), "o.py:")) << r.status().message();
    EXPECT_TRUE(Contains(r.status().message(), expected)) << r.status().message();
  }
  StatusOr<MegatronRead> core = ParseNemoOverrides(
      nemo + "recipe.model.config.recompute_granularity = \"selective\"\n"
             "recipe.model.config.recompute_modules = [\"core_attn\"]\n",
      "o.py");
  EXPECT_TRUE(core.ok()) << core.status().message();
  // Selective granularity over no module (Megatron-LM's --recompute-modules given without a
  // value, NeMo's []) recomputes nothing: recompute=none, said in a warning; the attention core
  // alone stays selective.
  StatusOr<MegatronRead> none = ParseMegatronArgs(shape + "--recompute-granularity selective --recompute-modules", "args");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->layout.recompute, Recompute::kNone);
  EXPECT_TRUE(Contains(Join(none->warnings, "\n"), "--recompute-modules with no module")) << Join(none->warnings, "\n");
  StatusOr<MegatronRead> nemo_none = ParseNemoOverrides(
      nemo + "recipe.model.config.recompute_granularity = \"selective\"\n"
             "recipe.model.config.recompute_modules = []\n",
      "o.py");
  ASSERT_TRUE(nemo_none.ok()) << nemo_none.status().message();
  EXPECT_EQ(nemo_none->layout.recompute, Recompute::kNone);
  StatusOr<MegatronRead> attn = ParseMegatronArgs(shape + "--recompute-granularity selective --recompute-modules core_attn", "args");
  ASSERT_TRUE(attn.ok()) << attn.status().message();
  EXPECT_EQ(attn->layout.recompute, Recompute::kSelective);
}

// The token dispatcher: shardsim prices alltoall. With expert parallelism, Megatron-LM's
// default (allgather) or an explicit allgather is refused, naming the flag to pass; flex reads
// as alltoall with a warning; without EP (or without experts) the dispatcher does not matter.
// NeMo's model.config.moe_token_dispatcher_type the same (Megatron-Core's default allgather).
TEST(MegatronArgs, TokenDispatcherIsAlltoall) {
  const std::string moe = "--num-layers 8 --hidden-size 512 --num-attention-heads 8 --seq-length 128 "
                          "--num-experts 8 --moe-router-topk 2 ";
  StatusOr<MegatronRead> unset = ParseMegatronArgs(moe + "--expert-model-parallel-size 4", "args");
  ASSERT_FALSE(unset.ok());
  EXPECT_TRUE(Contains(unset.status().message(), "allgather (Megatron-LM's default) with --expert-model-parallel-size 4"))
      << unset.status().message();
  EXPECT_TRUE(Contains(unset.status().message(), "pass --moe-token-dispatcher-type alltoall")) << unset.status().message();
  StatusOr<MegatronRead> given = ParseMegatronArgs(moe + "--expert-model-parallel-size 4 --moe-token-dispatcher-type allgather", "args");
  ASSERT_FALSE(given.ok());
  EXPECT_TRUE(Contains(given.status().message(), "args:1:")) << given.status().message();
  StatusOr<MegatronRead> a2a = ParseMegatronArgs(moe + "--expert-model-parallel-size 4 --moe-token-dispatcher-type alltoall", "args");
  ASSERT_TRUE(a2a.ok()) << a2a.status().message();
  EXPECT_EQ(a2a->layout.ep, 4);
  // 8 experts over ep 4: two a rank, run one after another without --moe-grouped-gemm.
  EXPECT_TRUE(Contains(Join(a2a->warnings, "\n"), "runs each rank's 2 experts one after another (SequentialMLP)"))
      << Join(a2a->warnings, "\n");
  StatusOr<MegatronRead> grouped = ParseMegatronArgs(
      moe + "--expert-model-parallel-size 4 --moe-token-dispatcher-type alltoall --moe-grouped-gemm", "args");
  ASSERT_TRUE(grouped.ok()) << grouped.status().message();
  EXPECT_FALSE(Contains(Join(grouped->warnings, "\n"), "SequentialMLP")) << Join(grouped->warnings, "\n");
  StatusOr<MegatronRead> flex = ParseMegatronArgs(moe + "--expert-model-parallel-size 4 --moe-token-dispatcher-type flex", "args");
  ASSERT_TRUE(flex.ok()) << flex.status().message();
  EXPECT_TRUE(Contains(Join(flex->warnings, "\n"), "flex priced as alltoall")) << Join(flex->warnings, "\n");
  StatusOr<MegatronRead> typo = ParseMegatronArgs(moe + "--moe-token-dispatcher-type all2all", "args");
  ASSERT_FALSE(typo.ok());
  EXPECT_TRUE(Contains(typo.status().message(), "expected one of allgather, alltoall, flex")) << typo.status().message();
  StatusOr<MegatronRead> no_ep = ParseMegatronArgs(moe, "args");
  ASSERT_TRUE(no_ep.ok()) << no_ep.status().message();
  const std::string nemo =
      "recipe.model.config.num_layers = 2\nrecipe.model.config.hidden_size = 1024\n"
      "recipe.model.config.num_attention_heads = 8\nrecipe.model.config.seq_length = 2048\n"
      "recipe.model.config.num_moe_experts = 8\nrecipe.model.config.moe_router_topk = 2\n"
      "recipe.trainer.strategy.expert_model_parallel_size = 4\n";
  StatusOr<MegatronRead> n_unset = ParseNemoOverrides(nemo, "o.py");
  ASSERT_FALSE(n_unset.ok());
  EXPECT_TRUE(Contains(n_unset.status().message(), "allgather (Megatron-Core's default) with expert_model_parallel_size 4"))
      << n_unset.status().message();
  StatusOr<MegatronRead> n_a2a = ParseNemoOverrides(nemo + "recipe.model.config.moe_token_dispatcher_type = \"alltoall\"\n", "o.py");
  ASSERT_TRUE(n_a2a.ok()) << n_a2a.status().message();
  EXPECT_EQ(n_a2a->layout.ep, 4);
}

TEST(MegatronArgs, ModelMismatchesNameEachField) {
  StatusOr<ModelSpec> m = LoadModel("llama3-70b");
  ASSERT_TRUE(m.ok());
  StatusOr<MegatronRead> r = ParseMegatronArgs(
      "--num-layers 81 --hidden-size 8192 --num-attention-heads 64 --group-query-attention "
      "--num-query-groups 8 --ffn-hidden-size 28672 --seq-length 8192 --swiglu --normalization RMSNorm "
      "--position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear "
      "--attention-dropout 0 --hidden-dropout 0",
      "args");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::vector<std::string> d = ModelMismatches(*m, r->model);
  // 81 layers against 80, and the default --rotary-base 10000 against Llama 3's 500000.
  ASSERT_EQ(d.size(), 2u) << Join(d, "; ");
  EXPECT_EQ(d[0], "--num-layers 81, the model has 80");
  EXPECT_EQ(d[1], "--rotary-base 10000, the model has 500000");
}

// --- NeMo ---------------------------------------------------------------------------------

// Megatron's AttnBackend: fused is Transformer Engine's FusedAttention (cuDNN), flash
// FlashAttention, unfused and local the unfused path; auto (the default, and what
// --use-flash-attn leaves under Transformer Engine) is TE's own choice, which the caller
// resolves by GPU (MegatronRead::attention_auto). NeMo's model.config.attention_backend alike.
TEST(MegatronArgs, AttentionBackends) {
  const std::string shape = "--num-layers 2 --hidden-size 1024 --num-attention-heads 8 --seq-length 2048";
  struct Case {
    std::string args;
    AttentionImpl attention;
    bool auto_backend;
  };
  for (const Case& c : {Case{"", AttentionImpl::kFlash, true}, Case{" --use-flash-attn", AttentionImpl::kFlash, true},
                        Case{" --attention-backend flash", AttentionImpl::kFlash, false},
                        Case{" --attention-backend fused", AttentionImpl::kCudnn, false},
                        Case{" --attention-backend unfused", AttentionImpl::kUnfused, false}}) {
    StatusOr<MegatronRead> r = ParseMegatronArgs(shape + c.args, "args");
    ASSERT_TRUE(r.ok()) << c.args << r.status().message();
    EXPECT_EQ(r->layout.attention, c.attention) << c.args;
    EXPECT_EQ(r->attention_auto, c.auto_backend) << c.args;
  }
  const std::string nemo =
      "recipe.model.config.num_layers = 2\nrecipe.model.config.hidden_size = 1024\n"
      "recipe.model.config.num_attention_heads = 8\nrecipe.model.config.seq_length = 2048\n";
  StatusOr<MegatronRead> fused =
      ParseNemoOverrides(nemo + "recipe.model.config.attention_backend = AttnBackend.fused\n", "o.py");
  ASSERT_TRUE(fused.ok()) << fused.status().message();
  EXPECT_EQ(fused->layout.attention, AttentionImpl::kCudnn);
  EXPECT_FALSE(fused->attention_auto);
  StatusOr<MegatronRead> unset = ParseNemoOverrides(nemo, "o.py");
  ASSERT_TRUE(unset.ok()) << unset.status().message();
  EXPECT_EQ(unset->layout.attention, AttentionImpl::kFlash);
  EXPECT_TRUE(unset->attention_auto);
}

TEST(NemoOverrides, ReadsRecipeLines) {
  const char* text = R"(# my overrides
import nemo_run as run
recipe.model.config.num_layers = 32
recipe.model.config.hidden_size = 4096
recipe.model.config.num_attention_heads = 32
recipe.model.config.num_query_groups = 8
recipe.model.config.ffn_hidden_size = 14336
recipe.model.config.seq_length = 8192
recipe.model.config.gated_linear_unit = True
recipe.model.config.normalization = "RMSNorm"
recipe.model.config.position_embedding_type = 'rope'
recipe.model.config.rotary_base = 500000
recipe.model.config.share_embeddings_and_output_weights = False
recipe.model.config.add_bias_linear = False
recipe.model.config.attention_dropout = 0.0
recipe.model.config.hidden_dropout = 0.0
recipe.model.config.recompute_granularity = "full"
recipe.trainer.strategy.tensor_model_parallel_size = 2
recipe.trainer.strategy.pipeline_model_parallel_size = 4
recipe.trainer.strategy.virtual_pipeline_model_parallel_size = 2
recipe.trainer.strategy.sequence_parallel = True
recipe.data.micro_batch_size = 2
recipe.data.global_batch_size = 256
recipe.optim.config.use_distributed_optimizer = True
recipe.trainer.plugins = bf16_with_fp8_mixed()
recipe.trainer.max_steps = 100
recipe.trainer.strategy.tensor_model_paralel_size = 4
recipe.trainer.callbacks.append(run.Config(MegatronCommOverlapCallback, tp_comm_overlap=True))
)";
  StatusOr<MegatronRead> r = ParseNemoOverrides(text, "over.py");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Layout& l = r->layout;
  EXPECT_EQ(l.tp, 2);
  EXPECT_EQ(l.pp, 4);
  EXPECT_EQ(l.vpp, 2);
  EXPECT_EQ(l.schedule, Schedule::kInterleaved);
  EXPECT_TRUE(l.overlap_pp);  // MegatronCommOverlapCallback's default with virtual stages
  EXPECT_TRUE(l.sp);
  EXPECT_EQ(l.mbs, 2);
  EXPECT_EQ(l.gbs, 256);
  EXPECT_EQ(l.zero, 1);
  EXPECT_FALSE(l.overlap_dp);  // DistributedDataParallelConfig's default
  EXPECT_EQ(l.recompute, Recompute::kFull);
  EXPECT_EQ(l.dtype, DType::kFp8);
  EXPECT_TRUE(l.fp8_params);  // bf16_with_fp8_mixed() sets fp8_param_gather = True
  EXPECT_EQ(l.overlap_tp, TpOverlap::kOn);
  StatusOr<ModelSpec> llama = LoadModel("llama3-8b");
  ASSERT_TRUE(llama.ok());
  EXPECT_TRUE(ModelMismatches(*llama, r->model).empty()) << Join(ModelMismatches(*llama, r->model), "; ");
  ASSERT_EQ(r->ignored.size(), 2u);
  EXPECT_EQ(r->ignored[0], "trainer.max_steps");
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_TRUE(Contains(r->warnings[0], "over.py:27:1: recipe.trainer.strategy.tensor_model_paralel_size is not a "
                                       "setting shardsim reads (did you mean recipe.trainer.strategy.tensor_model_parallel_size?)"))
      << r->warnings[0];
}

TEST(NemoOverrides, ErrorsAreLocated) {
  const std::string shape = "recipe.model.config.num_layers = 8\nrecipe.model.config.hidden_size = 512\n"
                            "recipe.model.config.num_attention_heads = 8\nrecipe.model.config.seq_length = 128\n";
  struct Case {
    std::string text, expected;
  } cases[] = {
      {shape + "recipe.trainer.strategy.tensor_model_parallel_size = \"two\"", "over.py:5:1: trainer.strategy.tensor_model_parallel_size: expected an integer"},
      {shape + "recipe.trainer.strategy.tensor_model_parallel_size = 2\nrecipe.trainer.strategy.sequence_parallel = yes", "sequence_parallel: expected True or False, found 'yes'"},
      {shape + "recipe.data.micro_batch_size = 1\nrecipe.data.micro_batch_size = 2", "over.py:6:1: data.micro_batch_size set twice"},
      {shape + "trainer.strategy.tensor_model_parallel_size = 2", "expected `recipe.<path> = <value>`"},
      {shape + "recipe.trainer.plugins = bf16_mixd()", "expected one of bf16_mixed(), fp16_mixed(), bf16_with_fp8_mixed(), found 'bf16_mixd()'"},
      {"recipe.model.config.hidden_size = 512", "recipe.model.config.num_layers: missing"},
  };
  for (const Case& c : cases) {
    StatusOr<MegatronRead> r = ParseNemoOverrides(c.text, "over.py");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_TRUE(Contains(r.status().message(), c.expected)) << r.status().message();
  }
}

// --- DeepSpeed ---------------------------------------------------------------------------

Layout Base() {
  Layout l;
  l.tp = 2;
  l.pp = 2;
  return l;
}

TEST(DeepSpeedConfig, ReadsTheKeysItHolds) {
  const char* config = R"({
  "train_batch_size": 512,
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 4,
  "zero_optimization": {
    "stage": 3,
    "offload_optimizer": {"device": "cpu", "pin_memory": true},
    "stage3_prefetch_bucket_size": 0,
    "stage3_max_live_parameters": 300000000,
    "sub_group_size": 1000000000
  },
  "bf16": {"enabled": true},
  "optimizer": {"type": "AdamW", "params": {"lr": 0.0003}},
  "steps_per_print": 10
})";
  StatusOr<DeepSpeedRead> r = ParseDeepSpeedConfig(config, "ds.json", Base());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Layout& l = r->layout;
  EXPECT_EQ(l.tp, 2);  // from the base: not a config key
  EXPECT_EQ(l.gbs, 512);
  EXPECT_EQ(l.mbs, 2);
  EXPECT_EQ(l.dp, 64);  // 512 / (2 x 4)
  EXPECT_EQ(l.zero, 3);
  EXPECT_TRUE(l.overlap_dp);  // overlap_comm absent: on for stage 3
  EXPECT_EQ(l.offload, Offload::kOptimizer);
  EXPECT_FALSE(l.prefetch);   // a prefetch bucket of 0 elements
  EXPECT_EQ(l.live_params, 300000000);
  EXPECT_EQ(l.dtype, DType::kBf16);
  ASSERT_EQ(r->ignored.size(), 3u);
  EXPECT_EQ(r->ignored[0], "zero_optimization.sub_group_size");
  EXPECT_EQ(r->ignored[1], "optimizer");
}

TEST(DeepSpeedConfig, StageTwoDefaultsAndErrors) {
  StatusOr<DeepSpeedRead> r = ParseDeepSpeedConfig(
      R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})",
      "ds.json", Base());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->layout.overlap_dp);  // overlap_comm absent: off below stage 3
  EXPECT_EQ(r->layout.dp, 0);          // no accumulation steps: dp from the GPU count
  EXPECT_EQ(r->layout.dtype, DType::kFp32);
  struct Case {
    std::string text, expected;
  } cases[] = {
      {R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1,
  "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_sise": 0}})",
       "ds.json:2:37"},
      {R"({"train_batch_size": 64, "zero_optimization": {"stage": 1}})", "give train_batch_size and train_micro_batch_size_per_gpu"},
      {R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 2})",
       "3 x 2 does not divide it"},
      {R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 4}})",
       "expected a ZeRO stage 0..3, found 4"},
      // ZeRO++ and MiCS on: refused, not priced as plain ZeRO-3.
      {R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8}})",
       "hierarchical partitioning (hpZ) is not modelled"},
      {R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "zero_quantized_weights": true}})",
       "quantized communication (zero_quantized_weights) is not modelled"},
      {R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "zero_quantized_gradients": true}})",
       "quantized communication (zero_quantized_gradients) is not modelled"},
      {R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "mics_shard_size": 8}})",
       "MiCS"},
  };
  for (const Case& c : cases) {
    StatusOr<DeepSpeedRead> bad = ParseDeepSpeedConfig(c.text, "ds.json", Base());
    ASSERT_FALSE(bad.ok()) << c.text;
    EXPECT_TRUE(Contains(bad.status().message(), c.expected)) << bad.status().message();
  }
  StatusOr<DeepSpeedRead> typo = ParseDeepSpeedConfig(
      R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_sise": 0}})",
      "ds.json", Base());
  ASSERT_FALSE(typo.ok());
  EXPECT_TRUE(Contains(typo.status().message(), "stage3_prefetch_bucket_size")) << typo.status().message();
  // Their defaults, written out, read.
  StatusOr<DeepSpeedRead> plain = ParseDeepSpeedConfig(
      R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
  "zero_hpz_partition_size": 1, "zero_quantized_weights": false, "zero_quantized_gradients": false, "mics_shard_size": -1}})",
      "ds.json", Base());
  EXPECT_TRUE(plain.ok()) << plain.status().message();
}

}  // namespace
}  // namespace shardsim
