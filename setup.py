"""Builds locost's Python module through CMake (python/CMakeLists.txt) for `pip install .`.

The extension is compiled like the project's own programs: Release, -O3, and -march=native
unless LOCOST_NATIVE=OFF is in the environment (a wheel for other machines). CMAKE_ARGS adds
CMake options; LOCOST_BUILD_JOBS sets the parallel jobs (default: all cores); LOCOST_PYTHON_BUILD_DIR
puts CMake's build tree there (default: under setuptools' build_temp).
"""
import os
import shlex
import subprocess
import sys

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
        args = [
            "cmake", "-S", HERE, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
            "-DLOCOST_PYTHON=ON", "-DLOCOST_BUILD_TESTS=OFF", "-DLOCOST_BUILD_EXAMPLES=OFF", "-DLOCOST_BUILD_TOOLS=OFF",
            "-DLOCOST_BUILD_BENCH=OFF", "-DLOCOST_SANITIZE_IO=OFF",
            f"-DPython_EXECUTABLE={sys.executable}", f"-DLOCOST_PYTHON_PACKAGE_DIR={package_dir}",
            f"-DLOCOST_NATIVE={os.environ.get('LOCOST_NATIVE', 'ON')}",
        ]
        if subprocess.run(["sh", "-c", "command -v ninja"], capture_output=True).returncode == 0:
            args += ["-G", "Ninja"]
        if subprocess.run(["sh", "-c", "command -v ccache"], capture_output=True).returncode == 0:
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        subprocess.run(args, check=True)
        jobs = os.environ.get("LOCOST_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", build_dir, "--target", "locost_python", "-j", jobs], check=True)


setup(
    packages=["locost"],
    package_dir={"locost": "python/locost"},
    package_data={"locost": ["__init__.pyi", "py.typed"]},
    ext_modules=[CMakeExtension("locost._locost")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
