"""`mjfast.recording`: recording, reading and replaying bags (SPEC §20). Its public path; the code
is `mjfast.interop.record.recorder`, and importing this module puts that one in its place, so the
two names are one module.
"""

import sys
from typing import TYPE_CHECKING

from mjfast.interop.record import recorder as _module

if TYPE_CHECKING:
    from mjfast.interop.record.recorder import *  # noqa: F403

sys.modules[__name__] = _module
