"""``xform.nn.errors``: the module system's error classes, with Flax's names.

Each message names the module path (``/Encoder/Dense_0``) and says how to fix the
problem; the class names match ``flax.errors`` so ``except`` clauses port unchanged.
"""

__all__ = [
    "FlaxError", "ApplyModuleInvalidMethodError", "ApplyScopeInvalidVariablesStructureError",
    "ApplyScopeInvalidVariablesTypeError", "AssignSubModuleError",
    "CallCompactUnboundModuleError", "CallSetupUnboundModuleError",
    "CallUnbindOnUnboundModuleError", "InvalidFilterError", "InvalidRngError",
    "InvalidScopeError", "ModifyScopeVariableError",
    "NameInUseError", "PartitioningUnspecifiedError", "ScopeCollectionNotFound", "ScopeParamNotFoundError",
    "ScopeParamShapeError", "ScopeVariableNotFoundError", "SetAttributeFrozenModuleError",
    "SetAttributeInModuleSetupError", "InvalidInstanceModuleError",
    "UnboundSubmoduleError", "CursorFindError", "TraverseTreeError",
    "ReservedModuleAttributeError", "IncorrectPostInitOverrideError",
    "CallShareScopeOnUnboundModuleError", "TransformTargetError",
    "TransformedMethodReturnValueError", "DescriptorAttributeError"]


class FlaxError(Exception):
    """Base class of every ``xform.nn`` module-system error."""


class InvalidRngError(FlaxError):
    """An rng stream is missing or an rng is not a PRNG key.

    Fix: pass the stream to ``init``/``apply``, e.g. ``rngs={'dropout': key}``.
    """


class ScopeParamShapeError(FlaxError):
    """A stored parameter's shape differs from what the module's initializer makes.

    Usually the variables come from a differently configured module (other
    ``features``) or the input shape changed since ``init``. Fix: re-``init`` or
    restore matching variables.
    """

    def __init__(self, param_name, scope_path, value_shape, init_shape):
        super().__init__(
            f'For parameter "{param_name}" in "{scope_path}", the given initializer is '
            f'expected to generate shape {init_shape}, but the existing parameter it '
            f'received has shape {value_shape}. Re-run init() with the same module '
            f'configuration and input shapes, or pass matching variables.')


class ScopeCollectionNotFound(FlaxError):
    """A variable was read from a collection that was not passed to ``apply``.

    Fix: pass the variables returned by ``init`` (``module.apply(variables, x)``),
    including every collection the module reads (e.g. ``batch_stats``).
    """

    def __init__(self, col_name, var_name, scope_path):
        super().__init__(
            f'Tried to access "{var_name}" from collection "{col_name}" in '
            f'"{scope_path}" but the collection is empty. Pass the variables returned '
            f'by init() to apply(), e.g. module.apply({{"{col_name}": ...}}, x).')


class ScopeParamNotFoundError(FlaxError):
    """A parameter is absent from the ``params`` given to ``apply``."""

    def __init__(self, param_name, scope_path):
        super().__init__(
            f'Could not find parameter named "{param_name}" in scope "{scope_path}". '
            f'The params passed to apply() do not match this module\'s structure; '
            f'use the variables returned by init().')


class ScopeVariableNotFoundError(FlaxError):
    """A variable is absent from its (immutable) collection."""

    def __init__(self, name, col, scope_path):
        super().__init__(
            f'No Variable named "{name}" for collection "{col}" exists in '
            f'"{scope_path}". Initialize it with init(), or make "{col}" mutable '
            f'(apply(..., mutable=["{col}"])) so it can be created.')


class ApplyModuleInvalidMethodError(FlaxError):
    """``method=`` given to ``apply``/``init`` is not a function or method name."""

    def __init__(self, method):
        super().__init__(
            f'Cannot call apply(): {method} is not a valid function for apply(). Pass '
            f'a method of the module, its name as a string, or a function taking the '
            f'module as its first argument.')


