"""The interop layer: mjfast as others see it — ROS 2 (`ros2`), recording and replay
(`record`), the remote bus (`remote`), Gymnasium (`gym`) and Ray (`ray`). Each is an optional
extra: `import mjfast` imports none of them.
"""
