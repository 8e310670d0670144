// Models and clusters built in code for the cost tests, so each test states every number
// its expected value depends on.
#pragma once

#include <string>

#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "src/util/check.h"

namespace shardsim::testing {

// A GPT-3-style dense model (Megatron's assumptions: MHA, 4h GELU MLP, LayerNorm, biases,
// dropout, learned positions) of the given shape.
inline ModelSpec GptModel(int64_t layers, int64_t hidden, int64_t heads, int64_t vocab,
                          int64_t seq) {
  ModelSpec m;
  m.name = "test-gpt";
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.head_dim = hidden / heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = vocab;
  m.seq_len = seq;
  m.activation = Activation::kGelu;
  m.norm = Norm::kLayerNorm;
  m.position = Position::kLearned;
  m.bias = true;
  m.dropout = true;
  m.tied_embeddings = true;
  return m;
}

// models/tiny.yaml's shape (4 layers, h 64, 4 heads of 16 with 2 KV heads, SwiGLU 256,
// RMSNorm, RoPE, untied, vocab 512) with `seq`-token sequences: the runtime's test model.
inline ModelSpec TinyModel(int64_t seq) {
  ModelSpec m;
  m.name = "tiny";
  m.layers = 4;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.ffn_hidden = 256;
  m.vocab = 512;
  m.seq_len = seq;
  m.activation = Activation::kSwiglu;
  m.norm = Norm::kRmsNorm;
  m.position = Position::kRope;
  m.bias = false;
  m.dropout = false;
  m.tied_embeddings = false;
  return m;
}

// A small Llama-style model (GQA 16:4, SwiGLU, RMSNorm, RoPE, untied) of 8 layers, hidden 1024,
// 1,024-token sequences: the planner tests' dense model.
inline ModelSpec GqaTestModel() {
  ModelSpec m = TinyModel(1024);
  m.name = "test-gqa";
  m.layers = 8;
  m.hidden = 1024;
  m.heads = 16;
  m.kv_heads = 4;
  m.head_dim = 64;
  m.ffn_hidden = 2816;
  m.vocab = 8192;
  return m;
}

// TinyModel(seq) with a mixture of experts in every layer (models/tiny-moe.yaml's: 4 experts of
// inner size 128, top 2) and its load-balancing loss at Switch Transformer's 1e-2.
inline ModelSpec TinyMoeModel(int64_t seq) {
  ModelSpec m = TinyModel(seq);
  m.name = "tiny-moe";
  m.moe = MoeSpec{.experts = 4, .top_k = 2, .ffn_hidden = 128, .aux_loss_coeff = 0.01};
  return m;
}

// The runtime tests' GPT-2 style variant of TinyModel(32): 2 layers, MHA (4 KV heads), vocab
// 256, GELU, LayerNorm, learned positions, biases, tied embeddings.
inline ModelSpec TinyGptModel() {
  ModelSpec m = TinyModel(32);
  m.name = "test-gpt";
  m.layers = 2;
  m.kv_heads = 4;
  m.vocab = 256;
  m.activation = Activation::kGelu;
  m.norm = Norm::kLayerNorm;
  m.position = Position::kLearned;
  m.bias = true;
  m.tied_embeddings = true;
  return m;
}

// A cluster of `nodes` x `gpus` GPUs from YAML text; every figure is given here.
inline HardwareSpec TestCluster(int64_t nodes, int64_t gpus, const std::string& fabric_bw,
                                const std::string& fabric_latency, const std::string& nic_bw,
                                const std::string& net_latency, int64_t nics,
                                int64_t nodes_per_switch = 2, const std::string& base = "0 us") {
  std::string yaml = R"(name: test
source: test
nodes: )" + std::to_string(nodes) + R"(
gpu:
  name: testgpu
  peak: {bf16: "100 TFLOP/s", fp32: "10 TFLOP/s"}
  memory: "80 GiB"
  memory_bandwidth: "1 TB/s"
  sm_count: 100
  efficiency: {matmul: 1.0, attention: 1.0, memory: 1.0, kernel_latency: "0 us"}
node:
  gpus: )" + std::to_string(gpus) + R"(
  fabric: {kind: nvswitch, bandwidth: ")" + fabric_bw + R"(", efficiency: 1.0, latency: ")" +
                     fabric_latency + R"("}
  host: {memory: "1 TiB", memory_bandwidth: "100 GB/s", link_bandwidth: "64 GB/s", link_latency: "1 us"}
network:
  nics: )" + std::to_string(nics) + R"(
  nic_bandwidth: ")" + nic_bw + R"("
  nic_efficiency: 1.0
  latency: ")" + net_latency + R"("
  topology: fat-tree
  nodes_per_switch: )" + std::to_string(nodes_per_switch) + R"(
  oversubscription: 1
collectives: {base_latency: ")" + base + R"("}
)";
  StatusOr<HardwareSpec> hw = ParseHardwareYaml(yaml, "test-cluster");
  CHECK(hw.ok()) << hw.status().message();
  return *hw;
}

// `spec` resolved for `gpus` GPUs of the bundled dgx-h100 (CHECK-fails on a bad spec: a test's
// own layouts are valid).
inline Layout ResolvedOnH100(const std::string& spec, int64_t gpus) {
  static const HardwareSpec h100 = *LoadHardware("dgx-h100");
  StatusOr<Layout> parsed = ParseLayout(spec);
  CHECK(parsed.ok()) << spec << ": " << parsed.status().message();
  StatusOr<Layout> l = ResolveLayoutFor(*parsed, gpus, h100);
  CHECK(l.ok()) << spec << ": " << l.status().message();
  return *l;
}

}  // namespace shardsim::testing
