#pragma once

// Package sets as image layers: a set asked for is resolved (wheel_resolver.h), its files made
// into one read-only layer over the operator's image, and the derived image kept for later runs
// of the same set, at most `max_layers` of them, the least recently used removed first. The run
// then goes into the derived image with every control unchanged (sandbox/sandbox_source.h).

#include <scs/backend/backend.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "packages/package_layer_use.h"
#include "packages/requirements.h"
#include "packages/wheel_resolver.h"
#include "result.h"

namespace scs::packages {

// Labels of a derived image: the set's digest, the operator's image it derives from, and the
// set as "name==version" words (what a later server reads back at startup).
inline constexpr const char* kPackageSetLabel = "io.scs.package-set";
inline constexpr const char* kPackageBaseLabel = "io.scs.package-base";
inline constexpr const char* kPackagesLabel = "io.scs.packages";

struct PackageSettings {
  ResolverSettings resolver;
  std::set<std::string> allowed;  // normalised project names; empty: any
  std::size_t max_layers = 8;
  std::size_t max_requirements = 32;
  // The most one set may take installed. The server holds one layer's files in memory while it
  // hands them to the engine, so this bounds that too.
  std::uint64_t max_layer_bytes = std::uint64_t{512} << 20;
  std::string image_repository = "safe-code-sandbox-packages";
  // How long a set's resolution is reused when an index is set (a wheelhouse's is reused until
  // the directory changes).
  std::chrono::seconds index_reuse{600};
  bool enabled() const { return !resolver.wheelhouse.empty() || !resolver.index_url.empty(); }
};

// A layer a run or session may use: what its report says, and a hold that keeps the layer's
// image from eviction until it is dropped (once the run's or session's sandbox exists, the
// engine refuses to remove an image a sandbox uses).
struct LayerGrant {
  PackageLayerUse use;
  std::shared_ptr<void> hold;
};

class PackageLayers {
 public:
  PackageLayers(backend::RuntimeBackend& backend, PackageSettings settings, std::string base_image);
  ~PackageLayers();

  // Checks the wheelhouse and learns the derived images an earlier server left for this base
  // image (they count against max_layers and serve their sets again). An Error when the
  // backend cannot make derived images at all, or the wheelhouse is not a directory.
  Result<Done> start();

  // The layer for `specifiers` (start_run's and open_session's `packages`): made now when it is
  // new, which takes as long as pip and the engine need, or the one made before. One layer is
  // made at a time; a call for another new set waits. An Error that a model can act on when
  // the set is refused or cannot be had; nothing is left behind then.
  Result<LayerGrant> layerFor(const std::vector<std::string>& specifiers);

  // The server is going away: a pip that runs is ended, calls that wait for another's layer
  // return at once, and no new layer is begun. A layer the engine is writing is finished by it.
  void shutdown();

  const PackageSettings& settings() const { return settings_; }

 private:
  struct Layer {
    std::string image;
    std::vector<std::string> installed;  // "name==version"
  };
  struct Resolved {      // a request's set, as resolved at `when`
    std::string digest;  // empty when it failed
    std::chrono::steady_clock::time_point when;
    std::string wheelhouse_stamp;
    std::optional<Error> failure;  // why it cannot be had, told again for a while
  };
  // The layers' holds, shared with the holds themselves, which may outlive this object (a
  // retained run's record).
  struct Holds {
    std::mutex mutex;
    std::map<std::string, int> count;  // by digest
  };

  std::string wheelhouseStamp() const;
  bool stillValidLocked(const Resolved& resolved, const std::string& stamp) const;
  // Remembers how `key` resolved, forgetting the oldest past kMaxRequested.
  void rememberLocked(const std::string& key, Resolved resolved);
  // Whether the engine still has `image`, from a list of the derived images at most
  // kImagesRecheck old (another server on the engine, or an operator's `docker rmi`, may have
  // removed it). Takes the list with `lock` released.
  bool stillThereLocked(const std::string& image, std::unique_lock<std::mutex>& lock);
  // Forgets the layer `digest` and the requests that resolved to it. Requires mutex_.
  void forgetLocked(const std::string& digest);
  // The grant for `digest`, moved to the front of the recency list. Requires mutex_.
  LayerGrant grantLocked(const std::string& digest, bool built);
  Result<LayerGrant> makeLayer(const std::vector<Requirement>& requirements, const std::string& key,
                               const std::string& stamp);
  // Removes the least recently used layers beyond max_layers, sparing those held and `keep`.
  // The engine refuses to remove one a sandbox still uses; it goes on a later call.
  void evictLocked(const std::string& keep);
  // Labels of what the backend makes while it builds a layer (a container): a later server's
  // startup sweep removes what this one leaves should it die meanwhile.
  std::map<std::string, std::string> buildLabels() const;

  backend::RuntimeBackend& backend_;
  const PackageSettings settings_;
  const std::string base_image_;
  PipControl pip_;
  const std::shared_ptr<Holds> holds_ = std::make_shared<Holds>();

  std::mutex mutex_;  // everything below
  std::condition_variable built_;
  bool building_ = false;  // one resolution and build at a time
  bool stopping_ = false;
  std::map<std::string, Layer> layers_;        // by digest
  std::list<std::string> recency_;             // digests, most recently used first
  std::map<std::string, Resolved> requested_;  // by the request's sorted keys
  std::set<std::string> images_seen_;          // derived images the engine had when listed
  std::chrono::steady_clock::time_point images_listed_{};
};

}  // namespace scs::packages
