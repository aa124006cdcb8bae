"""``nn.Module``: Flax linen's module system on a ``Scope``.

Modules are dataclasses holding hyperparameters only. ``init``/``apply`` clone the
module onto a root ``Scope``; every user method runs through ``_call_wrapped_method``,
which runs ``setup()`` lazily, pushes the module on a context stack (so submodules
built inside it get it as parent), and after an ``@compact`` method rewinds the scope
(names may be reused by the next call). Naming follows Flax: ``setup`` attributes are
named after the attribute (``layers_0`` for lists, ``blocks_a`` for dicts), inline
submodules ``ClassName_<n>`` counted per class and per call, ``name=`` wins.
"""
import dataclasses
import functools
import inspect
import threading
import typing
from collections.abc import Mapping
import uuid

import xform.numpy as jnp
from xform.core.tree_util import tree_map
from xform.nn import _intercept, errors
from xform.nn.configurations import config
from xform.nn._scope import (DenyList, Scope, Variable, bind as _bind_scope,
                             is_valid_rng, is_valid_rngs, lazy_eval, union_filters)
from xform.nn.core.frozen_dict import freeze

__all__ = ["Module", "apply", "compact", "init", "init_with_output", "merge_param",
           "nowrap", "share_scope", "Variable"]


class _Unspecified:
    def __repr__(self):
        return "_unspecified_parent"


_unspecified_parent = _Unspecified()


class _Context(threading.local):
    def __init__(self):
        self.module_stack = [None]
        self.capture_stack = []
        self.call_info_stack = []   # used by tabulate


_context = _Context()


def compact(fun):
    """Marks the one method of a Module in which submodules may be declared inline.

    >>> import xform, xform.nn as nn
    >>> class MLP(nn.Module):
    ...   @nn.compact
    ...   def __call__(self, x):
    ...     return nn.Dense(2)(nn.relu(nn.Dense(3)(x)))
    >>> v = MLP().init(xform.random.PRNGKey(0), xform.numpy.ones((1, 4)))
    >>> sorted(v['params'])
    ['Dense_0', 'Dense_1']
    """
    fun.compact = True
    return fun


def nowrap(fun):
    """Marks a Module method as a plain helper (no setup/naming state management)."""
    fun.nowrap = True
    return fun


def merge_param(name, a, b):
    """The one of ``a`` (constructor) and ``b`` (call time) that is not None."""
    if a is None and b is None:
        raise ValueError(f'Parameter "{name}" must be passed to the constructor or at '
                         f'call time.')
    if a is not None and b is not None:
        raise ValueError(f'Parameter "{name}" was passed to the constructor and at call '
                         f'time. Should be passed just once.')
    return b if a is None else a


def _wrap_method(fun):
    if getattr(fun, "method_handler_wrapped", False):
        return fun

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        if args and isinstance(args[0], Module):
            return args[0]._call_wrapped_method(fun, args[1:], kwargs)
        return fun(*args, **kwargs)
    wrapped.method_handler_wrapped = True
    return wrapped


@dataclasses.dataclass
class _State:
    in_compact_method: bool = False
    in_setup: bool = False
    setup_called: bool = False
    transformed: bool = False   # a lifted clone of a module whose setup had run (Flax's
    is_initialized: bool = False  # SetupState.TRANSFORMED): setup may reuse scopes
    autoname_cursor: dict = dataclasses.field(default_factory=dict)
    children: dict = dataclasses.field(default_factory=dict)

    def reset(self):
        self.in_compact_method = False
        self.in_setup = False
        self.autoname_cursor = {}


_uninitialized_state = _State()


def _map_modules(fn, tree, suffix=""):
    """Maps ``fn(suffix, module)`` over the modules of a (nested) list/tuple/dict;
    lists become tuples and dicts are rebuilt, as Flax freezes setup attributes."""
    if isinstance(tree, Module):
        return fn(suffix, tree)
    if isinstance(tree, dict) and tree:
        return {k: _map_modules(fn, tree[k], f"{suffix}_{k}") for k in sorted(tree)}
    if isinstance(tree, (list, tuple)) and tree and not hasattr(tree, "_fields"):
        return tuple(_map_modules(fn, v, f"{suffix}_{i}") for i, v in enumerate(tree))
    return tree


