// GlContext: one headless OpenGL context for MuJoCo's renderer (EGL by default, OSMesa when
// MUJOCO_GL=osmesa). The libraries are dlopen'ed at runtime, so the extension builds and imports
// without GL development packages; only creating a context needs libEGL.so.1 (or libOSMesa).
// It owns nothing of MuJoCo (the mjrContext is RenderCore's) and must be created, made current,
// used and destroyed on one thread: the render thread.
#pragma once

#include <memory>
#include <string>

namespace mjfast {

class GlContext {
 public:
  virtual ~GlContext() = default;
  // Makes the context current on the calling thread (needed before any mjr_* call).
  virtual void make_current() = 0;
  virtual const char* backend() const = 0;

  // Creates the context for the backend MUJOCO_GL names ("egl" when unset; "osmesa"). The
  // largest framebuffer is only needed by OSMesa, which renders into client memory. Throws
  // std::runtime_error saying what is missing.
  static std::unique_ptr<GlContext> create(int max_width, int max_height);
};

}  // namespace mjfast
