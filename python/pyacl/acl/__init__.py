"""pyACL's `acl` module over streampool's AscendCL face: unchanged pyACL
programs (``import acl``) run on simulated Ascend devices.

    PYTHONPATH=<prefix>/lib/streampool/pyacl python3 prog.py

Every function calls the face's C function of the same job (acl.rt.malloc is
aclrtMalloc, ...), so its rules, error codes and STREAMPOOL_ACL_* settings
are the face's. As in pyACL, an action returns ``ret`` (0 is ACL_SUCCESS,
anything else an aclError), and a call that produces values returns them
first and ``ret`` last::

    ret = acl.init()
    ret = acl.rt.set_device(0)
    dev_ptr, ret = acl.rt.malloc(size, acl.rt.malloc_type.HUGE_FIRST)

Pointers and handles are ints (0 is NULL, stream 0 the default stream);
host memory is passed by address (numpy's ``arr.ctypes.data``,
acl.util.bytes_to_ptr). A wrong argument type raises TypeError; a value the
C parameter cannot hold (a negative size) returns ACL_ERROR_INVALID_PARAM
without reaching C.

Modules: acl.rt (devices, contexts, streams, events, memory, host
registration, and the face's stream-ordered pools as mem_pool_*), acl.media
and acl.himpi (DVPP memory), acl.util (pointers and buffers). The ACL_*
names of the C headers are attributes of this module.
"""

from acl import _binding

#: ret = init(config_path=None): aclInit; None or "" is no configuration file.
init = _binding.face.init
#: ret = finalize(): aclFinalize, which destroys every stream, event, pool and
#: allocation of the process.
finalize = _binding.face.finalize

globals().update(_binding.constants)

from acl import himpi, media, rt, util  # noqa: E402,F401

__all__ = ["finalize", "himpi", "init", "media", "rt", "util"] + sorted(_binding.constants)
