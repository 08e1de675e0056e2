#include "src/runtime/observability.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

namespace streampool::internal {

void Observability::EnableChecker(bool on, bool fatal, const VectorClock* done,
                                  const RegisteredRanges* registered) {
  if (on && !checker_) {
    checker_ = std::make_unique<StreamOrderChecker>();
    checker_->set_done(done);
    checker_->set_registered(registered);
  }
  if (!on) checker_.reset();
  checker_fatal_ = on && fatal;
  checker_reported_ = checker_ ? checker_->reports().size() : 0;
  if (!checker_) report_streams_.clear();
}

void Observability::CheckerAfterEvent() {
  const auto& reports = checker_->reports();
  // Name a report's streams now: their slots may later hold other streams.
  while (report_streams_.size() < reports.size()) {
    const internal::CheckReport& r = reports[report_streams_.size()];
    report_streams_.emplace_back(HandleOf(r.stream), HandleOf(r.other_stream));
  }
  if (checker_fatal_ && reports.size() > checker_reported_) {
    std::fprintf(stderr, "streampool stream-order checker: %s: %s\n",
                 CheckKindName(reports[checker_reported_].kind),
                 reports[checker_reported_].message.c_str());
    std::abort();
  }
  checker_reported_ = reports.size();
}

std::vector<streampool::CheckReport> Observability::Reports() const {
  std::vector<streampool::CheckReport> out;
  if (!checker_) return out;
  const auto& reports = checker_->reports();
  for (size_t i = 0; i < reports.size(); ++i) {
    const internal::CheckReport& r = reports[i];
    const bool named = i < report_streams_.size();
    streampool::CheckReport o;
    o.kind = static_cast<streampool::CheckKind>(static_cast<int>(r.kind) + 1);
    o.stream = StreamId{named ? report_streams_[i].first : HandleOf(r.stream)};
    o.op_position = r.position;
    o.ptr = reinterpret_cast<const void*>(r.ptr);
    o.size = r.size;
    o.other_stream = StreamId{named ? report_streams_[i].second : HandleOf(r.other_stream)};
    o.other_position = r.other_position;
    o.message = r.message;
    out.push_back(std::move(o));
  }
  return out;
}

void Observability::ClearReports() {
  if (checker_) checker_->ClearReports();
  checker_reported_ = 0;
  report_streams_.clear();
}

}  // namespace streampool::internal
