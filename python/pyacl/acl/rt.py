"""acl.rt: devices, contexts, streams, events and memory (aclrt*).

Every function is the AscendCL face's C function of the same job, in
pyACL's shape: ``ret`` alone, or the outputs followed by ``ret``.

Beyond pyACL, the face's stream-ordered pools (aclrtMemPool*, acl_rt_memory.h)
are here under pyACL-style names:

    pool, ret = mem_pool_create(props)
        props: aclrtMemPoolProps as a dict of its C fields, nested structs
        as dicts, a missing field 0 (None passes NULL):
        {"allocType": ACL_MEM_ALLOCATION_TYPE_PINNED,
         "handleType": ACL_MEM_HANDLE_TYPE_NONE,
         "location": {"id": 0, "type": ACL_MEM_LOCATION_TYPE_DEVICE},
         "maxSize": 0, "reserved": b""}
    ret = mem_pool_destroy(pool)
    ret = mem_pool_set_attr(pool, attr, value)
    value, ret = mem_pool_get_attr(pool, attr)
    ptr, ret = mem_pool_malloc_async(size, pool, stream)
    ret = mem_pool_free_async(ptr, stream)
    ret = mem_pool_trim_to(pool, min_bytes_to_keep)
"""

from acl import _binding

_rt = _binding.face.rt
_c = _binding.constants

__all__ = sorted(name for name in dir(_rt) if not name.startswith("_"))
globals().update({name: getattr(_rt, name) for name in __all__})


class _Names:
    """A namespace of constants, read-only."""

    def __init__(self, name, **values):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_values", values)

    def __getattr__(self, attr):
        try:
            return self._values[attr]
        except KeyError:
            raise AttributeError(f"{self._name} has no {attr}") from None

    def __setattr__(self, attr, value):
        raise AttributeError(f"{self._name} is read-only")

    def __dir__(self):
        return list(self._values)

    def __repr__(self):
        return f"<{self._name}: " + ", ".join(f"{k}={v}" for k, v in self._values.items()) + ">"


#: aclrtMemMallocPolicy's page policies.
malloc_type = _Names(
    "acl.rt.malloc_type",
    HUGE_FIRST=_c["ACL_MEM_MALLOC_HUGE_FIRST"],
    HUGE_ONLY=_c["ACL_MEM_MALLOC_HUGE_ONLY"],
    NORMAL_ONLY=_c["ACL_MEM_MALLOC_NORMAL_ONLY"],
    HUGE_FIRST_P2P=_c["ACL_MEM_MALLOC_HUGE_FIRST_P2P"],
    HUGE_ONLY_P2P=_c["ACL_MEM_MALLOC_HUGE_ONLY_P2P"],
    NORMAL_ONLY_P2P=_c["ACL_MEM_MALLOC_NORMAL_ONLY_P2P"],
)

#: aclrtMemcpyKind's directions.
memcpy_kind = _Names(
    "acl.rt.memcpy_kind",
    HOST_TO_HOST=_c["ACL_MEMCPY_HOST_TO_HOST"],
    HOST_TO_DEVICE=_c["ACL_MEMCPY_HOST_TO_DEVICE"],
    DEVICE_TO_HOST=_c["ACL_MEMCPY_DEVICE_TO_HOST"],
    DEVICE_TO_DEVICE=_c["ACL_MEMCPY_DEVICE_TO_DEVICE"],
    DEFAULT=_c["ACL_MEMCPY_DEFAULT"],
)

__all__ += ["malloc_type", "memcpy_kind"]
