"""The bus layer: mjfast's in-process topics and services (`node`) and the parameter server
(`params`), as ROS's graph and parameters are. It knows no env and no plugin.
"""