class ModifyScopeVariableError(FlaxError):
    """A variable was written in a collection that is not mutable.

    Fix: ``apply(..., mutable=['batch_stats'])`` (then ``apply`` returns
    ``(out, updated_variables)``).
    """

    def __init__(self, col, variable_name, scope_path):
        super().__init__(
            f'Cannot update variable "{variable_name}" in "{scope_path}" because '
            f'collection "{col}" is immutable. Pass mutable=["{col}"] to apply() '
            f'and use the returned (output, updated_variables).')


class NameInUseError(FlaxError):
    """Two params, variables or submodules of one module share a name."""

    def __init__(self, key_type, value, module_name):
        super().__init__(
            f'Could not create {key_type} "{value}" in Module {module_name}: Name in '
            f'use. Give it a different name=.')


class AssignSubModuleError(FlaxError):
    """A submodule was created outside ``setup()`` or an ``@compact`` method."""

    def __init__(self, cls):
        super().__init__(
            f'Submodule {cls} must be defined in `setup()` or in a method wrapped in '
            f'`@compact`')


class CallCompactUnboundModuleError(FlaxError):
    """A module was called outside ``init``/``apply`` (it has no variables).

    Fix: ``variables = model.init(key, x); model.apply(variables, x)``, or
    ``model.bind(variables)`` for interactive use.
    """

    def __init__(self, module=None):
        what = f" ({module})" if module else ""
        super().__init__(
            f"Can't call compact methods on unbound modules{what}: a module only has "
            f"variables inside init()/apply(). Use module.init(key, x) and "
            f"module.apply(variables, x), or module.bind(variables).")


class CallSetupUnboundModuleError(CallCompactUnboundModuleError):
    """``setup()`` was called on a module outside ``init``/``apply``."""


class UnboundSubmoduleError(FlaxError, AttributeError):
    """A ``setup()``-defined submodule was accessed on an unbound module."""


class CallUnbindOnUnboundModuleError(FlaxError):
    """``unbind()`` was called on a module that is not bound."""

    def __init__(self):
        super().__init__("Can't call `unbind()` on unbound modules. Use module.bind("
                         "variables) first.")


class SetAttributeFrozenModuleError(FlaxError, TypeError):
    """Modules are frozen dataclasses outside ``setup()``."""

    def __init__(self, module_cls, attr_name, attr_val):
        super().__init__(
            f"Can't set {attr_name}={attr_val} for Module of type {module_cls}: Module "
            f"instance is frozen outside of setup method. Use module.clone("
            f"{attr_name}=...) for a modified copy.")


class SetAttributeInModuleSetupError(FlaxError):
    """A dataclass field was assigned inside ``setup()``."""

    def __init__(self):
        super().__init__("Module construction attributes are frozen: dataclass fields "
                         "cannot be reassigned in setup(); use another attribute name.")


class ApplyScopeInvalidVariablesTypeError(FlaxError):
    """``variables`` is not a dict of collections."""

    def __init__(self):
        super().__init__(
            'The first argument passed to an apply function should be a dictionary of '
            'collections. Each collection should be a dictionary with string keys.')


class ApplyScopeInvalidVariablesStructureError(FlaxError):
    """``variables`` has an extra ``params`` level (``{'params': {'params': ...}}``)."""

    def __init__(self, variables=None):
        super().__init__(
            'Expect the `variables` (first argument) passed to apply() to be a dict '
            'with the structure {"params": ...}, but got a dict with an extra params '
            'layer, i.e.  {"params": {"params": ... } }. You should instead pass in '
            'your dict\'s ["params"].')


class InvalidInstanceModuleError(FlaxError):
    """``init``/``apply`` was called on the Module class rather than an instance."""

    def __init__(self):
        super().__init__(
            'Can only call init, init_with_output or apply methods on an instance of '
            'the Module class, not the Module class itself')


