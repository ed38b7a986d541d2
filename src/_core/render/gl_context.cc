#include "render/gl_context.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace mjfast {
namespace {

// The few EGL names used here (values from the Khronos headers, which need not be installed).
using EGLDisplay = void*;
using EGLConfig = void*;
using EGLContext = void*;
using EGLSurface = void*;
using EGLDeviceEXT = void*;
using EGLint = std::int32_t;
using EGLBoolean = unsigned int;
using EGLenum = unsigned int;

constexpr EGLint kEglNone = 0x3038;
constexpr EGLint kEglSuccess = 0x3000;
constexpr EGLint kEglRedSize = 0x3024;
constexpr EGLint kEglGreenSize = 0x3023;
constexpr EGLint kEglBlueSize = 0x3022;
constexpr EGLint kEglAlphaSize = 0x3021;
constexpr EGLint kEglDepthSize = 0x3025;
constexpr EGLint kEglStencilSize = 0x3026;
constexpr EGLint kEglColorBufferType = 0x303F;
constexpr EGLint kEglRgbBuffer = 0x308E;
constexpr EGLint kEglSurfaceType = 0x3033;
constexpr EGLint kEglPbufferBit = 0x0001;
constexpr EGLint kEglRenderableType = 0x3040;
constexpr EGLint kEglOpenglBit = 0x0008;
constexpr EGLenum kEglOpenglApi = 0x30A2;
constexpr EGLenum kEglPlatformDeviceExt = 0x313F;

struct EglApi {
  void* (*GetProcAddress)(const char*) = nullptr;
  EGLDisplay (*GetDisplay)(void*) = nullptr;
  EGLBoolean (*Initialize)(EGLDisplay, EGLint*, EGLint*) = nullptr;
  EGLBoolean (*Terminate)(EGLDisplay) = nullptr;
  EGLBoolean (*ChooseConfig)(EGLDisplay, const EGLint*, EGLConfig*, EGLint, EGLint*) = nullptr;
  EGLBoolean (*BindAPI)(EGLenum) = nullptr;
  EGLContext (*CreateContext)(EGLDisplay, EGLConfig, EGLContext, const EGLint*) = nullptr;
  EGLBoolean (*DestroyContext)(EGLDisplay, EGLContext) = nullptr;
  EGLBoolean (*MakeCurrent)(EGLDisplay, EGLSurface, EGLSurface, EGLContext) = nullptr;
  EGLBoolean (*ReleaseThread)() = nullptr;
  EGLint (*GetError)() = nullptr;
  // Extensions, through eglGetProcAddress.
  EGLBoolean (*QueryDevicesEXT)(EGLint, EGLDeviceEXT*, EGLint*) = nullptr;
  EGLDisplay (*GetPlatformDisplayEXT)(EGLenum, void*, const EGLint*) = nullptr;
};

template <class Function>
void load_symbol(void* library, const char* name, Function& target) {
  target = reinterpret_cast<Function>(dlsym(library, name));
  if (!target) throw std::runtime_error(std::string("libEGL.so.1 lacks ") + name);
}

class EglContext final : public GlContext {
 public:
  EglContext() {
    // RTLD_GLOBAL: MuJoCo's GL loader looks the EGL entry points up by name in the process.
    library_ = dlopen("libEGL.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!library_) {
      throw std::runtime_error(
          "offscreen cameras need EGL: libEGL.so.1 could not be loaded (on Debian/Ubuntu: "
          "apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri), or set MUJOCO_GL=osmesa");
    }
    load_symbol(library_, "eglGetProcAddress", egl_.GetProcAddress);
    load_symbol(library_, "eglGetDisplay", egl_.GetDisplay);
    load_symbol(library_, "eglInitialize", egl_.Initialize);
    load_symbol(library_, "eglTerminate", egl_.Terminate);
    load_symbol(library_, "eglChooseConfig", egl_.ChooseConfig);
    load_symbol(library_, "eglBindAPI", egl_.BindAPI);
    load_symbol(library_, "eglCreateContext", egl_.CreateContext);
    load_symbol(library_, "eglDestroyContext", egl_.DestroyContext);
    load_symbol(library_, "eglMakeCurrent", egl_.MakeCurrent);
    load_symbol(library_, "eglReleaseThread", egl_.ReleaseThread);
    load_symbol(library_, "eglGetError", egl_.GetError);
    egl_.QueryDevicesEXT =
        reinterpret_cast<decltype(egl_.QueryDevicesEXT)>(egl_.GetProcAddress("eglQueryDevicesEXT"));
    egl_.GetPlatformDisplayEXT = reinterpret_cast<decltype(egl_.GetPlatformDisplayEXT)>(
        egl_.GetProcAddress("eglGetPlatformDisplayEXT"));

    display_ = open_display();
    if (!display_) {
      throw std::runtime_error(
          "EGL: no display could be initialised (is a Mesa or GPU EGL "
          "vendor installed? libegl-mesa0 provides a software one)");
    }
    // The same framebuffer configuration as mujoco.egl, so that frames match mujoco.Renderer.
    const EGLint attributes[] = {kEglRedSize,
                                 8,
                                 kEglGreenSize,
                                 8,
                                 kEglBlueSize,
                                 8,
                                 kEglAlphaSize,
                                 8,
                                 kEglDepthSize,
                                 24,
                                 kEglStencilSize,
                                 8,
                                 kEglColorBufferType,
                                 kEglRgbBuffer,
                                 kEglSurfaceType,
                                 kEglPbufferBit,
                                 kEglRenderableType,
                                 kEglOpenglBit,
                                 kEglNone};
    EGLConfig config = nullptr;
    EGLint count = 0;
    if (!egl_.ChooseConfig(display_, attributes, &config, 1, &count) || count < 1) {
      throw std::runtime_error("EGL: no framebuffer configuration with 8-bit RGBA, 24-bit depth");
    }
    egl_.BindAPI(kEglOpenglApi);
    context_ = egl_.CreateContext(display_, config, nullptr, nullptr);
    if (!context_) throw std::runtime_error("EGL: eglCreateContext failed");
  }

