// See moe_layer_freq.h.
#include "src/io/moe_layer_freq.h"

#include <cctype>
#include <vector>

namespace shardsim {
namespace {

constexpr int64_t kMaxLayers = 1 << 20;

std::string Strip(std::string s) {
  std::string out;
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c)) && c != '"' && c != '\'') out += c;
  }
  return out;
}

bool AllDigits(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// One term: "[a,b,...]" or "[a,b,...]*k", appended to `out`.
Status AddTerm(const std::string& term, std::vector<int>& out) {
  const size_t close = term.find(']');
  if (term.empty() || term[0] != '[' || close == std::string::npos) {
    return Status::Error("'" + term + "' is not a list such as [0]*3 or [0,1]");
  }
  std::vector<int> items;
  const std::string body = term.substr(1, close - 1);
  size_t start = 0;
  while (start <= body.size() && !body.empty()) {
    const size_t comma = body.find(',', start);
    const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item != "0" && item != "1") return Status::Error("'" + item + "' in '" + term + "': each layer is 0 or 1");
    items.push_back(item == "1" ? 1 : 0);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  int64_t repeat = 1;
  const std::string rest = term.substr(close + 1);
  if (!rest.empty()) {
    if (rest[0] != '*' || !AllDigits(rest.substr(1))) return Status::Error("'" + rest + "' after a list: expected *count");
    repeat = std::stoll(rest.substr(1));
  }
  for (int64_t i = 0; i < repeat; ++i) {
    if (static_cast<int64_t>(out.size() + items.size()) > kMaxLayers) return Status::Error("the list is too long");
    out.insert(out.end(), items.begin(), items.end());
  }
  return Status::Ok();
}

}  // namespace

StatusOr<MoeLayerPattern> ParseMoeLayerFreq(const std::string& text, int64_t layers) {
  std::string s = Strip(text);
  if (AllDigits(s)) {
    MoeLayerPattern p;
    p.interval = std::stoll(s);
    if (p.interval < 1) return Status::Error("the frequency must be at least 1");
    return p;
  }
  while (s.size() >= 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
  std::vector<int> per_layer;
  size_t start = 0;
  while (start < s.size()) {
    const size_t plus = s.find('+', start);
    SHARDSIM_RETURN_IF_ERROR(AddTerm(s.substr(start, plus == std::string::npos ? std::string::npos : plus - start), per_layer));
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  if (static_cast<int64_t>(per_layer.size()) != layers) {
    return Status::Error("'" + text + "' lists " + std::to_string(per_layer.size()) + " layers; the model has " +
                         std::to_string(layers));
  }
  // The first MoE layer starts the pattern; find the interval that reproduces the list.
  MoeSpec probe;
  int64_t first = 0;
  while (first < layers && per_layer[first] == 0) ++first;
  if (first == layers) return Status::Error("'" + text + "' makes no layer an expert layer");
  for (int64_t n = 1; n <= layers; ++n) {
    probe.interval = n;
    probe.first_dense = first;
    bool same = true;
    for (int64_t i = 0; i < layers && same; ++i) same = probe.Covers(i) == (per_layer[i] == 1);
    if (same) return MoeLayerPattern{first, n};
  }
  return Status::Error("'" + text + "' is not dense layers followed by every N-th layer an expert layer, the "
                       "pattern shardsim's MoE description holds");
}

void ReadMoeLayerFreq(LocatedValues& r, const std::string& key, int64_t layers, MoeSpec& moe) {
  if (!r.Has(key)) return;
  StatusOr<MoeLayerPattern> p = ParseMoeLayerFreq(r.Text(key, "1"), layers);
  if (!p.ok()) {
    r.Error(key, key + ": " + p.status().message());
    return;
  }
  moe.interval = p->interval;
  moe.first_dense = p->first_dense;
}

std::string MoeLayerFreqText(const MoeSpec& moe, int64_t layers, bool literal) {
  if (moe.first_dense == 0) return std::to_string(moe.interval);
  if (moe.interval == 1 && !literal) {
    return "([0]*" + std::to_string(moe.first_dense) + "+[1]*" + std::to_string(layers - moe.first_dense) + ")";
  }
  std::string out = "[";
  for (int64_t i = 0; i < layers; ++i) out += std::string(i ? "," : "") + (moe.Covers(i) ? "1" : "0");
  return out + "]";
}

}  // namespace shardsim
