// A progress line on stderr for a command that may run longer than about 2 s (issue 18): on a
// terminal one line redrawn at most 5 times a second ("PREFIX stage [#####     ]  42%"), ended
// when the last stage completes; when stderr is not a terminal, only with a command's
// --progress, one line per stage as it starts ("plan: PREFIX stage"), for logs. Nothing under
// --json unless --progress.
#pragma once

#include <chrono>
#include <string>

namespace shardsim {

class ProgressLine {
 public:
  // `command`: the log lines' prefix ("plan"); `tty`: stderr is a terminal (redraw);
  // `final_stage`: the stage whose completion ends the redrawn line.
  ProgressLine(std::string command, bool tty, std::string final_stage);
  // Where `stage` is, from 0 to 1; `prefix` goes before it (a GPU count of a range).
  void Update(const std::string& prefix, const std::string& stage, double fraction);
  // A new round of stages (the next GPU count): the next Update is a stage change.
  void Restart() { last_stage_.clear(); }

 private:
  std::string command_, final_stage_, last_stage_;
  bool tty_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace shardsim
