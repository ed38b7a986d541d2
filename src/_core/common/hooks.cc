#include "common/hooks.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "common/errors.h"

namespace mjfast::hooks {
namespace {

struct RegistryEntry {
  const mjData* data;
  const mjModel* model;
  std::weak_ptr<HookTarget> target;
};
using Registry = std::vector<RegistryEntry>;

// The registry: lock-free readers, copy-on-write writers, hazard pointers to free what they
// replace.
//
// Registry lookups happen for calls outside an env's own step loop: user code calling mj_forward
// on an env's data, model compilation, rollout workers (many threads at once), so the reader
// takes no lock and writes nothing shared. A writer (env construction, reload, close) publishes a
// copy under registry_writer_mutex, retires the version it replaced, and frees every retired
// version that no reader holds; one still held is freed by a later write. At most one retired
// version per reader thread is ever kept: memory follows the envs alive, not their history.
//
// Each reader thread owns a ReaderSlot (a cache line, reused after the thread exits) whose
// `hazard` names the version it scans. The reader stores `hazard = v`, then reads `registry`
// again and scans `v` only if it is still current; the writer stores the new version, then reads
// every hazard. One of the two must see the other's store (store-load on both sides):
//  - if the reader's re-read comes before the writer's store takes effect, the writer's read of
//    the hazards comes after the reader's hazard store, so it sees `v` and keeps it;
//  - otherwise the reader's re-read sees the new version, and it retries with that one.
// That needs a full fence between the store and the load on both sides. The reader's fence would
// cost ~5-10 ns per call on x86 (more than the lookup itself), so where Linux offers it the
// fence is asymmetric: the reader has only a compiler barrier and the writer calls
// membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a full barrier on every CPU that runs
// one of this process's threads (so every reader's store-then-load is ordered with respect to the
// writer's) — the scheme of userspace RCU's "memb" flavour and folly's asymmetric fences. Where
// membarrier is unavailable (older kernels, some sandboxes), the reader fences itself (seq_cst),
// decided once at load, before any reader can run. The reader's hazard stores are releases (the
// last one, nullptr, once it has taken its shared_ptr) and the writer reads hazards with acquire
// loads, so a version is deleted only after every scan of it has finished.
struct alignas(64) ReaderSlot {
  std::atomic<const Registry*> hazard{nullptr};
  std::atomic<bool> in_use{false};
  ReaderSlot* next = nullptr;  // immutable once the slot is published in reader_slots
};

std::mutex registry_writer_mutex;
std::atomic<const Registry*> registry{new Registry()};
// Never destroyed: a daemon thread may still close an env while the process exits.
std::vector<const Registry*>& retired = *new std::vector<const Registry*>();  // writer mutex
std::atomic<ReaderSlot*> reader_slots{nullptr};  // a push-only list: slots are reused, never freed

bool register_membarrier() {
  // For tests and for comparing the two: the reader-side fence, as where membarrier is missing.
  if (const char* off = std::getenv("MJFAST_HOOKS_NO_MEMBARRIER"); off && *off && *off != '0') {
    return false;
  }
  const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
  if (supported < 0 || !(supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
}

// Fixed at load time (static initialisation of this library), before any trampoline can run.
const bool asymmetric_fence = register_membarrier();

inline void reader_fence() {
  if (asymmetric_fence) {
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the writer's membarrier does the rest
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

// Whether the retired versions may be reclaimed now.
bool writer_fence() {
  if (!asymmetric_fence) {
    // The readers fence themselves: this completes the store-load pair.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return true;
  }
  // It cannot fail once registered; were it to, the readers have not been fenced, so nothing is
  // freed this time (a later write frees it).
  return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0;
}

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

thread_local ReaderSlot* tls_reader_slot MJFAST_FAST_TLS = nullptr;

// Gives the thread's slot back when the thread exits (a separate thread_local: one with a
// destructor is reached through a guard, kept off the reader's path).
struct ReaderSlotRelease {
  ~ReaderSlotRelease() {
    if (ReaderSlot* slot = tls_reader_slot) {
      tls_reader_slot = nullptr;
      slot->hazard.store(nullptr, std::memory_order_release);
      slot->in_use.store(false, std::memory_order_release);
    }
  }
};

__attribute__((noinline)) ReaderSlot* claim_reader_slot() {
  thread_local ReaderSlotRelease release_at_exit;
  (void)release_at_exit;
  ReaderSlot* slot = nullptr;
  for (ReaderSlot* s = reader_slots.load(std::memory_order_acquire); s; s = s->next) {
    bool expected = false;
    if (s->in_use.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      slot = s;
      break;
    }
  }
  if (!slot) {
    slot = new ReaderSlot();
    slot->in_use.store(true, std::memory_order_relaxed);
    slot->next = reader_slots.load(std::memory_order_relaxed);
    while (!reader_slots.compare_exchange_weak(slot->next, slot, std::memory_order_release,
                                               std::memory_order_relaxed)) {
    }
  }
  tls_reader_slot = slot;
  return slot;
}

// Inlined into the trampolines: an out-of-line call cost ~1 ns of the ~3 ns a foreign pair takes.
__attribute__((always_inline)) inline std::shared_ptr<HookTarget> find_target(const mjModel* m,
                                                                              const mjData* d) {
  ReaderSlot* slot = tls_reader_slot;
  if (!slot) slot = claim_reader_slot();
  const Registry* version = registry.load(std::memory_order_acquire);
  for (;;) {
    slot->hazard.store(version, std::memory_order_release);
    reader_fence();
    const Registry* current = registry.load(std::memory_order_acquire);
    if (current == version) break;
    version = current;
  }
  std::shared_ptr<HookTarget> target;
  for (const RegistryEntry& entry : *version) {
    if (entry.data != d) continue;
    if (entry.model == m) target = entry.target.lock();
    break;  // the env's data with another model is not an env's pair
  }
  slot->hazard.store(nullptr, std::memory_order_release);
  return target;
}

template <class Call>
void trampoline(const mjModel* m, mjData* d, Call&& call) {
  if (d == tls_data && m == tls_model) {
    if (!reentered(tls_target)) call(*tls_target);
    return;
  }
  std::shared_ptr<HookTarget> target = find_target(m, d);
  if (target && !reentered(target.get())) call(*target);
}

// Frees the retired versions that no reader holds. Called with registry_writer_mutex held, after
// writer_fence().
void reclaim() {
  std::vector<const Registry*> held;
  for (ReaderSlot* s = reader_slots.load(std::memory_order_acquire); s; s = s->next) {
    if (const Registry* hazard = s->hazard.load(std::memory_order_acquire)) held.push_back(hazard);
  }
  auto kept = std::partition(retired.begin(), retired.end(), [&](const Registry* version) {
    return std::find(held.begin(), held.end(), version) != held.end();
  });
  for (auto it = kept; it != retired.end(); ++it) delete *it;
  retired.erase(kept, retired.end());
}

// Publishes a copy of the registry without `d`'s entry, plus `added` if given, and frees what
// no reader holds any more.
void publish_registry(const mjData* d, std::optional<RegistryEntry> added) {
  std::lock_guard<std::mutex> lock(registry_writer_mutex);
  const Registry* current = registry.load(std::memory_order_relaxed);
  auto next = std::make_unique<Registry>();
  next->reserve(current->size() + 1);
  for (const RegistryEntry& entry : *current) {
    if (entry.data != d) next->push_back(entry);
  }
  if (added) next->push_back(std::move(*added));
  retired.push_back(current);  // before the store: a failed push_back leaves the old version
  registry.store(next.release(), std::memory_order_seq_cst);
  if (writer_fence()) reclaim();
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
  const char* lost = !control_owned()   ? "mjcb_control"
                     : !passive_owned() ? "mjcb_passive"
                                        : nullptr;
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
