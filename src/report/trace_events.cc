// See trace_events.h.
#include "src/report/trace_events.h"

#include <string>

#include "src/sim/program.h"

namespace shardsim {

void WriteRankTraceMetadata(JsonWriter& w, int64_t rank, int64_t stage) {
  w.BeginObject().Field("ph", "M").Field("name", "process_name").Field("pid", rank);
  w.Key("args")
      .BeginObject()
      .Field("name", "rank " + std::to_string(rank) + " (stage " + std::to_string(stage) + ")")
      .EndObject()
      .EndObject();
  for (int s = 0; s < kStreamCount; ++s) {
    w.BeginObject()
        .Field("ph", "M")
        .Field("name", "thread_name")
        .Field("pid", rank)
        .Field("tid", s);
    w.Key("args")
        .BeginObject()
        .Field("name", StreamName(static_cast<Stream>(s)))
        .EndObject()
        .EndObject();
  }
}

}  // namespace shardsim
