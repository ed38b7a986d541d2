"""The browser viewer (SPEC §22): `env.launch_web_viewer()` and `mjfast serve|view --web`.

A page served by viser that shows a running env from any browser: the scene as it moves, the
plugins' geometry, the run's figures, Pause/Step/Reset and the open cameras' latest frames.
Nothing else in mjfast imports this package, so `import mjfast` works without the extra
`mjfast[web]` (viser); importing it without viser raises one ImportError line naming the extra.
"""

from __future__ import annotations

try:
    import viser as _viser  # noqa: F401
except ImportError as _error:
    raise ImportError(f"the browser viewer needs the extra mjfast[web]: pip install "
                      f"'mjfast[web]' ({_error})") from _error

from mjfast.view.web.viewer import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_RATE_HZ,
    WebViewer,
    launch_web_viewer,
)

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DEFAULT_RATE_HZ", "WebViewer", "launch_web_viewer"]
