// One function that checks a layout against a model and a cluster and returns every reason
// it is invalid, plus warnings about legal but doubtful choices (e.g. TP crossing nodes).
#pragma once

#include <string>
#include <vector>

#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim {

struct LayoutCheck {
  std::vector<std::string> errors;
  std::vector<std::string> warnings;
  bool ok() const { return errors.empty(); }
  // "invalid layout: <e1>; <e2>" or OK.
  Status ToStatus() const;
};

// `l` must be resolved (ResolveLayout) for `gpus`.
LayoutCheck CheckLayout(const Layout& l, const ModelSpec& m, const HardwareSpec& hw,
                        int64_t gpus);

}  // namespace shardsim
