"""The metadata lives in setup.cfg. The build step copies the top-level templates/ into the package,
so a wheel ships them as launcher/templates/ (a checkout reads them where they are)."""
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithTemplates(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "launcher" / "templates"
        target.mkdir(parents=True, exist_ok=True)
        for template in sorted(Path(__file__).resolve().parent.joinpath("templates").glob("*.j2")):
            self.copy_file(str(template), str(target / template.name))


setup(cmdclass={"build_py": BuildWithTemplates})
