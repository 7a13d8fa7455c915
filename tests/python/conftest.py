"""Shared set-up of the Python package's tests (docs/python.md, docs/testing.md).

PCC_BIN names the build folder (its pcc, pcc-run and python/ with the
package); ctest sets it. PCC_SOURCE_DIR names the checkout (default: two
folders up)."""

import os
import sys

import pytest

SOURCE_DIR = os.environ.get("PCC_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.abspath(os.environ.get("PCC_BIN", os.path.join(SOURCE_DIR, "build")))
# The package as the build assembled it (BUILD/python/pcc), ahead of any other.
sys.path.insert(0, os.path.join(BIN, "python"))


@pytest.fixture(scope="session")
def source_dir():
    return SOURCE_DIR


@pytest.fixture(scope="session")
def bin_dir():
    return BIN


def tool(name):
    """\\returns the path of a built tool (pcc, pcc-run, pcc-report)."""
    return os.path.join(BIN, name)
