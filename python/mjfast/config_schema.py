"""`mjfast.config_schema`: the types of a plugin's `config_schema` (SPEC §2). Its public path; the
code is `mjfast.plugin.schema`, and importing this module puts that one in its place, so the two
names are one module.
"""

import sys
from typing import TYPE_CHECKING

from mjfast.plugin import schema as _module

if TYPE_CHECKING:
    from mjfast.plugin.schema import *  # noqa: F403

sys.modules[__name__] = _module