class Module:
    """Base class of neural-network modules (Flax linen's ``nn.Module``).

    Subclasses are dataclasses; declare parameters with ``self.param`` and
    submodules in ``setup()`` or in one ``@nn.compact`` method, then use
    ``init(key, *args)`` to create variables and ``apply(variables, *args)`` to run.

    >>> import xform, xform.numpy as jnp, xform.nn as nn
    >>> class Scale(nn.Module):
    ...   @nn.compact
    ...   def __call__(self, x):
    ...     return x * self.param('s', nn.initializers.ones, (x.shape[-1],))
    >>> v = Scale().init(xform.random.PRNGKey(0), jnp.ones(3))
    >>> Scale().apply(v, jnp.arange(3.0)).tolist()
    [0.0, 1.0, 2.0]
    """
    scope = None
    _state = _uninitialized_state

    def __init_subclass__(cls, kw_only=False, **kwargs):
        super().__init_subclass__(**kwargs)
        annotations = cls.__dict__.get("__annotations__", {})
        if "parent" in annotations or annotations.get("name", str) not in (
                "str", str, typing.Optional[str]):
            raise errors.ReservedModuleAttributeError(annotations)
        has_base_fields = any(hasattr(b, "__dataclass_fields__") for b in cls.__mro__[1:])
        if not has_base_fields or "parent" in annotations or "name" in annotations:
            _add_parent_and_name(cls)
        dataclasses.dataclass(cls, unsafe_hash="__hash__" not in cls.__dict__,
                              repr=False, kw_only=kw_only)
        exclude = {f.name for f in dataclasses.fields(cls)} | {
            "__eq__", "__repr__", "__init__", "__hash__", "__post_init__",
            "__getattr__", "__setattr__"}
        for key, value in list(cls.__dict__.items()):
            if (key not in exclude and inspect.isfunction(value)
                    and not getattr(value, "nowrap", False)):
                setattr(cls, key, _wrap_method(value))
        cls.scope = None

    # ---- construction and naming ----
    def __post_init__(self):
        object.__setattr__(self, "_id", uuid.uuid4().int)
        object.__setattr__(self, "_state", _State())
        if self.parent is _unspecified_parent:
            object.__setattr__(self, "parent", _context.module_stack[-1])
        if self.parent is None:
            return
        if isinstance(self.parent, Module):
            parent = self.parent
            if parent._state.in_setup and self.name is None:
                return   # named when assigned to an attribute in setup()
            if not parent._initialization_allowed:
                raise errors.AssignSubModuleError(type(self).__name__)
            if self.name is None:
                prefix = type(self).__name__
                cursor = parent._state.autoname_cursor.get(prefix, 0)
                object.__setattr__(self, "name", f"{prefix}_{cursor}")
                parent._state.autoname_cursor[prefix] = cursor + 1
            # A lifted transformation may have pushed this setup submodule's scope already
            # (it was passed in the call's arguments): it is reused, as in Flax.
            reuse = parent._state.in_setup and parent._state.transformed
            if parent.scope.name_reserved(self.name) and not reuse:
                raise errors.NameInUseError("submodule", self.name,
                                            type(parent).__name__)
            parent._state.children[self.name] = self
            object.__setattr__(self, "scope", parent.scope.push(self.name, reuse=reuse))
        elif isinstance(self.parent, Scope):
            object.__setattr__(self, "scope", self.parent)
        else:
            raise ValueError("parent must be None, Module or Scope")
        if self.scope is not None:
            for f in dataclasses.fields(self):
                if f.name not in ("parent", "name") and f.init:
                    self._register_submodules(f.name, getattr(self, f.name))
        self._state.is_initialized = True

    def _register_submodules(self, name, val):
        queue = []
        cache = self.scope.root.__dict__.setdefault("adopted", {})
        preserve = getattr(type(self), "preserve_adopted_names",
                           config.flax_preserve_adopted_names)

        def adopt(suffix, sub):
            adopted = None
            if sub.parent is None:   # built outside: adopt a clone, named by attribute
                adopted = sub.name if preserve else None
                if sub._id not in cache:
                    cache[sub._id] = sub.clone(name=None)
                sub = cache[sub._id]
            if sub.name is None:
                object.__setattr__(sub, "parent", self)
                object.__setattr__(sub, "name", f"{name}{suffix}" if adopted is None
                                   else adopted)
                queue.append(sub)
            return sub
        object.__setattr__(self, name, _map_modules(adopt, val))
        for sub in queue:
            sub.__post_init__()

    def __setattr__(self, name, val):
        fields = self.__dataclass_fields__
        if not self._state.in_setup:
            if not self._state.is_initialized or name.startswith("__"):
                object.__setattr__(self, name, val)
                return
            raise errors.SetAttributeFrozenModuleError(type(self).__name__, name, val)
        if name in fields and fields[name].init:
            raise errors.SetAttributeInModuleSetupError()
        self._register_submodules(name, val)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        self._try_setup()
        if name in self.__dict__:
            return self.__dict__[name]
        if hasattr(inspect.getattr_static(type(self), name, None), "__get__"):
            raise errors.DescriptorAttributeError()   # a property's own AttributeError
        msg = f'"{type(self).__name__}" object has no attribute "{name}".'
        if self.scope is None:
            msg += (f' If "{name}" is defined in \'.setup()\', remember these fields are '
                    f"only accessible from inside 'init' or 'apply'.")
            raise errors.UnboundSubmoduleError(msg)
        raise AttributeError(msg)

    def _try_setup(self, shallow=False):
        """Runs ``setup()`` once (``shallow``: only adopts submodule fields, as lifted
        transforms need before they collect scopes)."""
        state = self.__dict__.get("_state")
        if self.scope is None or state is None or state.in_setup or state.setup_called:
            return
        try:
            state.in_setup = True
            for f in dataclasses.fields(self):
                if f.name not in ("parent", "name") and f.init:
                    self._register_submodules(f.name, getattr(self, f.name))
            if not shallow:
                self.setup()
        finally:
            state.in_setup = False
            if not shallow:
                state.setup_called = True

    @property
    def _initialization_allowed(self):
        s = self._state
        return not s.is_initialized or s.in_setup or s.in_compact_method

    def _call_wrapped_method(self, fun, args, kwargs):
        is_compact = hasattr(fun, "compact")
        fun_name = fun.__name__
        is_setup = fun_name == "setup"
        add_call_info = not is_setup and _context.call_info_stack
        if is_setup:
            if self.scope is None:
                raise errors.CallSetupUnboundModuleError(type(self).__name__)
            recurrent = self._state.in_setup
            self._state.in_setup = True
        else:
            self._try_setup()
        if is_compact:
            if self.scope is None:
                raise errors.CallCompactUnboundModuleError(type(self).__name__)
            recurrent = self._state.in_compact_method
            self._state.in_compact_method = True
        _context.module_stack.append(self)
        try:
            if add_call_info:
                call_index = _context.call_info_stack[-1].next_index()
            if _intercept.active():
                y = _intercept.run(fun, self, args, kwargs)
            else:
                y = fun(self, *args, **kwargs)
            if _context.capture_stack:
                filter_fn = _context.capture_stack[-1]
                if filter_fn and filter_fn(self, fun_name):
                    self.sow("intermediates", fun_name, y)
            if add_call_info:
                _context.call_info_stack[-1].record(call_index, self, fun_name, args,
                                                    kwargs, y)
            return y
        finally:
            _context.module_stack.pop()
            if is_compact:
                object.__setattr__(self, "scope", self.scope.rewound())
            if (is_compact or is_setup) and not recurrent:
                self._state.reset()

    def setup(self):
        """Declares submodules and variables lazily, once the module is bound."""

    def __repr__(self):
        return _module_repr(self)

    # ---- copies ----
    def clone(self, *, parent=None, _deep_clone=False, _reset_names=False, **updates):
        """A copy with some fields replaced (and, by default, no parent)."""
        attrs = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}
        attrs.update(parent=parent, **updates)
        if _deep_clone is not False:
            cache = {} if isinstance(_deep_clone, bool) else _deep_clone

            def clone_fn(_, m):
                if m._id not in cache:
                    kw = {"name": None} if _reset_names else {}
                    cache[m._id] = m.clone(_deep_clone=cache, _reset_names=_reset_names,
                                           **kw)
                return cache[m._id]
            for k, v in attrs.items():
                if k != "parent":
                    attrs[k] = _map_modules(clone_fn, v)
        return type(self)(**attrs)

    def copy(self, *, parent=_unspecified_parent, name=None, **updates):
        """A copy with some fields replaced, attached to the current parent."""
        return self.clone(parent=parent, name=name, _deep_clone=True, **updates)

    # ---- variables ----
    def _need_scope(self, what):
        if self.scope is None:
            raise ValueError(f"Can't {what} on unbound modules ({type(self).__name__}); "
                             f"use init/apply/bind.")
        return self.scope

    def variable(self, col, name, init_fn=None, *init_args, unbox=True, **init_kwargs):
        """Declares (on first use) and returns the ``Variable`` ``col/name``."""
        if not self._initialization_allowed:
            raise ValueError("Variables must be initialized in `setup()` or in a method "
                             "wrapped in `@compact`")
        if self._need_scope("declare variables").name_reserved(name, col):
            raise errors.NameInUseError("variable", name, type(self).__name__)
        v = self.scope.variable(col, name, init_fn, *init_args, unbox=unbox,
                                **init_kwargs)
        self._state.children[name] = col
        return v

    def param(self, name, init_fn, *init_args, unbox=True, **init_kwargs):
        """Declares (on first use) and returns parameter ``name``; ``init_fn(key,
        *init_args)`` gets a key from the ``params`` stream."""
        if not self._initialization_allowed:
            raise ValueError("Parameters must be initialized in `setup()` or in a method "
                             "wrapped in `@compact`")
        if self._need_scope("declare params").name_reserved(name, "params"):
            raise errors.NameInUseError("param", name, type(self).__name__)
        v = self.scope.param(name, init_fn, *init_args, unbox=unbox, **init_kwargs)
        self._state.children[name] = "params"
        return v

    def has_variable(self, col, name):
        return self._need_scope("access variables").has_variable(col, name)

    def get_variable(self, col, name, default=None):
        return self._need_scope("access variables").get_variable(col, name, default)

    def put_variable(self, col, name, value):
        self._need_scope("access variables").put_variable(col, name, value)

    def is_mutable_collection(self, col):
        return self._need_scope("check mutability").is_mutable_collection(col)

    def has_rng(self, name):
        return self._need_scope("query for RNGs").has_rng(name)

    def make_rng(self, name="params"):
        """A fresh key from rng stream ``name`` (``params`` if ``name`` is absent)."""
        return self._need_scope("use RNGs").make_rng(name)

    def is_initializing(self):
        """True inside ``init``/``init_with_output``."""
        return bool(self._need_scope("check if running under init()").flags.get(
            "initializing", False))

    @property
    def variables(self):
        return self._need_scope("access variables").variables()

    @property
    def path(self):
        if self.scope is None:
            raise ValueError("Can't access module paths on unbound modules.")
        return self.scope.path

    def sow(self, col, name, value, reduce_fn=lambda xs, x: xs + (x,),
            init_fn=lambda: ()):
        """Appends ``value`` to ``col/name`` if ``col`` is mutable (else a no-op)."""
        scope = self._need_scope("store variables")
        if not scope.is_mutable_collection(col):
            return False
        if scope.has_variable(col, name):
            xs = scope.get_variable(col, name)
        else:
            scope.reserve(name, col)
            self._state.children[name] = col
            xs = init_fn()
        scope.put_variable(col, name, reduce_fn(xs, value))
        return True

    def perturb(self, name, value, collection="perturbations"):
        """Adds a zero variable ``collection/name`` to ``value`` (created when the
        collection is mutable), so ``grad`` w.r.t. the perturbations gives the
        gradient of the loss w.r.t. this intermediate; a no-op without it."""
        scope = self._need_scope("store variables")
        if scope.is_mutable_collection(collection) and not scope.has_variable(
                collection, name):
            scope.reserve(name, collection)
            self._state.children[name] = collection
            scope.put_variable(collection, name, tree_map(jnp.zeros_like, value))
        if collection in scope.root._variables:
            if not scope.has_variable(collection, name):
                raise ValueError(f"Perturbation collection {collection} present, but "
                                 f"missing perturbation variable {name}")
            value = tree_map(jnp.add, value, scope.get_variable(collection, name))
        return value

    # ---- init / apply ----
    def _resolve_method(self, method):
        if isinstance(method, str):   # Flax's rules: a missing name is an AttributeError
            attr = method
            method = getattr(self, attr)
            if not callable(method):
                raise TypeError(f"'{type(self).__name__}.{attr}' must be a callable, got "
                                f"{type(method)}.")
            if isinstance(method, Module):   # a submodule's name: call that submodule
                return lambda self, *args, **kwargs: getattr(self, attr)(*args, **kwargs)
        elif method is None:
            method = self.__call__
        if inspect.ismethod(method) and isinstance(method.__self__, Module):
            method = method.__func__
        if not callable(method) or len(inspect.signature(method).parameters) < 1:
            raise errors.ApplyModuleInvalidMethodError(method)
        return method

    def _run(self, method, variables, args, kwargs, rngs, mutable, capture, flags):
        if not isinstance(self, Module):
            raise errors.InvalidInstanceModuleError()
        if "_id" not in vars(self):   # only Module.__post_init__ sets it
            raise errors.IncorrectPostInitOverrideError()
        if rngs is not None and not isinstance(rngs, dict):
            if not is_valid_rng(rngs):
                raise errors.InvalidRngError(
                    f"RNGs should be of shape (2,) or PRNGKey in Module "
                    f"{type(self).__name__}, but rngs are: {rngs}")
            rngs = {"params": rngs}
        if rngs is not None and not is_valid_rngs(rngs):   # as flax.core's init/apply
            raise ValueError(
                ("First argument passed to an init function" if flags else
                 "The ``rngs`` argument passed to an apply function") +
                " should be a ``jax.PRNGKey`` or a dictionary mapping strings to "
                "``jax.PRNGKey``.")
        method = self._resolve_method(method)
        if capture is True:
            capture = lambda _, name: name == "__call__"
        if capture:
            mutable = union_filters(mutable, "intermediates")
        if (isinstance(variables, Mapping) and isinstance(variables.get("params"), Mapping)
                and "params" in variables["params"]):
            raise errors.ApplyScopeInvalidVariablesStructureError(variables)
        root = _bind_scope(variables, rngs=rngs, mutable=mutable, flags=flags)
        _context.capture_stack.append(capture)
        try:
            y = method(self.clone(parent=root, _deep_clone=True), *args, **kwargs)
        finally:
            _context.capture_stack.pop()
        if mutable is not False:
            out = root.mutable_variables()
            return y, (freeze(out) if config.flax_return_frozendict else out)
        return y

    def apply(self, variables, *args, rngs=None, method=None, mutable=False,
              capture_intermediates=False, **kwargs):
        """Runs ``method`` (default ``__call__``) with ``variables`` bound.

        Returns the output, or ``(output, updated_collections)`` when ``mutable``
        names collections that may change (e.g. ``mutable=['batch_stats']``).
        """
        if not isinstance(variables, Mapping):
            raise errors.ApplyScopeInvalidVariablesTypeError()
        return self._run(method, variables, args, kwargs, rngs, mutable,
                         capture_intermediates, None)

    def init_with_output(self, rngs, *args, method=None,
                         mutable=DenyList("intermediates"), capture_intermediates=False,
                         **kwargs):
        """``init`` that also returns the method's output: ``(out, variables)``."""
        if not isinstance(rngs, dict) and not is_valid_rng(rngs):
            raise errors.InvalidRngError(
                f"RNGs should be of shape (2,) or PRNGKey in Module "
                f"{type(self).__name__}, but rngs are: {rngs}")
        return self._run(method, {}, args, kwargs, rngs, mutable,
                         capture_intermediates, {"initializing": True})

    def init(self, rngs, *args, method=None, mutable=DenyList("intermediates"),
             capture_intermediates=False, **kwargs):
        """Creates the module's variables: ``{'params': {...}, ...}``.

        ``rngs`` is a key (the ``params`` stream) or a dict of streams.
        """
        _, v = self.init_with_output(rngs, *args, method=method, mutable=mutable,
                                     capture_intermediates=capture_intermediates,
                                     **kwargs)
        return v

    def lazy_init(self, rngs, *args, method=None, mutable=DenyList("intermediates"),
                  **kwargs):
        """``init`` from input *shapes*: ``args`` may hold ``xform.ShapeDtypeStruct``
        leaves. It runs compiled with only the variables as outputs, so XLA drops the
        computation they do not need. Variables that depend on such an argument's
        value raise ``LazyInitError``, as Flax's.

        >>> import xform, xform.nn as nn
        >>> x = xform.ShapeDtypeStruct((1, 3), 'float32')
        >>> v = nn.Dense(2).lazy_init(xform.random.PRNGKey(0), x)
        >>> v['params']['kernel'].shape
        (3, 2)
        """
        return lazy_eval(lambda rngs, *args, **kwargs: self.init(
            rngs, *args, method=method, mutable=mutable, **kwargs))(rngs, *args, **kwargs)

    def bind(self, variables, *args, rngs=None, mutable=False):
        """An interactive copy of this module with ``variables`` bound."""
        scope = _bind_scope(variables, rngs=rngs, mutable=mutable)
        return self.clone(parent=scope, _deep_clone=True)

    def unbind(self):
        """``(unbound copy, variables)`` of a bound module."""
        if self.scope is None:
            raise errors.CallUnbindOnUnboundModuleError()
        variables = self.variables
        return self.clone(_deep_clone=True, _reset_names=True, name=None), variables

    def tabulate(self, rngs, *args, depth=None, show_repeated=False,
                 mutable=DenyList("intermediates"), console_kwargs=None,
                 table_kwargs={}, column_kwargs={}, compute_flops=False,  # noqa: B006
                 compute_vjp_flops=False, **kwargs):
        """Flax's summary table of ``init(rngs, *args, **kwargs)``: see ``nn.tabulate``."""
        return _summary().tabulate(
            self, rngs, depth=depth, show_repeated=show_repeated, mutable=mutable,
            console_kwargs=console_kwargs, table_kwargs=table_kwargs,
            column_kwargs=column_kwargs, compute_flops=compute_flops,
            compute_vjp_flops=compute_vjp_flops)(*args, **kwargs)

    def module_paths(self, rngs, *args, show_repeated=False,
                     mutable=DenyList("intermediates"), **kwargs):
        """``{'/'-joined path: module copy}`` of every submodule that
        ``init(rngs, *args, **kwargs)`` calls (under ``eval_shape``: no compute)."""
        if mutable != DenyList("intermediates"):
            kwargs["mutable"] = mutable
        _, rows = _summary()._table(self, rngs, args, kwargs, None, show_repeated,
                                    False, False)
        return {"/".join(row[0].path): row[0].module for row in rows}


