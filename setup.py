"""Package discovery for the one import package, `webarena_live` (see pyproject.toml).

The repository root is `webarena_live`, so its sub-packages are `addon/` and
`evaluator/` and everything below them; setuptools cannot prefix discovered
names from pyproject.toml alone, so they are found here, not listed. This
file sits in the package's own folder and is kept out of the wheel.
"""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if not (package == "webarena_live" and m[1] == "setup")]


subpackages = find_packages(include=["addon", "addon.*", "evaluator", "evaluator.*"])
setup(
    packages=["webarena_live", *(f"webarena_live.{name}" for name in subpackages)],
    cmdclass={"build_py": BuildPy},
)
