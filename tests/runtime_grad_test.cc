// Gradient checks of the CPU runtime (runtime/cpu) in double precision: every operator's
// backward against central finite differences, then the whole model's loss w.r.t. a sample
// of every parameter tensor, for a Llama-style and a GPT-style configuration.
//
// Error measure, per checked tensor: max_i |fd_i - an_i| / max_i |an_i|, the largest
// finite-difference disagreement relative to the tensor's largest analytic gradient. The
// finite-difference error is absolute (below), so dividing by each element's own gradient
// would blow up on elements whose gradient is near zero.
//
// Central difference with step eps: fd = f'(x) + eps^2 f'''(x) / 6 + O(rounding), where the
// rounding part is about 2^-53 |f| / eps. Operator checks use f = sum(w * y) with w uniform in
// [-1, 1], so |f| <= ~10 and |f'''| = O(1) at the O(1) inputs used: with eps = 1e-6, the
// truncation is ~1e-13 and the rounding ~1e-9, against gradients of order 0.1 to 1, so the
// error should be ~1e-8; the bound 1e-6 leaves two orders of magnitude of headroom.
// Model checks: f is the loss, |f| ~ 6, and each tensor's largest gradient is >= ~1e-2 with
// the perturbed parameters used (below), so rounding gives ~1e-10 / 1e-2 = 1e-8; the same
// 1e-6 bound holds with headroom. A wrong formula gives errors of order 1e-2 to 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/cpu/attention.h"
#include "runtime/cpu/cross_entropy.h"
#include "runtime/cpu/embedding.h"
#include "runtime/cpu/gelu.h"
#include "runtime/cpu/layer_norm.h"
#include "runtime/cpu/linear.h"
#include "runtime/cpu/markov_stream.h"
#include "runtime/cpu/rms_norm.h"
#include "runtime/cpu/rope.h"
#include "runtime/cpu/splitmix64.h"
#include "runtime/cpu/swiglu.h"
#include "runtime/cpu/transformer.h"
#include "tests/test_models.h"

