"""The simulation layer: the env and its parts (configuration, reports, the requests its core
makes of it, interrupts, the recording tap), the plugin host and MuJoCo's hooks, the control
interface, cameras, the simulation-control services and many worlds (`vector_env`). It uses the
model, plugin and bus layers; interop, view and the CLI use it.
"""
