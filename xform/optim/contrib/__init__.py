"""Contributed optimizers (``optax.contrib``): Muon, SAM, AdEMAMix, Prodigy, Schedule-Free,
D-Adaptation, Mechanic, COCOB, DoG/DoWG, MoMo, reduce-on-plateau and friends.

Example:
    >>> import xform.numpy as jnp, xform.optim as optax
    >>> tx = optax.contrib.ademamix(1e-2)
    >>> tx.init({'w': jnp.ones(2)})[0]._fields
    ('count', 'count_m2', 'm1', 'm2', 'nu')
"""
from xform.optim.contrib._muon import (  # noqa: F401
    MuonDimensionNumbers, MuonState, muon, scale_by_muon)
from xform.optim.contrib._sam import NormalizeState, SAMState, normalize, sam  # noqa: F401
from xform.optim.contrib._ademamix import (  # noqa: F401
    ScaleByAdemamixState, ScaleBySimplifiedAdEMAMixState, ademamix, scale_by_ademamix,
    scale_by_simplified_ademamix, simplified_ademamix)
from xform.optim.contrib._dadapt import (  # noqa: F401
    DAdaptAdamWState, ProdigyState, dadapt_adamw, prodigy)
from xform.optim.contrib._schedule_free import (  # noqa: F401
    ScheduleFreeState, schedule_free, schedule_free_adamw, schedule_free_eval_params,
    schedule_free_sgd)
from xform.optim.contrib._mechanic import MechanicState, mechanize  # noqa: F401
from xform.optim.contrib._cocob import COCOBState, cocob, scale_by_cocob  # noqa: F401
from xform.optim.contrib._dog import DoGState, DoWGState, dog, dowg  # noqa: F401
from xform.optim.contrib._reduce_on_plateau import (  # noqa: F401
    ReduceLROnPlateauState, reduce_on_plateau)
from xform.optim.contrib._momo import MomoAdamState, MomoState, momo, momo_adam  # noqa: F401
from xform.optim.contrib._adaptive import (  # noqa: F401
    MadgradState, acprop, adopt, madgrad, scale_by_acprop, scale_by_adopt, scale_by_madgrad)
from xform.optim.contrib._complex_valued import (  # noqa: F401
    SplitRealAndImaginaryState, split_real_and_imaginary)
from xform.optim.contrib._privacy import (  # noqa: F401
    DifferentiallyPrivateAggregateState, differentially_private_aggregate, dpsgd)
from xform.optim.contrib._sophia import (  # noqa: F401
    HutchinsonState, SophiaState, hutchinson_estimator_diag_hessian, sophia)
from xform.optim.contrib._galore import (  # noqa: F401
    GaLoreDimensionNumbers, GaLoreState, galore, scale_by_galore)