def _module_repr(module, indent="    "):
    """Flax's pretty repr: ``# attributes`` (fields but parent/name; a named callable by
    its name), then ``# children`` (submodules bound so far), indented per level."""
    if not dataclasses.is_dataclass(module):   # a bare nn.Module()
        return object.__repr__(module)
    rep = ""
    attrs = [f.name for f in dataclasses.fields(module)
             if f.name not in ("parent", "name") and f.repr]
    if attrs:
        rep += "# attributes\n"
    for attr in attrs:
        value = module.__dict__.get(attr)
        named = (value.__dict__.get("__name__") if isinstance(value, Module)
                 else getattr(value, "__name__", None))
        rep += f"{attr} = {value.__name__ if callable(value) and named else repr(value)}\n"
    children = {k: v for k, v in module._state.children.items() if isinstance(v, Module)}
    if children:
        rep += "# children\n" + "".join(f"{k} = {_module_repr(v, indent)}\n"
                                        for k, v in children.items())
    body = "".join(indent + line + "\n" for line in rep.split("\n")[:-1])
    return f"{type(module).__name__}(\n{body})" if rep else f"{type(module).__name__}()"


def _summary():
    from xform.nn import _summary as summary   # cycle: _summary records _module calls
    return summary


def apply(fn, module, mutable=False, capture_intermediates=False):
    """Flax's functional ``nn.apply``: ``fn(bound_module, *args)`` as
    ``(variables, *args, rngs=None, **kwargs) -> out`` (or ``(out, updates)``)."""
    def wrapper(variables, *args, rngs=None, **kwargs):
        return module._run(fn, variables, args, kwargs, rngs, mutable,
                           capture_intermediates, None)
    return wrapper