  ~EglContext() override {
    if (context_) {
      egl_.MakeCurrent(display_, nullptr, nullptr, nullptr);
      egl_.DestroyContext(display_, context_);
      egl_.ReleaseThread();
    }
    // The display is shared process-wide (eglInitialize is reference-free), so it stays; the
    // library stays loaded because MuJoCo's loader may hold pointers into it.
  }

  void make_current() override {
    if (!egl_.MakeCurrent(display_, nullptr, nullptr, context_)) {
      throw std::runtime_error("EGL: eglMakeCurrent failed");
    }
  }
  const char* backend() const override { return "egl"; }

 private:
  EGLDisplay open_display() {
    // Headless first: a display on an EGL device (GPU, or Mesa's software device), as mujoco.egl
    // does; then the default display.
    if (egl_.QueryDevicesEXT && egl_.GetPlatformDisplayEXT) {
      EGLint count = 0;
      if (egl_.QueryDevicesEXT(0, nullptr, &count) && count > 0) {
        std::vector<EGLDeviceEXT> devices(static_cast<std::size_t>(count));
        egl_.QueryDevicesEXT(count, devices.data(), &count);
        int first = 0;
        if (const char* chosen = std::getenv("MUJOCO_EGL_DEVICE_ID")) first = std::atoi(chosen);
        for (int i = first; i < count; ++i) {
          EGLDisplay display = egl_.GetPlatformDisplayEXT(
              kEglPlatformDeviceExt, devices[static_cast<std::size_t>(i)], nullptr);
          if (display && egl_.GetError() == kEglSuccess &&
              egl_.Initialize(display, nullptr, nullptr)) {
            return display;
          }
        }
      }
    }
    EGLDisplay display = egl_.GetDisplay(nullptr);
    if (display && egl_.Initialize(display, nullptr, nullptr)) return display;
    return nullptr;
  }

  void* library_ = nullptr;
  EglApi egl_;
  EGLDisplay display_ = nullptr;
  EGLContext context_ = nullptr;
};

class OsmesaContext final : public GlContext {
 public:
  OsmesaContext(int max_width, int max_height)
      : width_(max_width),
        height_(max_height),
        buffer_(static_cast<std::size_t>(max_width) * static_cast<std::size_t>(max_height) * 4) {
    for (const char* name : {"libOSMesa.so.8", "libOSMesa.so.6", "libOSMesa.so"}) {
      library_ = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
      if (library_) break;
    }
    if (!library_) {
      throw std::runtime_error(
          "MUJOCO_GL=osmesa but libOSMesa could not be loaded (on "
          "Debian/Ubuntu: apt-get install libosmesa6)");
    }
    create_ = reinterpret_cast<decltype(create_)>(dlsym(library_, "OSMesaCreateContextExt"));
    make_current_ = reinterpret_cast<decltype(make_current_)>(dlsym(library_, "OSMesaMakeCurrent"));
    destroy_ = reinterpret_cast<decltype(destroy_)>(dlsym(library_, "OSMesaDestroyContext"));
    if (!create_ || !make_current_ || !destroy_) {
      throw std::runtime_error("libOSMesa lacks OSMesaCreateContextExt/MakeCurrent");
    }
    constexpr unsigned kOsmesaRgba = 0x1908;  // GL_RGBA
    context_ = create_(kOsmesaRgba, 24, 8, 0, nullptr);
    if (!context_) throw std::runtime_error("OSMesa: OSMesaCreateContextExt failed");
  }
  ~OsmesaContext() override {
    if (context_) destroy_(context_);
  }
  void make_current() override {
    constexpr unsigned kGlUnsignedByte = 0x1401;
    if (!make_current_(context_, buffer_.data(), kGlUnsignedByte, width_, height_)) {
      throw std::runtime_error("OSMesa: OSMesaMakeCurrent failed");
    }
  }
  const char* backend() const override { return "osmesa"; }

 private:
  void* library_ = nullptr;
  void* (*create_)(unsigned, int, int, int, void*) = nullptr;
  unsigned char (*make_current_)(void*, void*, unsigned, int, int) = nullptr;
  void (*destroy_)(void*) = nullptr;
  void* context_ = nullptr;
  int width_;
  int height_;
  std::vector<unsigned char> buffer_;
};

}  // namespace

std::unique_ptr<GlContext> GlContext::create(int max_width, int max_height) {
  const char* requested = std::getenv("MUJOCO_GL");
  const std::string backend = requested && *requested ? requested : "egl";
  if (backend == "osmesa") return std::make_unique<OsmesaContext>(max_width, max_height);
  if (backend != "egl") {
    throw std::runtime_error("offscreen cameras render with EGL or OSMesa, but MUJOCO_GL=" +
                             backend + ": set MUJOCO_GL=egl (or osmesa)");
  }
  return std::make_unique<EglContext>();
}

}  // namespace mjfast
