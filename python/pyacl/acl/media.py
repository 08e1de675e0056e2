"""acl.media: DVPP memory.

    dev_ptr, ret = dvpp_malloc(size)   acldvppMalloc: 128-byte aligned blocks of
                                       ALIGN_UP(ALIGN_UP(size, 32) + 32, 128) bytes
                                       in the process's DVPP window
    ret = dvpp_free(dev_ptr)           acldvppFree
"""

from acl import _binding

dvpp_malloc = _binding.face.media.dvpp_malloc
dvpp_free = _binding.face.media.dvpp_free

__all__ = ["dvpp_free", "dvpp_malloc"]
