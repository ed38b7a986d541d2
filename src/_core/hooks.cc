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
// The env whose plugins this thread is dispatching (innermost), kAllEnvs in a callback-free
// section, null outside dispatch.
thread_local const HookTarget* tls_dispatch_owner MJFAST_FAST_TLS = nullptr;
const HookTarget* const kAllEnvs = reinterpret_cast<const HookTarget*>(alignof(HookTarget));

// Whether a call for `target`'s pair re-enters its own dispatch: MuJoCo semantics apply then.
inline bool reentered(const HookTarget* target) {
  const HookTarget* owner = tls_dispatch_owner;
  return owner != nullptr && (owner == target || owner == kAllEnvs);
}
// Off the hot path (read by API calls, not by trampolines): the default TLS model will do.
thread_local int tls_lifecycle_depth = 0;

template <class Call>
void trampoline(const mjModel* m, mjData* d, Call&& call) {
  if (d == tls_data && m == tls_model) {
    if (!reentered(tls_target)) call(*tls_target);
    return;
  }
  std::shared_ptr<HookTarget> target;
  for (const RegistryEntry& entry : *registry.load(std::memory_order_acquire)) {
    if (entry.data != d) continue;
    if (entry.model != m) return;  // the env's data with another model: not an env's pair
    target = entry.target.lock();
    break;
  }
  if (target && !reentered(target.get())) call(*target);
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

DispatchScope::DispatchScope(const HookTarget* env) : previous_(tls_dispatch_owner) {
  ++tls_dispatch_depth;
  tls_dispatch_owner = env != nullptr ? env : kAllEnvs;
}
DispatchScope::~DispatchScope() {
  --tls_dispatch_depth;
  tls_dispatch_owner = previous_;
}
bool in_dispatch() { return tls_dispatch_depth > 0; }
int dispatch_depth() { return tls_dispatch_depth; }
bool in_dispatch_of(const HookTarget* env) { return reentered(env); }

LifecycleScope::LifecycleScope() { ++tls_lifecycle_depth; }
LifecycleScope::~LifecycleScope() { --tls_lifecycle_depth; }
bool in_plugin_callback() { return tls_dispatch_depth > 0 || tls_lifecycle_depth > 0; }

}  // namespace mjfast::hooks
