// SessionStore: hibernated sessions' records under the operator's --state-dir, written with
// POSIX calls so that their mode is 0600 from the moment they exist.

#include "sessions/session_store.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace scs::sessions {
namespace {

std::string systemError(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

std::int64_t unixMillis(std::chrono::system_clock::time_point at) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
}

std::chrono::system_clock::time_point fromUnixMillis(std::int64_t millis) {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(millis));
}

// A directory this process owns and nobody else may write to (made with `mode` if missing).
Result<Done> ownDirectory(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return internal(systemError("cannot create", path));
  }
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) {
    return internal(systemError("cannot read", path));
  }
  if (!S_ISDIR(status.st_mode)) {
    return invalid(path + " is not a directory");
  }
  if (status.st_uid != ::geteuid()) {
    return invalid(path + " belongs to uid " + std::to_string(status.st_uid) +
                   ", not to this server's " + std::to_string(::geteuid()));
  }
  if ((status.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    std::ostringstream octal;
    octal << std::oct << (status.st_mode & 0777);
    return invalid(path + " may be written by others (mode " + octal.str() + ")");
  }
  return Done{};
}

bool plainId(const std::string& id) {
  if (id.empty() || id.size() > 64) {
    return false;
  }
  for (const char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

constexpr int kVersion = 1;

// A record another version of the server wrote: left for it.
struct OtherVersion : std::runtime_error {
  OtherVersion() : std::runtime_error("a record of another version of the server") {}
};

// A time in a record: from 2020 to a day past now, so that no conversion overflows and no
// session gets more time than it had.
std::chrono::system_clock::time_point recordTime(std::int64_t millis) {
  constexpr std::int64_t kYear2020 = 1'577'836'800'000;
  const std::int64_t tomorrow =
      unixMillis(std::chrono::system_clock::now() + std::chrono::hours(24));
  if (millis < kYear2020 || millis > tomorrow) {
    throw std::runtime_error("a time out of range");
  }
  return fromUnixMillis(millis);
}

std::string encode(const SavedSession& session) {
  Poco::JSON::Object record;
  record.set("version", kVersion);
  record.set("id", session.id);
  record.set("tenant", session.tenant);
  record.set("language", std::string(policy::nameOf(session.language)));
  Poco::JSON::Object limits;
  limits.set("memory_gb", session.limits.memory_gb);
  limits.set("timeout_seconds", session.limits.timeout_seconds);
  limits.set("cpus", session.limits.cpus);
  limits.set("processes", session.limits.processes);
  record.set("limits", limits);
  if (session.packages) {
    Poco::JSON::Object packages;
    packages.set("image", session.packages->image);
    Poco::JSON::Array installed;
    for (const std::string& item : session.packages->installed) {
      installed.add(item);
    }
    packages.set("installed", installed);
    record.set("packages", packages);
  }
  record.set("uid", static_cast<std::int64_t>(session.uid));
  record.set("sandbox_id", session.sandbox_id);
  record.set("backend_saved", session.backend_saved);
  record.set("opened_ms", unixMillis(session.opened));
  record.set("last_active_ms", unixMillis(session.last_active));
  record.set("hibernated_ms", unixMillis(session.hibernated));
  record.set("awake_ms", static_cast<std::int64_t>(session.awake.count()));
  std::ostringstream text;
  record.stringify(text);
  return text.str();
}

template <typename T>
T field(const Poco::JSON::Object::Ptr& object, const std::string& key) {
  if (!object || !object->has(key)) {
    throw std::runtime_error("no \"" + key + "\"");
  }
  return object->getValue<T>(key);
}

SavedSession decode(const std::string& text) {
  Poco::JSON::Parser parser;
  const auto record = parser.parse(text).extract<Poco::JSON::Object::Ptr>();
  if (field<int>(record, "version") != kVersion) {
    throw OtherVersion();
  }
  SavedSession session;
  session.id = field<std::string>(record, "id");
  session.tenant = field<std::string>(record, "tenant");
  const auto language = policy::languageNamed(field<std::string>(record, "language"));
  if (!language) {
    throw std::runtime_error("an unknown language");
  }
  session.language = *language;
  const auto limits = record->getObject("limits");
  session.limits.memory_gb = field<double>(limits, "memory_gb");
  session.limits.timeout_seconds = field<double>(limits, "timeout_seconds");
  session.limits.cpus = field<double>(limits, "cpus");
  session.limits.processes = field<int>(limits, "processes");
  if (const auto packages = record->getObject("packages")) {
    packages::PackageLayerUse use;
    use.image = field<std::string>(packages, "image");
    if (const auto installed = packages->getArray("installed")) {
      for (std::size_t i = 0; i < installed->size(); ++i) {
        use.installed.push_back(installed->getElement<std::string>(i));
      }
    }
    session.packages = std::move(use);
  }
  const auto uid = field<std::int64_t>(record, "uid");
  if (uid < 0 || uid > UINT32_MAX) {
    throw std::runtime_error("a uid out of range");
  }
  session.uid = static_cast<std::uint32_t>(uid);
  session.sandbox_id = field<std::string>(record, "sandbox_id");
  session.backend_saved = field<std::string>(record, "backend_saved");
  session.opened = recordTime(field<std::int64_t>(record, "opened_ms"));
  session.last_active = recordTime(field<std::int64_t>(record, "last_active_ms"));
  session.hibernated = recordTime(field<std::int64_t>(record, "hibernated_ms"));
  const std::int64_t awake = field<std::int64_t>(record, "awake_ms");
  if (awake < 0 || awake > std::int64_t{366} * 24 * 3600 * 1000) {
    throw std::runtime_error("an awake time out of range");
  }
  session.awake = std::chrono::milliseconds(awake);
  if (!plainId(session.id) || session.sandbox_id.empty() || !(session.limits.memory_gb > 0)) {
    throw std::runtime_error("an id, sandbox or memory that is not one of ours");
  }
  return session;
}

}  // namespace

Result<SessionStore> SessionStore::open(const std::string& directory) {
  if (directory.empty() || directory.front() != '/') {
    return invalid("--state-dir must be an absolute path, not \"" + directory + "\"");
  }
  const std::string sessions = directory + "/sessions";
  for (const std::string& path : {directory, sessions}) {
    const Result<Done> owned = ownDirectory(path, 0700);
    if (const Error* problem = std::get_if<Error>(&owned)) {
      return invalid("--state-dir: " + problem->message);
    }
  }
  // Records are the tenants' data: nobody else may even list them.
  if (::chmod(sessions.c_str(), 0700) != 0) {
    return invalid("--state-dir: " + systemError("cannot set the mode of", sessions));
  }
  // One server per directory: two would take back the same sandboxes.
  const std::string lock_path = directory + "/lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return invalid("--state-dir: " + systemError("cannot open", lock_path));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return invalid("--state-dir " + directory + " is in use by another server");
  }
  auto lock = std::shared_ptr<void>(new int(fd), [](void* held) {
    ::close(*static_cast<int*>(held));
    delete static_cast<int*>(held);
  });
  return SessionStore(sessions, std::move(lock));
}

