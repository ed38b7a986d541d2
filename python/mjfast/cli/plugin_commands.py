"""`mjfast plugins` (the discovered plugin types) and `mjfast new-plugin` (a package to start
from, `mjfast.templates`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from mjfast.cli.errors import EXIT_OK, CliError, import_mjfast


def plugins(out: TextIO, err: TextIO) -> int:
    from mjfast.plugin.discovery import plugin_types

    import_mjfast()
    types = plugin_types()
    if not types:
        out.write("no plugin types found\n")
        return EXIT_OK
    header = ["type", "kind", "distribution"]
    rows = [[t.name, t.kind if t.error is None else "BROKEN", t.distribution] for t in types]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        out.write("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n")
    for t in types:
        if t.error is not None:
            err.write(f"mjfast: warning: plugin type '{t.name}' ({t.distribution}): entry point "
                      f"'{t.value}' fails to import: {t.error}\n")
    return EXIT_OK


def new_plugin(args: argparse.Namespace, out: TextIO) -> int:
    from mjfast.templates import write_plugin_package

    try:
        written = write_plugin_package(args.name, args.kind, Path(args.dir), args.class_name)
    except (ValueError, FileExistsError) as error:
        raise CliError(str(error)) from error
    except OSError as error:
        raise CliError(f"cannot write the package: {error}") from error
    out.write(written.summary() + "\n")
    return EXIT_OK
