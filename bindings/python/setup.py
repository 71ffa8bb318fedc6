"""setup.py: builds liboxidize (or takes one already built) and installs it inside the package,
so `import oxidize` finds it beside its modules.

Where the library comes from, first match:
  OX_LIBRARY=/path/to/liboxidize.so   that file;
  the checkout's CMake build           <repo>/build-python (configured and built here, Release,
                                       CPU only; CUDA=1 in the environment adds the CUDA backend).
"""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def built_library() -> Path:
    given = os.environ.get("OX_LIBRARY")
    if given:
        return Path(given)
    build = REPO / "build-python"
    cuda = "ON" if os.environ.get("CUDA") == "1" else "OFF"
    subprocess.check_call(["cmake", "-S", str(REPO), "-B", str(build),
                           "-DCMAKE_BUILD_TYPE=Release", f"-DOX_CUDA={cuda}"],
                          stdout=subprocess.DEVNULL)
    jobs = str(os.cpu_count() or 2)
    subprocess.check_call(["cmake", "--build", str(build), "-j", jobs, "--target", "oxidize"],
                          stdout=subprocess.DEVNULL)
    return build / "liboxidize.so"


class BuildWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "oxidize" / "liboxidize.so"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built_library().resolve(), target)


setup(cmdclass={"build_py": BuildWithLibrary})
