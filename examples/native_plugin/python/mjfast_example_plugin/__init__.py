"""An example native mjfast plugin package: registers `mjfast_example/Spring`.

The plugin itself is C++ (src/spring.cc) compiled into libexample_plugins.so next to this file;
this module only names it for mjfast's discovery.
"""

from __future__ import annotations

from mjfast import NativePlugin

__all__ = ["Spring"]

Spring = NativePlugin("libexample_plugins.so", "Spring")
