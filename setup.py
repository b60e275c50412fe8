"""Builds locost's Python module, and the `locost` tool that pip installs as a command, through
CMake (python/CMakeLists.txt, tools/) for `pip install .` and `pip wheel .`.

Both are compiled like the project's own programs: Release, -O3, portable (the CPU kernels pick
their level at run time, so a wheel runs on other machines at full speed); LOCOST_NATIVE=ON in the
environment compiles for this machine alone (-march=native). CMAKE_ARGS adds CMake
options; LOCOST_BUILD_JOBS sets the parallel jobs (default: all cores); LOCOST_PYTHON_BUILD_DIR
puts CMake's build tree there (default: under setuptools' build_temp); LOCOST_PIP_TOOL=OFF builds
the module alone. Each step is announced, and CMake's own lines follow (pip shows them with -v).
"""
import os
import shlex
import shutil
import subprocess
import sys
import time

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        package_dir = os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name)))
        build_dir = os.path.abspath(os.environ.get("LOCOST_PYTHON_BUILD_DIR") or os.path.join(self.build_temp, "cmake"))
        os.makedirs(build_dir, exist_ok=True)
        tool = os.environ.get("LOCOST_PIP_TOOL", "ON").upper() not in ("OFF", "0", "NO", "FALSE")
        args = [
            "cmake", "-S", HERE, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
            "-DLOCOST_PYTHON=ON", "-DLOCOST_BUILD_TESTS=OFF", "-DLOCOST_BUILD_EXAMPLES=OFF",
            f"-DLOCOST_BUILD_TOOLS={'ON' if tool else 'OFF'}",
            "-DLOCOST_BUILD_BENCH=OFF", "-DLOCOST_SANITIZE_IO=OFF",
            f"-DPython_EXECUTABLE={sys.executable}", f"-DLOCOST_PYTHON_PACKAGE_DIR={package_dir}",
            f"-DLOCOST_NATIVE={os.environ.get('LOCOST_NATIVE', 'OFF')}",
        ]
        if subprocess.run(["sh", "-c", "command -v ninja"], capture_output=True).returncode == 0:
            args += ["-G", "Ninja"]
        if subprocess.run(["sh", "-c", "command -v ccache"], capture_output=True).returncode == 0:
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        start = time.monotonic()
        say(f"configuring with CMake in {build_dir}")
        subprocess.run(args, check=True)
        jobs = os.environ.get("LOCOST_BUILD_JOBS", str(os.cpu_count() or 1))
        targets = ["locost_python"] + (["locost_cli"] if tool else [])
        say(f"compiling {' and '.join(targets)} with {jobs} jobs: about 10 minutes on 2 cores, less with ccache warm")
        subprocess.run(["cmake", "--build", build_dir, "--target", *targets, "-j", jobs], check=True)
        if tool:
            # The tool inside the package, with its data where it looks for them (../share/locost).
            os.makedirs(os.path.join(package_dir, "bin"), exist_ok=True)
            shutil.copy2(os.path.join(build_dir, "bin", "locost"), os.path.join(package_dir, "bin", "locost"))
            shutil.copytree(os.path.join(build_dir, "share", "locost"), os.path.join(package_dir, "share", "locost"), dirs_exist_ok=True)
        say(f"built in {time.monotonic() - start:.0f} s")


def say(what):
    print(f"locost setup: {what}", file=sys.stderr, flush=True)


setup(
    packages=["locost"],
    package_dir={"locost": "python/locost"},
    package_data={"locost": ["__init__.pyi", "py.typed"]},
    ext_modules=[CMakeExtension("locost._locost")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
