"""Written by the build: what mjfast._core was compiled against."""

MUJOCO_VERSION_BUILT = "4.0.0"
