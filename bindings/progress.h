// Progress of runner:run(): a bar on a terminal, a line per tenth of the run when stderr is
// a pipe or a file, and optionally one JSON line per step in a metrics file.
//
// The bar is labelled by role and profile ("auditor splitk4") so a trainer and an auditor
// running side by side are told apart, fits the terminal's width, and is redrawn at most
// ten times a second.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "runtime/train/runner.h"

namespace vt::lua {

class RunProgress {
 public:
  enum class Mode { kNone, kBar, kLines };

  // `metrics`: a path to append JSON lines to ("" for none); throws vt::Error if it cannot be
  // opened.
  RunProgress(const train::Runner& runner, Mode mode, const std::string& metrics);
  ~RunProgress();
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;

  // After each step; `done_here` counts the steps this call of run() has taken.
  void Step(const train::StepReport& report, int64_t done_here);
  // Ends the bar's line.
  void Finish();

  // "bar" on a terminal, "lines" otherwise.
  static Mode Default();

 private:
  std::string Line(const train::StepReport& report, double elapsed, int64_t done_here,
                   int columns) const;

  const train::Runner& runner_;
  Mode mode_;
  std::string label_;
  std::FILE* metrics_ = nullptr;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t next_tenth_ = 1;
  bool drawn_ = false;
};

}  // namespace vt::lua
