"""`mjfast.ray`: envs on a Ray cluster (SPEC §17). Its public path; the code is
`mjfast.interop.ray`, and importing this module puts that one in its place, so the two names are one
module.
"""

import sys
from typing import TYPE_CHECKING

from mjfast.interop import ray as _module

if TYPE_CHECKING:
    from mjfast.interop.ray import *  # noqa: F403

sys.modules[__name__] = _module
