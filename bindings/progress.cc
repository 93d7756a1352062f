#include "bindings/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "runtime/common/error.h"

namespace vt::lua {
namespace {

int TerminalColumns() {
  struct winsize ws {};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

std::string Seconds(double s) {
  char buf[32];
  if (s < 100) {
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  } else if (s < 6000) {
    std::snprintf(buf, sizeof buf, "%.0fm%02.0fs", std::floor(s / 60), std::fmod(s, 60));
  } else {
    std::snprintf(buf, sizeof buf, "%.1fh", s / 3600);
  }
  return buf;
}

}  // namespace

RunProgress::Mode RunProgress::Default() {
  return isatty(STDERR_FILENO) ? Mode::kBar : Mode::kLines;
}

RunProgress::RunProgress(const train::Runner& runner, Mode mode, const std::string& metrics)
    : runner_(runner), mode_(mode) {
  label_ = std::string(dynamic_cast<const train::Auditor*>(&runner) ? "auditor" : "trainer") + " " +
           runner.options().profile;
  if (!metrics.empty()) {
    metrics_ = std::fopen(metrics.c_str(), "a");
    if (metrics_ == nullptr)
      throw Error("cannot open metrics file '" + metrics + "': " + std::strerror(errno));
  }
  start_ = last_draw_ = std::chrono::steady_clock::now();
  const int64_t first = runner.step();
  const int64_t n = std::max<int64_t>(runner.last_step(), 1);
  next_tenth_ = first * 10 / n + 1;
}

RunProgress::~RunProgress() {
  if (metrics_ != nullptr) std::fclose(metrics_);
}

std::string RunProgress::Line(const train::StepReport& rep, double elapsed, int64_t done_here,
                              int columns) const {
  const int64_t n = std::max<int64_t>(runner_.last_step(), 1);
  const double rate = done_here / std::max(elapsed, 1e-9);
  const double eta = (n - rep.step) / std::max(rate, 1e-9);
  char counts[160];
  std::snprintf(counts, sizeof counts, " %lld/%lld  %.2f it/s  ETA %s  loss %.4f  logged %lld",
                static_cast<long long>(rep.step), static_cast<long long>(n), rate,
                Seconds(eta).c_str(), rep.loss, static_cast<long long>(rep.logged));
  std::string text = label_;
  if (mode_ == Mode::kBar) {
    // The bar takes what the label and the counts leave, between 10 and 30 columns.
    const int room = columns - 1 - static_cast<int>(label_.size() + std::strlen(counts)) - 3;
    const int width = std::min(30, room);
    if (width >= 10) {
      const int filled = static_cast<int>(width * rep.step / n);
      text += " [" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
    }
  }
  text += counts;
  if (mode_ == Mode::kBar && static_cast<int>(text.size()) > columns - 1)
    text.resize(std::max(columns - 1, 0));
  return text;
}

void RunProgress::Step(const train::StepReport& rep, int64_t done_here) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (metrics_ != nullptr) {
    std::fprintf(metrics_,
                 "{\"role\":\"%s\",\"step\":%lld,\"loss\":%.17g,\"logged\":%lld,\"steerable\":%lld,"
                 "\"corrections\":%lld,"
                 "\"illegitimate\":%lld,\"seconds\":%.6f}\n",
                 label_.substr(0, label_.find(' ')).c_str(), static_cast<long long>(rep.step),
                 rep.loss, static_cast<long long>(rep.logged),
                 static_cast<long long>(rep.steerable), static_cast<long long>(rep.corrections),
                 static_cast<long long>(rep.illegitimate), rep.seconds);
    std::fflush(metrics_);
  }
  const int64_t n = std::max<int64_t>(runner_.last_step(), 1);
  const bool last = rep.step >= runner_.last_step();
  if (mode_ == Mode::kBar) {
    if (!last && std::chrono::duration<double>(now - last_draw_).count() < 0.1) return;
    last_draw_ = now;
    const int columns = TerminalColumns();
    std::string line = Line(rep, elapsed, done_here, columns);
    line.resize(std::max<size_t>(line.size(), static_cast<size_t>(std::max(columns - 1, 0))), ' ');
    std::fprintf(stderr, "\r%s", line.c_str());
    std::fflush(stderr);
    drawn_ = true;
  } else if (mode_ == Mode::kLines) {
    if (rep.step * 10 < next_tenth_ * n && !last) return;
    next_tenth_ = rep.step * 10 / n + 1;
    std::fprintf(stderr, "%s\n", Line(rep, elapsed, done_here, 0).c_str());
    std::fflush(stderr);
  }
}

void RunProgress::Finish() {
  if (drawn_) std::fputs("\n", stderr);
  drawn_ = false;
}

}  // namespace vt::lua
