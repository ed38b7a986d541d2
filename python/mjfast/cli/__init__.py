"""The `mjfast` command line (SPEC §11, §15, §24): `demo`, `run MODEL`, `plugins`, `view MODEL`,
`serve MODEL`, `export-urdf MODEL`, and `topic` / `service` against a running server.

This module only dispatches a parsed command to the module named after it: `parsing` (every
command's arguments), `running` (`run`, `demo`), `progress`, `log_output`, `recording` (`--record`,
`replay`), `viewing` (`view`), `serving` (`serve`), `exporting` (`export-urdf`), `remote`
(`topic`, `service`), `plugin_commands` (`plugins`, `new-plugin`), `errors`. Everything it
simulates goes through `mjfast.MujocoEnv`. Bad input becomes one `mjfast: error: ...` line and a
non-zero exit status (2: usage, 1: runtime), never a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from mjfast.cli.errors import EXIT_INTERRUPTED, EXIT_RUNTIME, EXIT_USAGE, CliError
from mjfast.cli.exporting import export_urdf
from mjfast.cli.log_output import logging_to
from mjfast.cli.parsing import parser
from mjfast.cli.plugin_commands import new_plugin, plugins
from mjfast.cli.recording import replay
from mjfast.cli.remote import service, topic
from mjfast.cli.running import demo_files, export_demo, model_files, run
from mjfast.cli.serving import serve
from mjfast.cli.viewing import view

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line `argv` (default: sys.argv[1:]); returns the exit status."""
    out, err = sys.stdout, sys.stderr
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:  # --help, --version and usage errors
        return int(exit_.code) if isinstance(exit_.code, int) else EXIT_USAGE
    try:
        with logging_to(err, args.verbose, args.quiet):
            if args.command == "plugins":
                return plugins(out, err)
            if args.command == "new-plugin":
                return new_plugin(args, out)
            if args.command == "view":
                return view(args, out, err)
            if args.command == "serve":
                return serve(args, out, err)
            if args.command == "export-urdf":
                return export_urdf(args, out)
            if args.command == "replay":
                return replay(args, out, err)
            if args.command == "topic":
                return topic(args, out, err)
            if args.command == "service":
                return service(args, out)
            if args.command == "demo":
                if args.export is not None:
                    return export_demo(Path(args.export), out)
                model, params = demo_files()
                return run(model, params, args, out, err)
            return run(*model_files(args), args, out, err)
    except CliError as error:
        err.write(f"mjfast: error: {error}\n")
        return error.code
    except KeyboardInterrupt:
        err.write("\nmjfast: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `mjfast ... | head`: the reader left; say nothing more on a closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_RUNTIME
