"""``xform.scipy``: the parts of SciPy's API that JAX provides (``linalg``, ``special``,
``stats``, ``sparse``, ``signal``, ``fft``, ``integrate``, ``ndimage``, ``optimize``,
``cluster``, ``interpolate``, ``spatial``)."""
from xform.scipy import linalg  # noqa: F401
from xform.scipy import special  # noqa: F401
from xform.scipy import stats  # noqa: F401
from xform.scipy import sparse  # noqa: F401
from xform.scipy import signal  # noqa: F401
from xform.scipy import fft  # noqa: F401
from xform.scipy import integrate  # noqa: F401
from xform.scipy import ndimage  # noqa: F401
from xform.scipy import optimize  # noqa: F401
from xform.scipy import cluster  # noqa: F401
from xform.scipy import interpolate  # noqa: F401
from xform.scipy import spatial  # noqa: F401
