"""`mjfast.ros2`: the ROS 2 bridge (SPEC §19). Its public path; the code is `mjfast.interop.ros2`,
and importing this module puts that one in its place, so the two names are one module.
"""

import sys
from typing import TYPE_CHECKING

from mjfast.interop import ros2 as _module

if TYPE_CHECKING:
    from mjfast.interop.ros2 import *  # noqa: F403

sys.modules[__name__] = _module
