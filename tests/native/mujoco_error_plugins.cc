// tests/MujocoError: makes MuJoCo raise a fatal error (mju_error) from the plugin code mjfast calls
// outside mj_step (issue 18, item 6), selected by `in`:
// - "update_read" / "update_write": in the control side's dispatch (env.control.read()/write());
// - "render": a render_callback that leaves the scene's near plane at 0, which mjr_render refuses
//   on the render thread (with geoms in the scene, mju_error "frustum_near too small");
// - "load", "on_reset", "call": on the user's thread (construction/reload, env.reset(), call()).
// `how: "stack"` fails inside a MuJoCo function instead (mj_stackAllocNum past the arena, after
// mj_markStack, as mj_kinematics would), leaving that data's stack marked; the default calls
// mju_error directly. `first_instance_only: true` fails only in the first instance made in the
// process (a reload's new instance then behaves).
#include <cstddef>
#include <mjfast/plugin.hpp>
#include <string>

namespace {

int instances = 0;

class MujocoError final : public mjfast::Plugin {
 public:
  explicit MujocoError(const mjfast::PluginContext& context)
      : Plugin(context),
        in_(config().string("in", "update_read")),
        how_(config().string("how", "mju_error")),
        active_(!config().boolean("first_instance_only", false) || instances == 0) {
    ++instances;
  }

  bool load(const mjModel*, mjData* d) override {
    if (in_ == "load") fail(d);
    return true;
  }
  void update_read(const mjModel*, mjData* d) override {
    if (in_ == "update_read") fail(d);
  }
  void update_write(const mjModel*, mjData* d) override {
    if (in_ == "update_write") fail(d);
  }
  void on_reset(const mjModel*, mjData* d) override {
    if (in_ == "on_reset") fail(d);
  }
  void render(const mjModel*, mjData*, mjvScene* scene) override {
    if (in_ != "render" || !active_) return;
    scene->camera[0].frustum_near = 0;
    scene->camera[1].frustum_near = 0;
  }
  std::string call(const std::string& command, const std::string& argument) override {
    if (in_ == "call" && command == "fail") fail(nullptr);
    return Plugin::call(command, argument);
  }

 private:
  void fail(mjData* d) const {
    if (!active_) return;
    if (how_ == "stack" && d != nullptr) {
      mj_markStack(d);
      mj_stackAllocNum(d, static_cast<std::size_t>(d->narena) / sizeof(mjtNum) + 1);
      mj_freeStack(d);  // not reached
      return;
    }
    mju_error("tests/MujocoError gave up in %s", in_.c_str());
  }

  std::string in_;
  std::string how_;
  bool active_;
};

}  // namespace

MJFAST_PLUGIN(MujocoError)
