"""`mjfast.remote`: the bus over Zenoh, `mjfast serve` and its clients (SPEC §15). Its public path;
the code is `mjfast.interop.remote`, and importing this module puts that one in its place, so the
two names are one module.
"""

import sys
from typing import TYPE_CHECKING

from mjfast.interop import remote as _module

if TYPE_CHECKING:
    from mjfast.interop.remote import *  # noqa: F403

sys.modules[__name__] = _module