def init_with_output(fn, module, mutable=DenyList("intermediates"),
                     capture_intermediates=False):
    """Flax's functional ``nn.init_with_output``: ``(rngs, *args) -> (out, vars)``."""
    def wrapper(rngs, *args, **kwargs):
        return module._run(fn, {}, args, kwargs, rngs, mutable, capture_intermediates,
                           {"initializing": True})
    return wrapper


def init(fn, module, mutable=DenyList("intermediates"), capture_intermediates=False):
    """Flax's functional ``nn.init``: ``(rngs, *args) -> variables``."""
    def wrapper(rngs, *args, **kwargs):
        return init_with_output(fn, module, mutable, capture_intermediates)(
            rngs, *args, **kwargs)[1]
    return wrapper


def _add_parent_and_name(cls):
    ann = cls.__dict__.get("__annotations__")
    if ann is None:
        ann = {}
        cls.__annotations__ = ann
    ann["parent"] = typing.Any
    ann["name"] = typing.Optional[str]
    cls.parent = dataclasses.field(repr=False, default=_unspecified_parent,
                                   kw_only=True, compare=False, hash=False)
    cls.name = dataclasses.field(default=None, kw_only=True)


def share_scope(module, other):
    """Makes ``other`` use ``module``'s scope (variables appear under ``module``)."""
    if module.scope is None or other.scope is None:
        raise errors.CallShareScopeOnUnboundModuleError()
    object.__setattr__(other, "scope", module.scope)

