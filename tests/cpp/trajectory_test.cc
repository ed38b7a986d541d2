// Trajectory and Pid: the sampled segments against the polynomials they must be, and
// joint_trajectory_controller's rules around them (the segment from the state before, the hold
// after the last point, the clamp outside a segment).
#include "control/trajectory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "control/pid.h"

namespace mjfast {
namespace {

struct Sample {
  double p = 0, v = 0, a = 0;
};

Sample sample1(const Trajectory& trajectory, double start, double t) {
  Sample s;
  EXPECT_TRUE(trajectory.sample(start, t, &s.p, &s.v, &s.a));
  return s;
}

TEST(TrajectoryTest, LinearSegmentsBetweenPositionOnlyPoints) {
  Trajectory trajectory;
  trajectory.assign(1, {1.0, 3.0}, {1.0, 5.0});
  trajectory.set_state_before(10.0, std::vector<double>{0.0}.data(), nullptr);
  // 10 .. 11: from the state before (0) to the first point (1); 11 .. 13: 1 -> 5.
  Sample s = sample1(trajectory, 10.0, 10.5);
  EXPECT_NEAR(s.p, 0.5, 1e-12);
  EXPECT_NEAR(s.v, 1.0, 1e-12);
  s = sample1(trajectory, 10.0, 12.0);
  EXPECT_NEAR(s.p, 3.0, 1e-12);
  EXPECT_NEAR(s.v, 2.0, 1e-12);
  EXPECT_EQ(s.a, 0.0);
}

TEST(TrajectoryTest, CubicSegmentMatchesItsPolynomial) {
  // p(t) = 1 + 0.5 t - 0.3 t^2 + 0.2 t^3 between t = 0 and t = 2 (its ends' positions and
  // velocities given): the cubic through them is that polynomial.
  auto p = [](double t) { return 1 + 0.5 * t - 0.3 * t * t + 0.2 * t * t * t; };
  auto v = [](double t) { return 0.5 - 0.6 * t + 0.6 * t * t; };
  auto a = [](double t) { return -0.6 + 1.2 * t; };
  Trajectory trajectory;
  trajectory.assign(1, {0.0, 2.0}, {p(0), p(2)}, {v(0), v(2)});
  trajectory.set_state_before(0.0, std::vector<double>{p(0)}.data(),
                              std::vector<double>{v(0)}.data());
  for (double t = 0.0; t < 2.0; t += 0.125) {
    const Sample s = sample1(trajectory, 0.0, t);
    EXPECT_NEAR(s.p, p(t), 1e-12) << t;
    EXPECT_NEAR(s.v, v(t), 1e-12) << t;
    EXPECT_NEAR(s.a, a(t), 1e-12) << t;
  }
}

TEST(TrajectoryTest, QuinticSegmentMatchesItsPolynomial) {
  auto p = [](double t) { return 0.2 - t + 0.4 * t * t + 0.1 * std::pow(t, 3) -
                                 0.05 * std::pow(t, 4) + 0.01 * std::pow(t, 5); };
  auto v = [](double t) { return -1 + 0.8 * t + 0.3 * t * t - 0.2 * std::pow(t, 3) +
                                 0.05 * std::pow(t, 4); };
  auto a = [](double t) { return 0.8 + 0.6 * t - 0.6 * t * t + 0.2 * std::pow(t, 3); };
  Trajectory trajectory;
  // Two joints, the second the negative of the first: per-joint coefficients.
  trajectory.assign(2, {0.5, 2.5}, {p(0), -p(0), p(2), -p(2)}, {v(0), -v(0), v(2), -v(2)},
                    {a(0), -a(0), a(2), -a(2)});
  trajectory.set_state_before(0.0, std::vector<double>{0.0, 0.0}.data(), nullptr);
  for (double t = 0.0; t < 2.0; t += 0.1) {
    double pos[2], vel[2], acc[2];
    // Started at 0.5: the points are at 1.0 and 3.0, so 1.0 + t is t into the segment.
    ASSERT_TRUE(trajectory.sample(0.5, 1.0 + t, pos, vel, acc));
    EXPECT_NEAR(pos[0], p(t), 1e-10) << t;
    EXPECT_NEAR(pos[1], -pos[0], 1e-12);
    EXPECT_NEAR(vel[0], v(t), 1e-10) << t;
    EXPECT_NEAR(acc[0], a(t), 1e-10) << t;
    EXPECT_NEAR(acc[1], -acc[0], 1e-12);
  }
}

TEST(TrajectoryTest, HoldsTheLastPointAtRestAndSamplesNothingBeforeTheStart) {
  Trajectory trajectory;
  trajectory.assign(1, {1.0}, {2.0}, {0.5});
  trajectory.set_state_before(0.0, std::vector<double>{0.0}.data(),
                              std::vector<double>{0.0}.data());
  double p = -1, v = -1, a = -1;
  EXPECT_FALSE(trajectory.sample(0.0, -0.1, &p, &v, &a));
  EXPECT_EQ(p, -1.0);  // nothing written
  Sample s = sample1(trajectory, 0.0, 5.0);
  EXPECT_EQ(s.p, 2.0);
  EXPECT_EQ(s.v, 0.0);
  EXPECT_EQ(s.a, 0.0);
}

TEST(TrajectoryTest, FirstSegmentIsCubicFromTheStateBeforeWhenPointsHaveVelocities) {
  // joint_trajectory_controller: the state before has positions and velocities, no
  // accelerations, so a quintic trajectory's first segment is cubic.
  Trajectory trajectory;
  trajectory.assign(1, {2.0}, {1.0}, {0.0}, {0.0});
  trajectory.set_state_before(0.0, std::vector<double>{0.0}.data(),
                              std::vector<double>{0.0}.data());
  // Cubic from (0, 0) to (1, 0) over 2 s: p(t) = 3 (t/2)^2 - 2 (t/2)^3.
  for (double t = 0.0; t < 2.0; t += 0.25) {
    const double x = t / 2.0;
    EXPECT_NEAR(sample1(trajectory, 0.0, t).p, 3 * x * x - 2 * x * x * x, 1e-12) << t;
  }
}

TEST(TrajectoryTest, WithoutInterpolationEachPointIsHeldUntilTheNext) {
  Trajectory trajectory;
  trajectory.assign(1, {1.0, 2.0}, {3.0, 5.0}, {0.5, 0.7});
  trajectory.set_interpolate(false);
  trajectory.set_state_before(0.0, std::vector<double>{0.0}.data(), nullptr);
  EXPECT_EQ(sample1(trajectory, 0.0, 0.5).p, 3.0);  // before the first point: the first point
  EXPECT_EQ(sample1(trajectory, 0.0, 1.5).p, 3.0);
  EXPECT_EQ(sample1(trajectory, 0.0, 1.5).v, 0.5);
  EXPECT_EQ(sample1(trajectory, 0.0, 2.5).p, 5.0);
  EXPECT_EQ(sample1(trajectory, 0.0, 2.5).v, 0.0);  // after the last: at rest
}

TEST(TrajectoryTest, SizesThatDoNotMatchAreRefusedAndChangeNothing) {
  Trajectory trajectory;
  trajectory.assign(2, {1.0}, {1.0, 2.0});
  EXPECT_THROW(trajectory.assign(2, {1.0, 2.0}, {1.0, 2.0, 3.0}), std::invalid_argument);
  EXPECT_THROW(trajectory.assign(2, {1.0}, {1.0, 2.0}, {1.0}), std::invalid_argument);
  EXPECT_EQ(trajectory.points(), 1u);
  EXPECT_EQ(trajectory.joints(), 2u);
}

TEST(PidTest, ProportionalIntegralClampedAndDerivative) {
  Pid pid({2.0, 10.0, 0.5, 0.3});
  EXPECT_NEAR(pid.compute(1.0, 0.0, 0.01), 2.0 + 0.1, 1e-12);
  // The integral saturates at i_clamp.
  for (int i = 0; i < 100; ++i) pid.compute(1.0, 0.0, 0.01);
  EXPECT_NEAR(pid.integral(), 0.3, 1e-12);
  EXPECT_NEAR(pid.compute(0.0, 2.0, 0.0), 0.3 + 1.0, 1e-12);
  pid.reset();
  EXPECT_EQ(pid.integral(), 0.0);
  // i_clamp 0 leaves no integral, as joint_trajectory_controller builds its PIDs.
  Pid no_clamp({0.0, 10.0, 0.0, 0.0});
  EXPECT_EQ(no_clamp.compute(1.0, 0.0, 0.1), 0.0);
}

}  // namespace
}  // namespace mjfast
