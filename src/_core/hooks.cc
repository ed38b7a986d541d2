#include "hooks.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <vector>

#include "errors.h"

namespace mjfast::hooks {
namespace {

struct RegistryEntry {
  const mjData* data;
  const mjModel* model;
  std::weak_ptr<HookTarget> target;
};
using Registry = std::vector<RegistryEntry>;

// Registry lookups happen for calls outside an env's own step loop: user code calling mj_forward
// on an env's data, model compilation, rollout workers (many threads at once). Readers take no
// lock: they load the current version; a writer (env construction, reload, close) publishes a
// copy under registry_writer_mutex. A replaced version is never freed, since a reader on another
// thread may still be scanning it; there are only as many as env lifecycle events, a few entries
// each.
std::mutex registry_writer_mutex;
std::atomic<const Registry*> registry{new Registry()};

// initial-exec: read straight off the thread pointer. The default model for a dlopen'ed library
// calls __tls_get_addr on every access, which cost ~50 ns per step across the trampolines; these
// few bytes fit in the static TLS surplus that glibc reserves for such libraries.
#define MJFAST_FAST_TLS __attribute__((tls_model("initial-exec")))
thread_local const mjModel* tls_model MJFAST_FAST_TLS = nullptr;
thread_local mjData* tls_data MJFAST_FAST_TLS = nullptr;
thread_local HookTarget* tls_target MJFAST_FAST_TLS = nullptr;
thread_local int tls_dispatch_depth MJFAST_FAST_TLS = 0;
// Off the hot path (read by API calls, not by trampolines): the default TLS model will do.
thread_local int tls_lifecycle_depth = 0;

template <class Call>
void trampoline(const mjModel* m, mjData* d, Call&& call) {
  if (tls_dispatch_depth > 0) return;  // re-entered from a plugin: MuJoCo semantics apply, not ours
  if (d == tls_data && m == tls_model) {
    call(*tls_target);
    return;
  }
  std::shared_ptr<HookTarget> target;
  for (const RegistryEntry& entry : *registry.load(std::memory_order_acquire)) {
    if (entry.data != d) continue;
    if (entry.model != m) return;  // the env's data with another model: not an env's pair
    target = entry.target.lock();
    break;
  }
  if (target) call(*target);
}

// Publishes a copy of the registry without `d`'s entry, plus `added` if given.
void publish_registry(const mjData* d, std::optional<RegistryEntry> added) {
  std::lock_guard<std::mutex> lock(registry_writer_mutex);
  auto* next = new Registry(*registry.load(std::memory_order_acquire));
  next->erase(std::remove_if(next->begin(), next->end(),
                             [&](const RegistryEntry& entry) { return entry.data == d; }),
              next->end());
  if (added) next->push_back(std::move(*added));
  registry.store(next, std::memory_order_release);  // the old version stays readable (see above)
}

}  // namespace

extern "C" void control_trampoline(const mjModel* m, mjData* d) {
  trampoline(m, d, [&](HookTarget& t) { t.on_control(m, d); });
}

extern "C" void passive_trampoline(const mjModel* m, mjData* d) {
  trampoline(m, d, [&](HookTarget& t) { t.on_passive(m, d); });
}

bool control_owned() { return mjcb_control == &control_trampoline; }
bool passive_owned() { return mjcb_passive == &passive_trampoline; }

void check_owned() {
  const char* lost = !control_owned() ? "mjcb_control" : !passive_owned() ? "mjcb_passive" : nullptr;
  if (lost) {
    throw HookOwnershipError(
        std::string("MuJoCo's global ") + lost +
        " was replaced by someone other than mjfast; mjfast owns it while an env exists and "
        "cannot dispatch plugins without it (call mjfast.install_hooks() to take it back)");
  }
}

void register_pair(const mjModel* m, mjData* d, std::weak_ptr<HookTarget> target) {
  publish_registry(d, RegistryEntry{d, m, std::move(target)});
}

void unregister_pair(const mjData* d) { publish_registry(d, std::nullopt); }

SteppingScope::SteppingScope(const mjModel* m, mjData* d, HookTarget* target)
    : previous_model_(tls_model), previous_data_(tls_data), previous_target_(tls_target) {
  tls_model = m;
  tls_data = d;
  tls_target = target;
}

SteppingScope::~SteppingScope() {
  tls_model = previous_model_;
  tls_data = previous_data_;
  tls_target = previous_target_;
}

DispatchScope::DispatchScope() { ++tls_dispatch_depth; }
DispatchScope::~DispatchScope() { --tls_dispatch_depth; }
bool in_dispatch() { return tls_dispatch_depth > 0; }

LifecycleScope::LifecycleScope() { ++tls_lifecycle_depth; }
LifecycleScope::~LifecycleScope() { --tls_lifecycle_depth; }
bool in_plugin_callback() { return tls_dispatch_depth > 0 || tls_lifecycle_depth > 0; }

}  // namespace mjfast::hooks
