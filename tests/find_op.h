// FindOp: one op of a layer's op list by name, for the cost tests (gtest only: a missing op is a
// test failure).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/cost/ops.h"

namespace shardsim::testing {

// The op of `ops` named `name` (src/cost/ops.cc's names); a test failure and the first op when
// there is none.
inline const Op& FindOp(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops) {
    if (op.name == name) return op;
  }
  ADD_FAILURE() << "no op " << name;
  return ops.front();
}

}  // namespace shardsim::testing
