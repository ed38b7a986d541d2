/* The PD law of mjfast/PDController as a bare mjcb_control callback (no limits configured). */
#include <mujoco/mujoco.h>

#define MAX_JOINTS 64
static int count;
static int qpos_adr[MAX_JOINTS], dof_adr[MAX_JOINTS], actuator[MAX_JOINTS];
static double kp[MAX_JOINTS], kd[MAX_JOINTS], target[MAX_JOINTS];

void pd_configure(int n, const int* qpos, const int* dof, const int* act, const double* p,
                  const double* d, const double* t) {
  count = n < MAX_JOINTS ? n : MAX_JOINTS;
  for (int i = 0; i < count; ++i) {
    qpos_adr[i] = qpos[i];
    dof_adr[i] = dof[i];
    actuator[i] = act[i];
    kp[i] = p[i];
    kd[i] = d[i];
    target[i] = t[i];
  }
}

void pd_control(const mjModel* m, mjData* d) {
  (void)m;
  for (int i = 0; i < count; ++i) {
    d->ctrl[actuator[i]] = kp[i] * (target[i] - d->qpos[qpos_adr[i]]) - kd[i] * d->qvel[dof_adr[i]];
  }
}
