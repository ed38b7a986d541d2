// Small MuJoCo models compiled from MJCF text, for the C++ tests that need a real model and data.
#pragma once

#include <gtest/gtest.h>
#include <mujoco/mujoco.h>

#include <memory>
#include <string>

namespace mjfast::test_models {

struct ModelDeleter {
  void operator()(mjModel* m) const { mj_deleteModel(m); }
};
struct DataDeleter {
  void operator()(mjData* d) const { mj_deleteData(d); }
};
using ModelPtr = std::unique_ptr<mjModel, ModelDeleter>;
using DataPtr = std::unique_ptr<mjData, DataDeleter>;

// One hinge, driven by a motor, with a position sensor: nq = nv = nu = nsensordata = 1, nbody = 2.
inline constexpr const char* kHingeXml = R"(
<mujoco>
  <worldbody>
    <body name="link">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge"/></actuator>
  <sensor><jointpos joint="hinge"/></sensor>
</mujoco>)";

inline ModelPtr compile(const char* xml = kHingeXml) {
  char error[1000] = "";
  mjSpec* spec = mj_parseXMLString(xml, nullptr, error, sizeof(error));
  if (spec == nullptr) {
    ADD_FAILURE() << "MJCF does not parse: " << error;
    return nullptr;
  }
  ModelPtr model(mj_compile(spec, nullptr));
  if (!model) ADD_FAILURE() << "MJCF does not compile: " << mjs_getError(spec);
  mj_deleteSpec(spec);
  return model;
}

inline DataPtr make_data(const mjModel* model) { return DataPtr(mj_makeData(model)); }

}  // namespace mjfast::test_models
