// Pieces of the Chrome trace-event format shared by the simulated trace (sim_report.cc) and the
// runtime's measured one (runtime/exec/timeline.cc), so the two files name ranks and streams
// alike and open side by side in Perfetto.
#pragma once

#include <cstdint>

#include "src/util/json_writer.h"

namespace shardsim {

// Metadata events naming process `rank` "rank R (stage S)" and its threads, tid = the Stream
// index (src/sim/program.h), after StreamName. Written into an open traceEvents array.
void WriteRankTraceMetadata(JsonWriter& w, int64_t rank, int64_t stage);

}  // namespace shardsim
