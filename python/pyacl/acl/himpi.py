"""acl.himpi: DVPP memory under the hi_mpi names.

    dev_ptr, ret = dvpp_malloc(dev_id, size)   from acldvppMalloc's pool, on the
                                               calling thread's current device;
                                               dev_id (reserved in pyACL) must
                                               name a device, else
                                               ACL_ERROR_RT_INVALID_DEVICEID
    ret = dvpp_free(dev_ptr)                   acldvppFree
"""

from acl import _binding

dvpp_malloc = _binding.face.himpi.dvpp_malloc
dvpp_free = _binding.face.himpi.dvpp_free

__all__ = ["dvpp_free", "dvpp_malloc"]
