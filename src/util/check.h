// CHECK(cond) << "context": aborts with file:line when an internal invariant is broken.
// Never used for user input; those failures return a Status (src/util/status.h).
#pragma once

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace shardsim::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition) {
    stream_ << file << ":" << line << ": CHECK failed: " << condition << " ";
  }
  [[noreturn]] ~CheckFailure() {
    std::cerr << stream_.str() << std::endl;
    std::abort();
  }
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

}  // namespace shardsim::internal

// A loop, not an if/else, so `if (x) CHECK(y) << ...;` has no dangling else; the body
// never repeats because CheckFailure's destructor aborts.
#define CHECK(cond) \
  while (!(cond)) ::shardsim::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()