std::string SessionStore::pathOf(const std::string& session_id) const {
  return directory_ + "/" + session_id + ".json";
}

Result<Done> SessionStore::write(const SavedSession& session) const {
  if (!plainId(session.id)) {
    return invalid("session id \"" + session.id + "\" is not a plain id");
  }
  const std::string path = pathOf(session.id);
  const std::string text = encode(session);
  // A name of its own: two writers of one record (a nap's and shutdown's) never share it.
  std::string temporary = path + ".XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);  // mode 0600
  if (fd < 0) {
    return internal(systemError("cannot create", temporary));
  }
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      Error why = internal(systemError("cannot write", temporary));
      ::close(fd);
      ::unlink(temporary.c_str());
      return why;
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Error why = internal(systemError("cannot save", temporary));
    ::unlink(temporary.c_str());
    return why;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    Error why = internal(systemError("cannot rename into", path));
    ::unlink(temporary.c_str());
    return why;
  }
  return Done{};
}

void SessionStore::remove(const std::string& session_id) const {
  if (plainId(session_id)) {
    ::unlink(pathOf(session_id).c_str());
  }
}

std::vector<SavedSession> SessionStore::load(std::vector<std::string>* problems) const {
  std::vector<SavedSession> sessions;
  DIR* dir = ::opendir(directory_.c_str());
  if (dir == nullptr) {
    problems->push_back(systemError("cannot read", directory_));
    return sessions;
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") {
      names.push_back(name);
    }
  }
  ::closedir(dir);
  for (const std::string& name : names) {
    const std::string path = directory_ + "/" + name;
    const auto drop = [&](const std::string& why) {
      problems->push_back(path + ": " + why + "; removed");
      ::unlink(path.c_str());
    };
    constexpr std::string_view kSuffix = ".json";
    if (name.size() <= kSuffix.size() ||
        name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
      drop("not a session record");
      continue;
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat status {};
    if (fd < 0 || ::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) ||
        status.st_uid != ::geteuid() || (status.st_mode & 077) != 0 || status.st_size > 1 << 20) {
      if (fd >= 0) {
        ::close(fd);
      }
      drop("not a record of this server's (a regular file of its own, mode 0600)");
      continue;
    }
    std::string text(static_cast<std::size_t>(status.st_size), '\0');
    const ssize_t n = ::read(fd, text.data(), text.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(text.size())) {
      drop("could not be read whole");
      continue;
    }
    try {
      SavedSession session = decode(text);
      if (name != session.id + ".json") {
        drop("names another session");
        continue;
      }
      sessions.push_back(std::move(session));
    } catch (const OtherVersion& e) {
      problems->push_back(path + ": " + e.what() + "; left alone");
    } catch (const std::exception& e) {
      drop(std::string("not a session record (") + e.what() + ")");
    }
  }
  return sessions;
}

}  // namespace scs::sessions
