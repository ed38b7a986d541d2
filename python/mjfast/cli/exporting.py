"""`mjfast export-urdf MODEL [-o FILE]` (SPEC §24): any model (MJCF or URDF) written as URDF,
its meshes as STL files beside FILE (in `<stem>_meshes/`), or the URDF on stdout with the meshes
in the cache directory. The writing is `mjfast.model.urdf_export`'s.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from mjfast.cli.errors import EXIT_OK, CliError, bad_input_is_one_line
from mjfast.cli.running import model_file


def export_urdf(args: argparse.Namespace, out: TextIO) -> int:
    from mjfast.model.urdf_export import export_urdf, mesh_cache_dir
    from mjfast.sim.config import ModelSource

    model_path = model_file(args)
    if not Path(model_path).is_file():
        raise CliError(f"model file not found: {args.model}")
    target = Path(args.output) if args.output else None
    with bad_input_is_one_line():
        model = ModelSource.of(model_path).compile()
        mesh_dir = target.parent / f"{target.stem}_meshes" if target else mesh_cache_dir()
        text = export_urdf(model, mesh_dir=mesh_dir)
        if target is None:
            out.write(text)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    return EXIT_OK
