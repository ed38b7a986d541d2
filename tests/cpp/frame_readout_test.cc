// Filling frames from an OpenGL readout (frame_store.h): the row flip, depth linearisation and
// segment decoding that RenderCore's render thread applies, checked without GL.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "render/frame_store.h"

namespace mjfast {
namespace {

TEST(FrameReadout, CopyFlippedPutsTheBottomRowFirstAndKeepsEachRow) {
  // 3 rows of 2 pixels of 2 channels, as OpenGL reads them: the bottom row first.
  const std::vector<std::int32_t> source{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<std::int32_t> target(source.size(), 0);
  copy_flipped(source.data(), target.data(), 2, 3, 2);
  EXPECT_EQ(target, (std::vector<std::int32_t>{9, 10, 11, 12, 5, 6, 7, 8, 1, 2, 3, 4}));
}

TEST(FrameReadout, CopyFlippedOfOneRowIsACopy) {
  const std::vector<unsigned char> source{10, 20, 30, 40, 50, 60};
  std::vector<unsigned char> target(source.size(), 0);
  copy_flipped(source.data(), target.data(), 2, 1, 3);
  EXPECT_EQ(target, source);
}

TEST(FrameReadout, LinearisedDepthSpansTheClipPlanes) {
  // Reversed Z: 1 is the near plane, 0 the far one.
  constexpr float kNear = 0.05f;
  constexpr float kFar = 50.0f;
  for (bool orthographic : {false, true}) {
    std::vector<float> depth{1.0f, 0.0f};
    linearise_depth(depth.data(), depth.size(), kNear, kFar, orthographic);
    EXPECT_NEAR(depth[0], kNear, 1e-6) << "orthographic " << orthographic;
    EXPECT_NEAR(depth[1], kFar, 1e-4) << "orthographic " << orthographic;
  }
}

TEST(FrameReadout, LinearisedDepthIsPerspectiveOrLinearBetweenThePlanes) {
  constexpr double kNear = 0.5;
  constexpr double kFar = 10.0;
  std::vector<float> perspective{0.5f};
  linearise_depth(perspective.data(), 1, kNear, kFar, false);
  // Halfway in reversed-Z perspective depth is the harmonic mean of the planes.
  EXPECT_NEAR(perspective[0], 2 * kNear * kFar / (kNear + kFar), 1e-5);
  std::vector<float> orthographic{0.5f};
  linearise_depth(orthographic.data(), 1, kNear, kFar, true);
  EXPECT_NEAR(orthographic[0], (kNear + kFar) / 2, 1e-5);
}

TEST(FrameReadout, DecodeSegmentsLooksUpEachColourAndFallsBackToTheBackground) {
  // Entries: 0 background (-1, -1); 1 geom 7; 258 body 3 (the colour's three bytes, low first).
  std::vector<std::int32_t> objects(259 * 2, -1);
  objects[1 * 2] = 7;
  objects[1 * 2 + 1] = 5;
  objects[258 * 2] = 3;
  objects[258 * 2 + 1] = 1;
  const std::vector<unsigned char> colours{
      0, 0, 0,  // background
      1, 0, 0,  // entry 1
      2, 1, 0,  // entry 258
      0, 0, 1,  // 65536: past the table, so background
  };
  std::vector<std::int32_t> pairs(4 * 2, 0);
  decode_segments(colours.data(), 4, objects, pairs.data());
  EXPECT_EQ(pairs, (std::vector<std::int32_t>{-1, -1, 7, 5, 3, 1, -1, -1}));
}

}  // namespace
}  // namespace mjfast
