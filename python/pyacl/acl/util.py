"""acl.util: between Python objects and addresses.

    ptr = bytes_to_ptr(data)               the address of a bytes-like object's
                                           buffer (bytes, bytearray, memoryview,
                                           a contiguous array)
    data = ptr_to_bytes(ptr, size)         a copy of size bytes at ptr
    ptr = numpy_to_ptr(arr)                the address of an ndarray's data
    arr = ptr_to_numpy(ptr, shape, type)   an ndarray over the memory at ptr (a
                                           view: nothing is copied, and the
                                           memory must outlive it); type is a
                                           numpy type number (NPY_INT32 = 5, ...)

An address is valid while its object lives (and, for a bytearray, is not
resized). numpy is imported by the two functions that need it, on first use.
"""

import ctypes
import operator
import warnings

from acl import _binding

__all__ = ["bytes_to_ptr", "numpy_to_ptr", "ptr_to_bytes", "ptr_to_numpy"]


def bytes_to_ptr(data):
    """The address of data's first byte (any contiguous buffer)."""
    return _binding.face.util.buffer_address(data)


def ptr_to_bytes(ptr, size):
    """A bytes object holding a copy of the size bytes at ptr."""
    ptr = operator.index(ptr)
    size = operator.index(size)
    if size < 0:
        raise ValueError(f"ptr_to_bytes: negative size {size}")
    if size == 0:
        return b""
    if ptr == 0:
        raise ValueError("ptr_to_bytes: a null pointer")
    return ctypes.string_at(ptr, size)


def _numpy():
    import numpy

    return numpy


_DTYPES = {}


def _dtype(np, npy_type):
    """The dtype of a numpy type number, as the NumPy C API numbers them."""
    if not _DTYPES:
        for scalar in set(np.sctypeDict.values()):
            dt = np.dtype(scalar)
            _DTYPES.setdefault(dt.num, dt)
    try:
        return _DTYPES[operator.index(npy_type)]
    except KeyError:
        raise ValueError(f"ptr_to_numpy: no numpy type number {npy_type}") from None


def numpy_to_ptr(arr):
    """The address of arr's data. Copies read len(bytes) contiguous bytes from
    there, so an array that is not C-contiguous warns, as pyACL's does."""
    np = _numpy()
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"numpy_to_ptr takes a numpy.ndarray, not {type(arr).__name__}")
    if not arr.flags.c_contiguous:
        warnings.warn("numpy_to_ptr: the array is not C-contiguous; a copy from its address "
                      "does not see its elements in order", stacklevel=2)
    return arr.ctypes.data


def ptr_to_numpy(ptr, shape, npy_type):
    """An ndarray of the given shape and numpy type number over the memory at
    ptr: a view, so writes reach that memory, which must outlive the array."""
    np = _numpy()
    dtype = _dtype(np, npy_type)
    shape = tuple(operator.index(n) for n in shape) if hasattr(shape, "__iter__") else (
        operator.index(shape),)
    count = 1
    for n in shape:
        if n < 0:
            raise ValueError(f"ptr_to_numpy: negative dimension in {shape}")
        count *= n
    if count == 0:
        return np.empty(shape, dtype=dtype)
    ptr = operator.index(ptr)
    if ptr == 0:
        raise ValueError("ptr_to_numpy: a null pointer")
    memory = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
    return np.frombuffer(memory, dtype=dtype, count=count).reshape(shape)