namespace shardsim::runtime {
namespace {

constexpr double kEps = 1e-6;
constexpr double kBound = 1e-6;

using Vec = std::vector<double>;

// n values ~ N(mean, std^2), reproducible from `seed`.
Vec Normal(int64_t n, uint64_t seed, double std = 1.0, double mean = 0.0) {
  SplitMix64Stream rng(seed);
  Vec v(n);
  for (double& x : v) x = mean + std * BoxMuller(rng.Next(), rng.Next());
  return v;
}

// n values uniform in [-1, 1): the weights w of f = sum(w * y).
Vec Weights(int64_t n, uint64_t seed) {
  SplitMix64Stream rng(seed);
  Vec v(n);
  for (double& x : v) x = 2 * rng.Uniform() - 1;
  return v;
}

double Dot(const Vec& a, const Vec& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

// (f(x + eps) - f(x - eps)) / (2 eps) at element `x`, which f reads.
double CentralDifference(const std::function<double()>& f, double& x) {
  const double saved = x;
  x = saved + kEps;
  const double up = f();
  x = saved - kEps;
  const double down = f();
  x = saved;
  return (up - down) / (2 * kEps);
}

// The error measure of the header over elements `indices` of `x` (all when empty).
double GradError(const std::function<double()>& f, double* x, const double* analytic, int64_t size,
                 std::vector<int64_t> indices = {}) {
  if (indices.empty()) {
    indices.resize(size);
    std::iota(indices.begin(), indices.end(), 0);
  }
  double max_an = 0, max_diff = 0;
  for (int64_t i = 0; i < size; ++i) max_an = std::max(max_an, std::abs(analytic[i]));
  for (int64_t i : indices) {
    max_diff = std::max(max_diff, std::abs(CentralDifference(f, x[i]) - analytic[i]));
  }
  EXPECT_GT(max_an, 0) << "every gradient is zero: nothing was checked";
  return max_diff / std::max(max_an, 1e-300);
}

double GradError(const std::function<double()>& f, Vec& x, const Vec& analytic) {
  return GradError(f, x.data(), analytic.data(), static_cast<int64_t>(x.size()));
}

void Report(const char* what, std::initializer_list<double> errors) {
  std::printf("[grad] %-14s max error %.2e\n", what, std::max(errors));
}

TEST(RuntimeGrad, Linear) {
  const int64_t n = 5, c = 4, oc = 3;
  Vec x = Normal(n * c, 1), w = Normal(oc * c, 2), b = Normal(oc, 3), wy = Weights(n * oc, 4);
  auto f = [&] {
    Vec y(n * oc);
    LinearForward(x.data(), w.data(), b.data(), y.data(), n, c, oc);
    return Dot(wy, y);
  };
  Vec dx(n * c), dw(oc * c), db(oc);
  LinearBackward(wy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), n, c, oc);
  const double ex = GradError(f, x, dx), ew = GradError(f, w, dw), eb = GradError(f, b, db);
  EXPECT_LT(ex, kBound);
  EXPECT_LT(ew, kBound);
  EXPECT_LT(eb, kBound);
  Report("linear", {ex, ew, eb});
}

TEST(RuntimeGrad, EmbeddingWithPositions) {
  const int64_t b = 2, t = 3, c = 4, v = 5;
  const std::vector<int32_t> tokens = {1, 4, 1, 0, 4, 4};  // repeats: the scatter must add
  Vec wte = Normal(v * c, 5), wpe = Normal(t * c, 6), wy = Weights(b * t * c, 7);
  auto f = [&] {
    Vec x(b * t * c);
    EmbeddingForward(tokens.data(), wte.data(), wpe.data(), x.data(), b, t, c, v);
    return Dot(wy, x);
  };
  Vec dwte(v * c), dwpe(t * c);
  EmbeddingBackward(wy.data(), tokens.data(), dwte.data(), dwpe.data(), b, t, c, v);
  const double e1 = GradError(f, wte, dwte), e2 = GradError(f, wpe, dwpe);
  EXPECT_LT(e1, kBound);
  EXPECT_LT(e2, kBound);
  Report("embedding", {e1, e2});
}

TEST(RuntimeGrad, Rope) {
  const int64_t b = 2, t = 5, heads = 3, d = 6;
  const RopeTable<double> table = MakeRopeTable<double>(t, d);
  Vec x = Normal(b * t * heads * d, 8), wy = Weights(b * t * heads * d, 9);
  auto f = [&] {
    Vec y = x;
    RopeForward(y.data(), table, b, t, heads);
    return Dot(wy, y);
  };
  Vec dx = wy;
  RopeBackward(dx.data(), table, b, t, heads);
  const double e = GradError(f, x, dx);
  EXPECT_LT(e, kBound);
  Report("rope", {e});
}

TEST(RuntimeGrad, LayerNorm) {
  const int64_t n = 4, c = 6;
  // Gains and biases away from 1 and 0, so a missing factor would show.
  Vec x = Normal(n * c, 10, 1.5, 0.7), g = Normal(c, 11, 0.3, 1.0), bias = Normal(c, 12);
  Vec wy = Weights(n * c, 13);
  auto f = [&] {
    Vec y(n * c), mean(n), rstd(n);
    LayerNormForward(x.data(), g.data(), bias.data(), y.data(), mean.data(), rstd.data(), n, c);
    return Dot(wy, y);
  };
  Vec y(n * c), mean(n), rstd(n), dx(n * c), dg(c), db(c);
  LayerNormForward(x.data(), g.data(), bias.data(), y.data(), mean.data(), rstd.data(), n, c);
  LayerNormBackward(wy.data(), x.data(), g.data(), mean.data(), rstd.data(), dx.data(), dg.data(),
                    db.data(), n, c);
  const double ex = GradError(f, x, dx), eg = GradError(f, g, dg), eb = GradError(f, bias, db);
  EXPECT_LT(ex, kBound);
  EXPECT_LT(eg, kBound);
  EXPECT_LT(eb, kBound);
  Report("layernorm", {ex, eg, eb});
}

TEST(RuntimeGrad, RmsNorm) {
  const int64_t n = 4, c = 6;
  Vec x = Normal(n * c, 14, 1.5, 0.7), g = Normal(c, 15, 0.3, 1.0), wy = Weights(n * c, 16);
  auto f = [&] {
    Vec y(n * c), rstd(n);
    RmsNormForward(x.data(), g.data(), y.data(), rstd.data(), n, c);
    return Dot(wy, y);
  };
  Vec y(n * c), rstd(n), dx(n * c), dg(c);
  RmsNormForward(x.data(), g.data(), y.data(), rstd.data(), n, c);
  RmsNormBackward(wy.data(), x.data(), g.data(), rstd.data(), dx.data(), dg.data(), n, c);
  const double ex = GradError(f, x, dx), eg = GradError(f, g, dg);
  EXPECT_LT(ex, kBound);
  EXPECT_LT(eg, kBound);
  Report("rmsnorm", {ex, eg});
}

TEST(RuntimeGrad, CausalAttentionWithGqa) {
  // 4 query heads over 2 KV heads: dk, dv must sum over the 2 query heads of each group.
  const AttentionShape s{2, 5, 4, 2, 3};
  const int64_t n = s.batch * s.seq, qd = s.heads * s.head_dim, kvd = s.kv_heads * s.head_dim;
  Vec q = Normal(n * qd, 17), k = Normal(n * kvd, 18), v = Normal(n * kvd, 19);
  Vec wy = Weights(n * qd, 20), probs(s.batch * s.heads * s.seq * s.seq);
  auto f = [&] {
    Vec out(n * qd);
    AttentionForward(q.data(), k.data(), v.data(), probs.data(), out.data(), s);
    return Dot(wy, out);
  };
  f();  // fills probs
  Vec dq(n * qd), dk(n * kvd), dv(n * kvd);
  AttentionBackward(wy.data(), q.data(), k.data(), v.data(), probs.data(), dq.data(), dk.data(),
                    dv.data(), s);
  const double eq = GradError(f, q, dq), ek = GradError(f, k, dk), ev = GradError(f, v, dv);
  EXPECT_LT(eq, kBound);
  EXPECT_LT(ek, kBound);
  EXPECT_LT(ev, kBound);
  Report("attention", {eq, ek, ev});
}

TEST(RuntimeGrad, Gelu) {
  const int64_t n = 20;
  Vec x = Normal(n, 21, 2.0), wy = Weights(n, 22);
  auto f = [&] {
    Vec y(n);
    GeluForward(x.data(), y.data(), n);
    return Dot(wy, y);
  };
  Vec dx(n);
  GeluBackward(wy.data(), x.data(), dx.data(), n);
  const double e = GradError(f, x, dx);
  EXPECT_LT(e, kBound);
  Report("gelu", {e});
}

TEST(RuntimeGrad, Swiglu) {
  const int64_t n = 20;
  Vec gate = Normal(n, 23, 2.0), up = Normal(n, 24), wy = Weights(n, 25);
  auto f = [&] {
    Vec y(n);
    SwigluForward(gate.data(), up.data(), y.data(), n);
    return Dot(wy, y);
  };
  Vec dgate(n), dup(n);
  SwigluBackward(wy.data(), gate.data(), up.data(), dgate.data(), dup.data(), n);
  const double eg = GradError(f, gate, dgate), eu = GradError(f, up, dup);
  EXPECT_LT(eg, kBound);
  EXPECT_LT(eu, kBound);
  Report("swiglu", {eg, eu});
}

TEST(RuntimeGrad, SoftmaxCrossEntropy) {
  const int64_t n = 4, v = 7;
  const double scale = 0.7;  // a micro-batch's share: the gradient must carry it
  const std::vector<int32_t> targets = {3, 0, 6, 3};
  Vec logits = Normal(n * v, 26, 2.0), probs(n * v);
  auto f = [&] {
    return scale * CrossEntropyForward(logits.data(), targets.data(), probs.data(), n, v);
  };
  f();
  Vec dlogits(n * v);
  CrossEntropyBackward(probs.data(), targets.data(), scale, dlogits.data(), n, v);
  const double e = GradError(f, logits, dlogits);
  EXPECT_LT(e, kBound);
  Report("cross-entropy", {e});
}

// Moves every parameter off its initial value so that no factor of 1 or 0 hides a bug
// (gains 1 and biases 0 at init) and activations are O(1), where the nonlinearities bend:
// matrices std 0.2 (10x init), gains 1 + 0.2 z, biases 0.2 z.
void Perturb(Transformer<double>& model) {
  SplitMix64Stream rng(99);
  for (const ParamTensor& t : model.layout().tensors()) {
    for (int64_t i = 0; i < t.size(); ++i) {
      double& p = model.params()[t.offset + i];
      const double z = BoxMuller(rng.Next(), rng.Next());
      p = t.init == ParamInit::kNormal ? 10 * p : p + 0.2 * z;
    }
  }
}

// Checks d loss / d p for 6 elements of every tensor: the 3 with the largest analytic gradient
// and 3 spread evenly (which may have zero gradient, e.g. embedding rows of absent tokens:
// the finite difference must then be zero as well).
// The K projection's bias without RoPE is the exception: its gradient is zero in exact
// arithmetic (q . (k + b) adds q . b to a whole row of scores, which softmax ignores; under
// RoPE the bias is rotated per position and this no longer holds), so there is no scale to be
// relative to; both gradients must be zero up to rounding: the analytic one below 1e-12 and
// the finite difference below 2^-53 |L| / eps ~ 1e-9 (bound 1e-8). The bias term of the linear
// operator itself is checked in RuntimeGrad.Linear.
void CheckModelGradient(const ModelSpec& spec, double moe_capacity = 0) {
  StatusOr<Transformer<double>> created = Transformer<double>::Create(spec);
  ASSERT_TRUE(created.ok()) << created.status().message();
  Transformer<double> model = std::move(created).value();
  model.SetMoeCapacity(moe_capacity);
  model.Init(7);
  Perturb(model);
  const MarkovStream data({.vocab = spec.vocab, .seed = 3});
  const TokenBatch batch = data.Batch(0, 2, 8);
  model.Forward(batch);
  model.Backward(1.0);
  const Vec analytic(model.grads().begin(), model.grads().end());
  // The objective Backward differentiates: the cross-entropy and any MoE load-balancing loss.
  auto f = [&] { return model.Forward(batch) + model.AuxLoss(); };
  double worst = 0;
  std::string worst_name;
  for (const ParamTensor& t : model.layout().tensors()) {
    const double* an = analytic.data() + t.offset;
    double* p = model.params().data() + t.offset;
    if (spec.position == Position::kLearned && t.name.ends_with("attn.k.bias")) {
      for (int64_t i = 0; i < t.size(); ++i) {
        EXPECT_LT(std::abs(an[i]), 1e-12) << t.name << "[" << i << "]";
      }
      for (int64_t i = 0; i < t.size(); i += t.size() / 4) {
        EXPECT_LT(std::abs(CentralDifference(f, p[i])), 1e-8) << t.name << "[" << i << "]";
      }
      continue;
    }
    std::vector<int64_t> order(t.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 3, order.end(),
                      [&](int64_t a, int64_t b) { return std::abs(an[a]) > std::abs(an[b]); });
    std::vector<int64_t> sample(order.begin(), order.begin() + 3);
    for (int64_t j = 0; j < 3; ++j) sample.push_back((2 * j + 1) * t.size() / 6);
    const double e = GradError(f, p, an, t.size(), sample);
    EXPECT_LT(e, kBound) << t.name;
    if (e > worst) {
      worst = e;
      worst_name = t.name;
    }
  }
  std::printf("[grad] model %-8s %zu tensors, max error %.2e (%s)\n", spec.name.c_str(),
              model.layout().tensors().size(), worst, worst_name.c_str());
}

TEST(RuntimeGrad, TinyModelSwigluRmsNormRopeGqaUntied) {
  StatusOr<ModelSpec> spec = LoadModel(std::string(SHARDSIM_SOURCE_DIR) + "/models/tiny.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_LT(spec->kv_heads, spec->heads);  // the check is meant to cover GQA
  CheckModelGradient(*spec);
}

// MoE (moe_mlp.h): the router through the top-k softmax and the load-balancing loss (its weight
// raised to 1 so its gradient is not lost under the cross-entropy's), the experts through their
// kept tokens; then with capacity factor 1 (16 tokens x 2 / 4 experts: 8 slots each, so some
// are dropped). Routing is piecewise constant in the parameters; a step of eps moves no top-k
// choice or drop unless two logits are within ~eps, which these random values are not.
TEST(RuntimeGrad, TinyMoeRouterExpertsAndAuxLoss) {
  StatusOr<ModelSpec> loaded = LoadModel(std::string(SHARDSIM_SOURCE_DIR) + "/models/tiny-moe.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  ModelSpec spec = *loaded;
  spec.moe->aux_loss_coeff = 1.0;
  CheckModelGradient(spec);
  CheckModelGradient(spec, /*moe_capacity=*/1.0);
}

TEST(RuntimeGrad, GptStyleModelGeluLayerNormLearnedBiasTied) {
  ModelSpec spec = testing::GptModel(/*layers=*/2, /*hidden=*/32, /*heads=*/4, /*vocab=*/96,
                                     /*seq=*/16);
  spec.name = "gpt-tiny";
  spec.dropout = false;
  CheckModelGradient(spec);
}

}  // namespace
}  // namespace shardsim::runtime
