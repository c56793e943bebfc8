"""Atomic loads, stores and compare-exchanges of int64 array elements, and a
spin-wait hint, for compiled code that threads use to hand each other work
(``_parallel``).

Numba has none of these: a plain load in a waiting loop may be hoisted out
of it, and plain stores may be reordered around the writes they announce.
Every access here is sequentially consistent (on x86 a plain load, an
``xchg`` and a ``lock cmpxchg``), which the hand-off protocol of ``_parallel`` relies on: a thread
that stores its flag and then loads the other thread's always sees it, or
the other thread sees its own.
"""

from __future__ import annotations

import platform

import llvmlite.ir as ir
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = ["compare_exchange", "load", "relax", "store"]

_ORDER = "seq_cst"
_ALIGN = 8


def _int64_vector(array: types.Type, index: types.Type) -> bool:
    return (
        isinstance(array, types.Array)
        and array.ndim == 1
        and array.dtype == types.int64
        and isinstance(index, types.Integer)
    )


def _element(context, builder, signature, args):  # type: ignore[no-untyped-def]
    array_type = signature.args[0]
    array = context.make_array(array_type)(context, builder, args[0])
    index = context.cast(builder, args[1], signature.args[1], types.intp)
    return cgutils.get_item_pointer(context, builder, array_type, array, [index])


@intrinsic
def load(typingctx, array, index):  # type: ignore[no-untyped-def]
    """``array[index]`` (int64, 1-D, ``index`` in bounds), read atomically."""
    if not _int64_vector(array, index):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        return builder.load_atomic(_element(context, builder, signature, args), _ORDER, _ALIGN)

    return types.int64(array, index), codegen


@intrinsic
def store(typingctx, array, index, value):  # type: ignore[no-untyped-def]
    """``array[index] = value`` (int64, 1-D, ``index`` in bounds), written atomically."""
    if not _int64_vector(array, index) or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        item = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(item, _element(context, builder, signature, args), _ORDER, _ALIGN)
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


@intrinsic
def compare_exchange(typingctx, array, index, expected, value):  # type: ignore[no-untyped-def]
    """``array[index] = value`` (int64, 1-D, ``index`` in bounds) if it holds
    ``expected``, atomically; returns what it held (``expected`` exactly
    when it was replaced)."""
    integers = isinstance(expected, types.Integer) and isinstance(value, types.Integer)
    if not _int64_vector(array, index) or not integers:
        return None

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        old, new = (context.cast(builder, args[i], signature.args[i], types.int64) for i in (2, 3))
        pointer = _element(context, builder, signature, args)
        pair = builder.cmpxchg(pointer, old, new, _ORDER, _ORDER)
        return builder.extract_value(pair, 0)

    return types.int64(array, index, expected, value), codegen


_PAUSE = "llvm.x86.sse2.pause" if platform.machine().lower() in ("x86_64", "amd64") else None


@intrinsic
def relax(typingctx):  # type: ignore[no-untyped-def]
    """A spin-wait hint to the CPU (x86 ``pause``; nothing elsewhere)."""

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        if _PAUSE is not None:
            void = ir.FunctionType(ir.VoidType(), [])
            builder.call(cgutils.get_or_insert_function(builder.module, void, _PAUSE), [])
        return context.get_dummy_value()

    return types.void(), codegen
