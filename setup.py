"""The package-dir mapping: one import name, ``kueue_es``, over the repository's top-level folders.

The design fixes the repository's top level (events/, projections/, services/,
...), while an installed kueue-es must not put generic names such as ``events``
into site-packages. So each folder is installed as a subpackage of
``kueue_es`` (events/ -> ``kueue_es.events``); kueue_es/ itself holds the
command line and the tools. Subpackages are found, not listed, so a new folder
with an ``__init__.py`` is packaged without touching this file.
"""

from setuptools import find_packages, setup

MAPPED = ("events", "projections", "scheduling", "jobframework", "services")

package_dir = {"kueue_es": "kueue_es"}
# kueue_es/events etc. are links to the mapped folders (so tools that walk kueue_es/, such as
# lint-imports run from the repository, see the whole package); they are packaged once, below
LINKED = [pattern for folder in MAPPED for pattern in (folder, f"{folder}.*")]
packages = ["kueue_es", *(f"kueue_es.{name}" for name in find_packages("kueue_es", exclude=LINKED))]
for folder in MAPPED:
    package_dir[f"kueue_es.{folder}"] = folder
    packages += [f"kueue_es.{folder}", *(f"kueue_es.{folder}.{name}" for name in find_packages(folder))]

setup(package_dir=package_dir, packages=packages)
