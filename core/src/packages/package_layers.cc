// Package layers: resolution under one lock, the derived images' recency, and their eviction.

#include "packages/package_layers.h"

#include <Poco/DigestEngine.h>
#include <Poco/Logger.h>
#include <Poco/SHA2Engine.h>
#include <scs/backend/launcher_protocol.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "policy/files.h"
#include "sandbox/labels.h"

namespace scs::packages {
namespace {

namespace fs = std::filesystem;
namespace launcher = backend::launcher;
using Clock = std::chrono::steady_clock;

// How long a set that cannot be had is refused again without pip (a changed wheelhouse ends it
// sooner); how many requests' resolutions are remembered; how old a list of the engine's
// derived images may be before a cached layer is looked for in a new one.
constexpr auto kFailureReuse = std::chrono::seconds(60);
constexpr std::size_t kMaxRequested = 256;
constexpr auto kImagesRecheck = std::chrono::seconds(10);

Poco::Logger& logger() { return Poco::Logger::get("scs.packages"); }

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A private directory under the host's temporary directory, removed with everything in it.
class WorkDirectory {
 public:
  WorkDirectory() {
    std::string pattern = (fs::temp_directory_path() / "scs-packages-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("cannot make a temporary directory for the packages");
    }
    path_ = pattern;
  }
  ~WorkDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  WorkDirectory(const WorkDirectory&) = delete;
  WorkDirectory& operator=(const WorkDirectory&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string sha256Hex(const std::string& text) {
  Poco::SHA2Engine sha256;
  sha256.update(text);
  return Poco::DigestEngine::digestToHex(sha256.digest());
}

constexpr std::uint64_t kTarBlock = 512;

// The files pip installed under `target`, as one archive whose paths are under `site_dir`
// (without its leading "/"), written file by file so that the server holds them once, at most
// `max_bytes` of archive (headers and padding counted). Console scripts (bin/) are left out:
// their first line names the host's interpreter. A file keeps its executable bit (a package may
// run a program it carries; nothing is setuid) and its time (pip's bytecode records it).
Result<std::string> layerArchive(const fs::path& target, const std::string& site_dir,
                                 std::uint64_t max_bytes) {
  std::vector<fs::path> files;
  std::uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(target); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path relative = fs::relative(it->path(), target);
    if (it.depth() == 0 && relative == "bin") {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink() || (!it->is_regular_file() && !it->is_directory())) {
      return internal("pip installed " + relative.string() +
                      ", which is not a regular file or directory");
    }
    total +=
        kTarBlock +
        (it->is_regular_file() ? (it->file_size() + kTarBlock - 1) / kTarBlock * kTarBlock : 0);
    if (total > max_bytes) {
      return invalid("The packages take more than " + std::to_string(max_bytes >> 20) +
                     " MiB installed, the most this server's operator allows for one set; "
                     "nothing was installed. Ask for fewer or smaller packages.");
    }
    if (it->is_regular_file()) {
      files.push_back(relative);
    }
  }
  std::sort(files.begin(), files.end());
  policy::ArchiveWriter archive(0, 0);
  for (const fs::path& relative : files) {
    std::ifstream in(target / relative, std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    struct stat status {};
    if (::stat((target / relative).c_str(), &status) != 0) {
      return internal("cannot read " + relative.string() + " of what pip installed");
    }
    try {
      archive.add(site_dir + "/" + relative.string(), content.str(),
                  (status.st_mode & S_IXUSR) != 0, status.st_mtime);
    } catch (const std::invalid_argument&) {
      return invalid(
          "The packages hold a file whose path is too long for the layer (at most 100 "
          "bytes of name and 155 of directory): " +
          relative.string() + "; nothing was installed.");
    }
  }
  return archive.finish();
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string word; in >> word;) {
    out.push_back(word);
  }
  return out;
}

}  // namespace

PackageLayers::PackageLayers(backend::RuntimeBackend& backend, PackageSettings settings,
                             std::string base_image)
    : backend_(backend), settings_(std::move(settings)), base_image_(std::move(base_image)) {}

PackageLayers::~PackageLayers() { shutdown(); }

Result<Done> PackageLayers::start() {
  const std::string& wheelhouse = settings_.resolver.wheelhouse;
  if (!wheelhouse.empty() && !fs::is_directory(wheelhouse)) {
    return invalid("--wheelhouse " + wheelhouse + " is not a directory");
  }
  const backend::ImageListReply listed = backend_.listImages(kPackageSetLabel);
  if (listed.status.code == backend::Code::kUnsupported) {
    return invalid("packages (--wheelhouse, --package-index) need a backend that derives images: " +
                   listed.status.message);
  }
  const Result<std::string> pip = checkPip(settings_.resolver, pip_);
  if (const auto* problem = std::get_if<Error>(&pip)) {
    return *problem;
  }
  logger().information(
      "packages from " + (wheelhouse.empty() ? std::string() : "the wheelhouse " + wheelhouse) +
      (!wheelhouse.empty() && !settings_.resolver.index_url.empty() ? " and " : "") +
      (settings_.resolver.index_url.empty() ? std::string()
                                            : "the index " + settings_.resolver.index_url) +
      ", resolved by " + std::get<std::string>(pip));
  if (!listed.status.ok()) {
    logger().warning("cannot list the package layers made before: " + listed.status.message);
    return Done{};
  }
  std::lock_guard lock(mutex_);
  for (const backend::ImageInfo& image : listed.images) {
    const auto label = [&](const char* key) {
      const auto found = image.labels.find(key);
      return found == image.labels.end() ? std::string() : found->second;
    };
    const std::string digest = label(kPackageSetLabel);
    if (image.base_image != base_image_ || digest.empty() || layers_.count(digest) != 0) {
      continue;  // another server's, or a second name of one seen
    }
    if (!image.current) {
      const backend::Status removed = backend_.removeImage(image.image);
      logger().information("package layer " + image.image + " was made on an earlier " +
                           base_image_ + ": " +
                           (removed.ok() ? "removed" : "cannot be removed: " + removed.message));
      continue;
    }
    layers_[digest] = {image.image, words(label(kPackagesLabel))};
    recency_.push_back(digest);  // older than anything used from now on
  }
  if (!layers_.empty()) {
    logger().information("found " + std::to_string(layers_.size()) + " package layers made before");
  }
  evictLocked("");
  return Done{};
}

void PackageLayers::shutdown() {
  pip_.stop();
  std::lock_guard lock(mutex_);
  stopping_ = true;
  built_.notify_all();
}

std::string PackageLayers::wheelhouseStamp() const {
  if (settings_.resolver.wheelhouse.empty()) {
    return {};
  }
  std::error_code error;
  const auto stamp = fs::last_write_time(settings_.resolver.wheelhouse, error);
  return error ? std::string() : std::to_string(stamp.time_since_epoch().count());
}

bool PackageLayers::stillValidLocked(const Resolved& resolved, const std::string& stamp) const {
  const auto age = Clock::now() - resolved.when;
  if (resolved.failure) {
    return age < kFailureReuse && resolved.wheelhouse_stamp == stamp;
  }
  if (!settings_.resolver.index_url.empty() && age > settings_.index_reuse) {
    return false;  // the index may have newer versions by now
  }
  return resolved.wheelhouse_stamp == stamp && layers_.count(resolved.digest) != 0;
}

void PackageLayers::rememberLocked(const std::string& key, Resolved resolved) {
  requested_.insert_or_assign(key, std::move(resolved));
  while (requested_.size() > kMaxRequested) {
    requested_.erase(std::min_element(
        requested_.begin(), requested_.end(),
        [](const auto& a, const auto& b) { return a.second.when < b.second.when; }));
  }
}

bool PackageLayers::stillThereLocked(const std::string& image, std::unique_lock<std::mutex>& lock) {
  if (Clock::now() - images_listed_ >= kImagesRecheck) {
    lock.unlock();
    const backend::ImageListReply listed = backend_.listImages(kPackageSetLabel);
    lock.lock();
    if (!listed.status.ok()) {
      return true;  // the engine will say, at the run's create
    }
    images_seen_.clear();
    for (const backend::ImageInfo& info : listed.images) {
      images_seen_.insert(info.image);
    }
    images_listed_ = Clock::now();
  }
  return images_seen_.count(image) != 0;
}

void PackageLayers::forgetLocked(const std::string& digest) {
  for (auto request = requested_.begin(); request != requested_.end();) {
    request = request->second.digest == digest ? requested_.erase(request) : std::next(request);
  }
  recency_.remove(digest);
  layers_.erase(digest);
}

LayerGrant PackageLayers::grantLocked(const std::string& digest, bool built) {
  recency_.remove(digest);
  recency_.push_front(digest);
  const Layer& layer = layers_.at(digest);
  {
    std::lock_guard lock(holds_->mutex);
    ++holds_->count[digest];
  }
  std::shared_ptr<void> hold(nullptr, [holds = holds_, digest](void*) {
    std::lock_guard lock(holds->mutex);
    if (--holds->count[digest] == 0) {
      holds->count.erase(digest);
    }
  });
  return {PackageLayerUse{layer.image, layer.installed, built, 0}, std::move(hold)};
}

Result<LayerGrant> PackageLayers::layerFor(const std::vector<std::string>& specifiers) {
  const Clock::time_point begun = Clock::now();
  Result<std::vector<Requirement>> parsed =
      parseRequirements(specifiers, settings_.max_requirements, settings_.allowed);
  if (auto* error = std::get_if<Error>(&parsed)) {
    return *error;
  }
  const std::vector<Requirement>& requirements = std::get<std::vector<Requirement>>(parsed);
  std::string key;  // the same for every spelling and order of one set
  for (const Requirement& requirement : requirements) {
    key += requirement.key() + " ";
  }
  const std::string stamp = wheelhouseStamp();
  {
    std::unique_lock lock(mutex_);
    while (true) {
      if (stopping_) {
        return stopping("The server is shutting down; ask again once it is back.");
      }
      if (const auto found = requested_.find(key);
          found != requested_.end() && stillValidLocked(found->second, stamp)) {
        if (found->second.failure) {
          return *found->second.failure;
        }
        const std::string digest = found->second.digest;
        const std::string image = layers_.at(digest).image;  // kept: the lock may be let go
        if (stillThereLocked(image, lock)) {
          if (layers_.count(digest) == 0) {
            continue;  // forgotten while the list was taken
          }
          LayerGrant grant = grantLocked(digest, false);
          grant.use.prepare_seconds = secondsSince(begun);
          return grant;
        }
        if (layers_.count(digest) != 0) {
          logger().warning("package layer " + image + " is gone from the engine; making it again");
          forgetLocked(digest);
        }
        continue;
      }
      if (!building_) {
        break;
      }
      built_.wait(lock);  // another set's, or this one's, made by another call
    }
    building_ = true;
  }
  Result<LayerGrant> made = makeLayer(requirements, key, stamp);
  {
    std::lock_guard lock(mutex_);
    building_ = false;
    // A set that cannot be had is told again for a while without pip, unless the server is
    // going away.
    if (const Error* error = std::get_if<Error>(&made);
        error != nullptr && error->kind == ErrorKind::kInvalid) {
      rememberLocked(key, {"", Clock::now(), stamp, *error});
    }
  }
  built_.notify_all();
  if (auto* grant = std::get_if<LayerGrant>(&made)) {
    grant->use.prepare_seconds = secondsSince(begun);
  }
  return made;
}

std::map<std::string, std::string> PackageLayers::buildLabels() const {
  const auto deadline =
      std::chrono::system_clock::now() + settings_.resolver.timeout + std::chrono::hours(1);
  return {
      {sandbox::kLabelManaged, "true"},
      {sandbox::kLabelOwnerPid, std::to_string(::getpid())},
      {sandbox::kLabelDeadline,
       std::to_string(
           std::chrono::duration_cast<std::chrono::seconds>(deadline.time_since_epoch()).count())}};
}

Result<LayerGrant> PackageLayers::makeLayer(const std::vector<Requirement>& requirements,
                                            const std::string& key, const std::string& stamp) {
  try {
    WorkDirectory work;
    const fs::path target = work.path() / "target";
    fs::create_directory(target);
    Result<std::vector<ResolvedPackage>> resolved =
        resolveInto(requirements, target.string(), work.path().string(), settings_.resolver,
                    settings_.max_layer_bytes, pip_);
    if (auto* error = std::get_if<Error>(&resolved)) {
      return *error;
    }
    const std::vector<ResolvedPackage>& packages = std::get<std::vector<ResolvedPackage>>(resolved);
    std::vector<std::string> installed;
    std::string identity = base_image_ + "\n" + std::string(launcher::kPackagesDirectory) + "\n";
    for (const ResolvedPackage& package : packages) {
      if (!settings_.allowed.empty() && settings_.allowed.count(package.name) == 0) {
        return invalid("The packages need " + package.name + " " + package.version +
                       ", which this server's operator does not allow; nothing was installed.");
      }
      installed.push_back(package.name + "==" + package.version);
      identity += installed.back() + " " + package.sha256 + "\n";
    }
    const std::string digest = sha256Hex(identity);
    for (const ResolvedPackage& package : packages) {
      logger().information("packages " + key + "resolved to " + package.name + " " +
                           package.version + " from " + package.wheel + " sha256 " +
                           package.sha256 + " (layer " + digest.substr(0, 20) + ")");
    }
    {
      std::lock_guard lock(mutex_);
      if (layers_.count(digest) != 0) {  // another request resolved to the same set
        rememberLocked(key, {digest, Clock::now(), stamp, std::nullopt});
        return grantLocked(digest, false);
      }
    }
    Result<std::string> archive = layerArchive(
        target, std::string(launcher::kPackagesDirectory.substr(1)), settings_.max_layer_bytes);
    if (auto* error = std::get_if<Error>(&archive)) {
      return *error;
    }
    backend::ImageLayer layer;
    layer.base_image = base_image_;
    layer.image = settings_.image_repository + ":" + digest.substr(0, 20);
    layer.archive = std::move(std::get<std::string>(archive));
    std::string listed;
    for (const std::string& name : installed) {
      listed += (listed.empty() ? "" : " ") + name;
    }
    layer.labels = {
        {kPackageSetLabel, digest}, {kPackageBaseLabel, base_image_}, {kPackagesLabel, listed}};
    layer.build_labels = buildLabels();
    const std::string image = layer.image;
    const std::size_t archive_bytes = layer.archive.size();
    const Clock::time_point build_start = Clock::now();
    // Moved: the archive is the set's whole size, and the backend keeps no copy of it.
    if (const backend::Status built = backend_.buildImage(std::move(layer)); !built.ok()) {
      logger().error("cannot make package layer " + image + ": " + built.message);
      return internal("The server could not make the packages' layer: " + built.message);
    }
    logger().information("made package layer " + image + " (" +
                         std::to_string(archive_bytes >> 10) + " KiB) in " +
                         std::to_string(secondsSince(build_start)) + " s");
    std::lock_guard lock(mutex_);
    layers_[digest] = {image, std::move(installed)};
    images_seen_.insert(image);
    rememberLocked(key, {digest, Clock::now(), stamp, std::nullopt});
    LayerGrant grant = grantLocked(digest, true);
    evictLocked(digest);
    return grant;
  } catch (const std::exception& e) {
    return internal(std::string("The server could not prepare the packages: ") + e.what());
  }
}

void PackageLayers::evictLocked(const std::string& keep) {
  std::set<std::string> held;
  {
    std::lock_guard lock(holds_->mutex);
    for (const auto& [digest, count] : holds_->count) {
      held.insert(digest);
    }
  }
  for (auto it = recency_.end(); layers_.size() > settings_.max_layers && it != recency_.begin();) {
    --it;
    if (*it == keep || held.count(*it) != 0) {
      continue;
    }
    const std::string image = layers_.at(*it).image;
    if (const backend::Status removed = backend_.removeImage(image); !removed.ok()) {
      logger().information("package layer " + image + " stays for now: " + removed.message);
      continue;
    }
    logger().information("removed package layer " + image + ", the least recently used");
    const std::string digest = *it;
    it = std::next(it);
    forgetLocked(digest);
  }
}

}  // namespace scs::packages
