"""The repository's folders, from one place, so a test module's depth under tests/ does not matter."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = os.path.join(ROOT, "tests")
FIXTURES = os.path.join(TESTS, "fixtures")
HELPERS = os.path.join(TESTS, "helpers")
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
SST2_DIR = os.path.join(SHARED_DATA, "sst2")
