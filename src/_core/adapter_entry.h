// AdapterEntry: one factory result as Python hands it to the host (an adapter, or the reason there
// is none). Shared by the bindings that create adapters (Python, native) and the factory glue.
#pragma once

#include <memory>
#include <string>

#include "plugin_adapter.h"

namespace mjfast {

// The adapter moves into the host when the factory consumes the entry.
struct AdapterEntry {
  std::string name;
  std::string type;
  std::unique_ptr<IPluginAdapter> adapter;
  std::string error;
};

}  // namespace mjfast
