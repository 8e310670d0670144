// Contains(text, part): a gtest assertion that `part` occurs in `text`, printing both when
// it does not. Used to check error messages without depending on gmock's matchers.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace shardsim::testing {

inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' not found in:\n" << text;
}

}  // namespace shardsim::testing
