import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # fake_server
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the package

from fake_server import FakeServer  # noqa: E402


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s
