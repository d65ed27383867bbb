// A session's sink: what its sandbox writes goes to the run in progress (session.h).

#include "sessions/session.h"

namespace scs::sessions {

void SessionSink::write(backend::Stream stream, std::string_view bytes) {
  std::lock_guard lock(mutex_);
  if (target_ != nullptr) {
    target_->write(stream, bytes);
  }
}

void SessionSink::ended() {
  backend::OutputSink* target = nullptr;
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
    target = target_;
  }
  if (target != nullptr) {
    target->ended();
  }
  if (listener_) {
    listener_();
  }
}

void SessionSink::bind(backend::OutputSink* target) {
  bool ended = false;
  {
    std::lock_guard lock(mutex_);
    target_ = target;
    ended = ended_;
  }
  if (target != nullptr && ended) {
    target->ended();
  }
}

bool SessionSink::hasEnded() const {
  std::lock_guard lock(mutex_);
  return ended_;
}

}  // namespace scs::sessions
