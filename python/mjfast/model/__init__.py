"""The model layer: what a compiled MuJoCo model and its data say and how they are changed —
names, the model's summary, joints, kinematics, options, geometry, randomisation and the
simulation state. It knows no env, no plugin and no bus; every layer above may use it.
"""
