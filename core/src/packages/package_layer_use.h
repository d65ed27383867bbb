#pragma once

// What the run manager is told of a run's or session's packages: a value, so that the run
// manager (core/src/runs) needs no more of this room than this header, and this room nothing of
// the run manager.

#include <string>
#include <vector>

namespace scs::packages {

// The packages a run or session asked for, once the server has the layer that holds them
// (package_layers.h): its sandbox runs the derived image instead of the operator's.
struct PackageLayerUse {
  std::string image;                   // the derived image
  std::vector<std::string> installed;  // "name==version" of every project in the layer
  bool built = false;                  // the layer was made for this call; false: cached
  double prepare_seconds = 0;          // resolving the set and, when built, making the layer
};

}  // namespace scs::packages
