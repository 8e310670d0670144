// See moe_routing.h. Everything is in double, from the logits as given (fp32 on the executor,
// fp32 or fp64 in the reference), so the same logits route the same way everywhere.
#include "runtime/cpu/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "src/util/check.h"

namespace shardsim::runtime {

template <typename S>
MoeRouting Route(const S* logits, int64_t tokens, int64_t experts, int64_t top_k, double capacity_factor,
                 double aux_coeff) {
  CHECK(tokens >= 0 && experts > 0 && top_k > 0 && top_k <= experts) << tokens << " " << experts << " " << top_k;
  MoeRouting r;
  r.tokens = tokens;
  r.experts = experts;
  r.top_k = top_k;
  r.aux_coeff = aux_coeff;
  r.aux_tokens = tokens;
  r.expert.resize(tokens * top_k);
  r.weight.resize(tokens * top_k);
  r.kept.assign(tokens * top_k, 1);
  r.scores.resize(tokens * experts);
  r.selected.assign(experts, 0);
  std::vector<int32_t> rank(experts);
  for (int64_t t = 0; t < tokens; ++t) {
    const S* l = logits + t * experts;
    // The k largest logits; equal logits go to the lower expert index.
    std::iota(rank.begin(), rank.end(), 0);
    std::partial_sort(rank.begin(), rank.begin() + top_k, rank.end(), [&](int32_t a, int32_t b) {
      return l[a] > l[b] || (l[a] == l[b] && a < b);
    });
    // Softmax over the k chosen logits (the first is the largest).
    const double top = static_cast<double>(l[rank[0]]);
    double sum = 0;
    for (int64_t j = 0; j < top_k; ++j) sum += std::exp(static_cast<double>(l[rank[j]]) - top);
    for (int64_t j = 0; j < top_k; ++j) {
      r.expert[t * top_k + j] = rank[j];
      r.weight[t * top_k + j] = std::exp(static_cast<double>(l[rank[j]]) - top) / sum;
      ++r.selected[rank[j]];
    }
    // Softmax over all experts, for the aux loss.
    double all = 0;
    for (int64_t e = 0; e < experts; ++e) all += std::exp(static_cast<double>(l[e]) - top);
    for (int64_t e = 0; e < experts; ++e) r.scores[t * experts + e] = std::exp(static_cast<double>(l[e]) - top) / all;
  }
  // Each expert's slots in token order.
  std::vector<std::vector<int64_t>> slots(experts);
  for (int64_t s = 0; s < tokens * top_k; ++s) slots[r.expert[s]].push_back(s);
  if (capacity_factor > 0) {
    const int64_t capacity = static_cast<int64_t>(
        std::ceil(static_cast<double>(tokens * top_k) / static_cast<double>(experts) * capacity_factor));
    for (std::vector<int64_t>& mine : slots) {
      if (static_cast<int64_t>(mine.size()) <= capacity) continue;
      // "probs": keep the capacity slots of largest weight (ties: the earlier token).
      std::vector<int64_t> by_weight = mine;
      std::stable_sort(by_weight.begin(), by_weight.end(),
                       [&](int64_t a, int64_t b) { return r.weight[a] > r.weight[b]; });
      for (size_t i = static_cast<size_t>(capacity); i < by_weight.size(); ++i) r.kept[by_weight[i]] = 0;
      std::erase_if(mine, [&](int64_t s) { return r.kept[s] == 0; });
    }
  }
  r.per_expert.resize(experts);
  for (int64_t e = 0; e < experts; ++e) {
    r.per_expert[e] = static_cast<int64_t>(slots[e].size());
    r.order.insert(r.order.end(), slots[e].begin(), slots[e].end());
  }
  SetAuxStatistics(r, r.selected, tokens);
  return r;
}

void SetAuxStatistics(MoeRouting& r, const std::vector<int64_t>& selected, int64_t tokens) {
  r.selected = selected;
  r.aux_tokens = tokens;
  r.aux_loss = 0;
  if (r.aux_coeff <= 0 || tokens <= 0) return;
  double sum = 0;
  for (int64_t e = 0; e < r.experts; ++e) {
    double p = 0;
    for (int64_t t = 0; t < r.tokens; ++t) p += r.scores[t * r.experts + e];
    sum += p * static_cast<double>(r.selected[e]);
  }
  const double t = static_cast<double>(tokens);
  r.aux_loss = r.aux_coeff * static_cast<double>(r.experts) / (static_cast<double>(r.top_k) * t * t) * sum;
}

template <typename S>
void RouteBackward(const MoeRouting& r, const double* dweight, double aux_scale, S* dlogits) {
  const int64_t t_n = r.tokens, e_n = r.experts, k = r.top_k;
  // d aux / d s_te = coeff E n_e / (k T^2), the same for every token.
  std::vector<double> daux(e_n, 0.0);
  if (r.aux_coeff > 0 && r.aux_tokens > 0) {
    const double at = static_cast<double>(r.aux_tokens);
    const double c = aux_scale * r.aux_coeff * static_cast<double>(e_n) / (static_cast<double>(k) * at * at);
    for (int64_t e = 0; e < e_n; ++e) daux[e] = c * static_cast<double>(r.selected[e]);
  }
  std::vector<double> dl(e_n);
  for (int64_t t = 0; t < t_n; ++t) {
    std::fill(dl.begin(), dl.end(), 0.0);
    // The k-way softmax: dl_j = p_j (dp_j - sum_i p_i dp_i) over the chosen j. A dropped slot's
    // dp is 0, its p still in the normalisation.
    double dot = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t s = t * k + j;
      dot += r.weight[s] * (r.kept[s] ? dweight[s] : 0.0);
    }
    for (int64_t j = 0; j < k; ++j) {
      const int64_t s = t * k + j;
      dl[r.expert[s]] += r.weight[s] * ((r.kept[s] ? dweight[s] : 0.0) - dot);
    }
    // The full softmax of the aux loss: dl += s (g - s . g).
    if (r.aux_coeff > 0) {
      const double* sc = r.scores.data() + t * e_n;
      double sg = 0;
      for (int64_t e = 0; e < e_n; ++e) sg += sc[e] * daux[e];
      for (int64_t e = 0; e < e_n; ++e) dl[e] += sc[e] * (daux[e] - sg);
    }
    for (int64_t e = 0; e < e_n; ++e) dlogits[t * e_n + e] = static_cast<S>(dl[e]);
  }
}

template MoeRouting Route<float>(const float*, int64_t, int64_t, int64_t, double, double);
template MoeRouting Route<double>(const double*, int64_t, int64_t, int64_t, double, double);
template void RouteBackward<float>(const MoeRouting&, const double*, double, float*);
template void RouteBackward<double>(const MoeRouting&, const double*, double, double*);

}  // namespace shardsim::runtime
