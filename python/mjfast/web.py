"""`mjfast.web`: the browser viewer (SPEC §22). Its public path; the code is `mjfast.view.web`, and
importing this module puts that one in its place, so the two names are one module.
"""

import sys
from typing import TYPE_CHECKING

from mjfast.view import web as _module

if TYPE_CHECKING:
    from mjfast.view.web import *  # noqa: F403

sys.modules[__name__] = _module
