"""Build entry point: all metadata is in setup.cfg.

pip reads ``python_requires`` only after it has resolved (and sometimes built) the dependencies,
so on Python 3.12 an install used to end in a numpy build error about ``distutils``. This check
runs first, when pip asks the build backend for the project's requirements.
"""
import sys

from setuptools import setup

if sys.version_info[:2] != (3, 11):
    sys.exit("gluon_cf needs Python 3.11, and this is Python %d.%d: MXNet 1.9.1 (the last MXNet "
             "release) and the numpy 1.23 it needs have no builds for newer Pythons. Create the "
             "virtual environment with python3.11, for example 'python3.11 -m venv .venv'."
             % sys.version_info[:2])

setup()
