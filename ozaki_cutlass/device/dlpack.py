"""DLPack export of our own device matrices (``DeviceArray.__dlpack__``): a "dltensor"
capsule holding a DLManagedTensor (DLPack's unversioned ABI, which every consumer
accepts) that keeps the array alive until the consumer calls its deleter.

The producer's side of the stream protocol is ``DeviceArray.__dlpack__``'s: it makes the
consumer's stream wait for the stream the array was written on.
"""

from __future__ import annotations

import ctypes

__all__ = ["KDL_CUDA", "capsule"]

#: DLDeviceType of CUDA device memory.
KDL_CUDA = 2
_KDL_FLOAT, _KDL_COMPLEX = 2, 5   # DLDataTypeCode


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

_NAME = b"dltensor"
_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

#: id of a managed tensor -> what it keeps alive (the owner, the struct, shape and strides)
_LIVE: dict[int, tuple] = {}


@_DELETER
def _delete(managed) -> None:
    _LIVE.pop(ctypes.cast(managed, ctypes.c_void_p).value, None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule_ptr) -> None:
    # a consumer renames the capsule to "used_dltensor" and owns the deleter call; an
    # unconsumed capsule frees the tensor itself
    if _api.PyCapsule_IsValid(capsule_ptr, _NAME):
        managed = _api.PyCapsule_GetPointer(capsule_ptr, _NAME)
        _delete(ctypes.cast(managed, ctypes.POINTER(_DLManagedTensor)))


def capsule(owner, ptr: int, shape: tuple[int, int], strides: tuple[int, int], device: int, *,
            complex_: bool = False):
    """A "dltensor" capsule of a float64 (``complex_``: complex128) matrix at device pointer
    ``ptr`` (strides in elements) on CUDA device ``device``, keeping ``owner`` alive until it
    is released."""
    shape_arr = (ctypes.c_int64 * 2)(*shape)
    strides_arr = (ctypes.c_int64 * 2)(*strides)
    managed = _DLManagedTensor()
    dtype = _DLDataType(_KDL_COMPLEX, 128, 1) if complex_ else _DLDataType(_KDL_FLOAT, 64, 1)
    managed.dl_tensor = _DLTensor(ptr, _DLDevice(KDL_CUDA, device), 2, dtype,
                                  shape_arr, strides_arr, 0)
    managed.manager_ctx = None
    managed.deleter = _delete
    address = ctypes.addressof(managed)
    _LIVE[address] = (owner, managed, shape_arr, strides_arr)
    return _api.PyCapsule_New(address, _NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))
