"""Repository-wide pytest setup.

Where Julia is available, juliacall must be imported before Numba (both load
LLVM): start it here, before any test module imports this package.  Where
it is not, or it cannot start, nothing fails: the live parity tests skip
themselves with the reason.
"""

from parity.bridge import start_if_available

start_if_available()
