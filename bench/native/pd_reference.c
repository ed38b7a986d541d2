/* The PD law of mjfast/PDController as a bare mjcb_control callback: the same arithmetic, the
 * same clamp to each actuator's control range (PDController's default on a ctrllimited model). */
#include <mujoco/mujoco.h>

#define MAX_JOINTS 64
static int count;
static int qpos_adr[MAX_JOINTS], dof_adr[MAX_JOINTS], actuator[MAX_JOINTS];
static double kp[MAX_JOINTS], kd[MAX_JOINTS], target[MAX_JOINTS];
static double lower[MAX_JOINTS], upper[MAX_JOINTS];

void pd_configure(int n, const int* qpos, const int* dof, const int* act, const double* p,
                  const double* d, const double* t, const double* lo, const double* hi) {
  count = n < MAX_JOINTS ? n : MAX_JOINTS;
  for (int i = 0; i < count; ++i) {
    qpos_adr[i] = qpos[i];
    dof_adr[i] = dof[i];
    actuator[i] = act[i];
    kp[i] = p[i];
    kd[i] = d[i];
    target[i] = t[i];
    lower[i] = lo[i];
    upper[i] = hi[i];
  }
}

void pd_control(const mjModel* m, mjData* d) {
  (void)m;
  for (int i = 0; i < count; ++i) {
    double u = kp[i] * (target[i] - d->qpos[qpos_adr[i]]) - kd[i] * d->qvel[dof_adr[i]];
    /* std::clamp's order: below the lower bound gives it, then above the upper. */
    d->ctrl[actuator[i]] = u < lower[i] ? lower[i] : (upper[i] < u ? upper[i] : u);
  }
}
