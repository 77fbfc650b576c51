"""``kvstats.models.capture`` is the function whatever was imported before: its module is
``kv_capture``, so importing the module (for ``Capture``) cannot rebind the package's name
to a module (it did while the module was ``capture.py``: order-dependent failures)."""

import subprocess
import sys


def test_capture_is_the_function_after_the_module_was_imported():
    code = ("from kvstats.models.kv_capture import Capture\n"
            "import kvstats.models\n"
            "from kvstats.models import capture\n"
            "assert callable(capture) and capture.__name__ == 'capture', capture\n"
            "assert kvstats.models.capture is capture\n")
    subprocess.run([sys.executable, "-c", code], check=True)
