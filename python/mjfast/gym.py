"""`mjfast.gym`: Gymnasium's API over an env and over many worlds (SPEC §21). Its public path; the
code is `mjfast.interop.gym`, and importing this module puts that one in its place, so the two
names are one module.
"""

import sys
from typing import TYPE_CHECKING

from mjfast.interop import gym as _module

if TYPE_CHECKING:
    from mjfast.interop.gym import *  # noqa: F403

sys.modules[__name__] = _module
