"""The wheel's build hook: the bundled demo sweep, unpacked from its archive into the package.

The repository keeps the demo as ``reports/sweeps/<id>.tar.xz``, like every sweep; the wheel ships
it as the folder ``nsys_tools/demo/sweep``, unpacked here with the same checks as any archive.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        sys.path.insert(0, self.root)  # nsys_tools.archives and .resources: standard library only
        try:
            from nsys_tools import archives
            from nsys_tools.resources import DEMO_SWEEP
        finally:
            sys.path.remove(self.root)
        self._work = tempfile.mkdtemp(prefix="nsys-tools-build-")
        archive = Path(self.root, "reports", "sweeps", f"{DEMO_SWEEP}{archives.SUFFIX}")
        build_data["force_include"][str(archives.unpack(archive, self._work))] = "nsys_tools/demo/sweep"

    def finalize(self, version, build_data, artifact_path):
        shutil.rmtree(self._work, ignore_errors=True)
