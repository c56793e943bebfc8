"""Repository-wide pytest setup.

Where Julia is available, juliacall must be imported before Numba (both load
LLVM): start it here, before any test module imports this package.  Where
it is not, nothing happens and the live parity tests skip themselves.
"""

from parity.bridge import julia, julia_available

if julia_available()[0]:
    julia()