class PartitioningUnspecifiedError(FlaxError):
    """A lifted ``scan``/``vmap`` added or removed an axis of a ``Partitioned`` variable
    without naming it. Fix: pass ``metadata_params={nn.PARTITION_NAME: 'layers'}``."""

    def __init__(self, target):
        super().__init__(f"Trying to transform a Partitioned variable but no axis name was "
                         f"given: pass metadata_params={{nn.PARTITION_NAME: ...}} to the "
                         f"lifted transform (names={target.names}).")


class InvalidFilterError(FlaxError):
    """A collection or rng filter is not a bool, a string, a collection of strings or a
    ``DenyList``."""

    def __init__(self, filter_like):
        super().__init__(f'Invalid Filter: "{filter_like}" (use True/False, a collection '
                         f'name, a list of names or DenyList(...))')


class InvalidScopeError(FlaxError):
    """A scope was used after the ``apply``/``init`` that made it returned."""

    def __init__(self, scope_name):
        super().__init__(f'The scope "{scope_name}" is no longer valid: a scope lives only '
                         f'inside the apply()/init() call that created it.')


class CursorFindError(FlaxError):
    """``Cursor.find`` matched no object, or more than one (use ``find_all``)."""

    def __init__(self, cursor=None, cursor2=None):
        if cursor is not None and cursor2 is not None:
            super().__init__(f"More than one object found given the conditions of the "
                             f"cond_fn. The first two objects found have the following "
                             f"paths: {cursor._path} and {cursor2._path}")
        else:
            super().__init__("No object found given the conditions of the cond_fn.")


class TraverseTreeError(FlaxError):
    """A cursor tree walk needs exactly one of ``update_fn`` and ``cond_fn``."""

    def __init__(self, update_fn, cond_fn):
        which = "None" if update_fn is None and cond_fn is None else "not None"
        super().__init__(f"Both update_fn and cond_fn are {which}. Exactly one of them "
                         f"must be {'not None' if which == 'None' else 'None'}.")


class ReservedModuleAttributeError(FlaxError):
    """A Module subclass declared a field ``parent`` (or ``name`` other than ``str``):
    both are every module's own. Fix: rename the field."""

    def __init__(self, annotations):
        super().__init__(f"properties `parent` and `name` are reserved: {annotations}")


class IncorrectPostInitOverrideError(FlaxError):
    """A Module's ``__post_init__`` did not call ``super().__post_init__()``, so the
    module was never registered with its parent."""

    def __init__(self):
        super().__init__("Overrode `.__post_init__()` without calling "
                         "`super().__post_init__()`")


class CallShareScopeOnUnboundModuleError(FlaxError):
    """``nn.share_scope`` needs both modules bound (call it in ``setup``)."""

    def __init__(self):
        super().__init__("Can't call `share_scope` on unbound modules")


class TransformTargetError(FlaxError):
    """A lifted transformation (``nn.vmap``, ``nn.scan``, ...) got something that is
    neither a Module class nor a function taking a module first."""

    def __init__(self, target):
        super().__init__(f"Linen transformations must be applied to Modules classes or "
                         f"functions taking a Module instance as the first argument. The "
                         f"provided target is not a Module class or callable: {target}")


class TransformedMethodReturnValueError(FlaxError):
    """A transformed method returned a Module or Variable, which cannot leave the
    transformation (return arrays; build the module outside)."""

    def __init__(self, name):
        super().__init__(f"Transformed module method {name} cannot return Modules or "
                         f"Variables.")


class DescriptorAttributeError(FlaxError):
    """A property (or other descriptor) of a Module raised AttributeError, e.g. it reads
    an attribute that does not exist; reported as this rather than as the property
    itself missing."""

    def __init__(self):
        super().__init__("Trying to access a property that is accessing a non-existent "
                         "attribute.")


class LazyInitError(FlaxError):
    """``lazy_init`` made a variable (or output) that depends on the value of an
    argument given only as a ``ShapeDtypeStruct``, which has no value. Fix: have init
    use only that argument's shape and dtype, or pass a real array."""

    def __init__(self, partial_val):
        super().__init__(f"Lazy init encountered a value that could with the given inputs "
                         f"(shape: {partial_val}).")
