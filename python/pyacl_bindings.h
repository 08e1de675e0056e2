// streampool._core.pyacl: the compiled half of the `acl` package
// (python/pyacl/acl/), pyACL's functions over the AscendCL face's C functions.
// It lives in the streampool extension so that both see one copy of the
// libraries, hence one implicit runtime: a pointer from acl.rt.malloc is
// memory streampool.acl_runtime() knows.
#ifndef STREAMPOOL_PYTHON_PYACL_BINDINGS_H_
#define STREAMPOOL_PYTHON_PYACL_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <memory>

#include "absl/status/statusor.h"
#include "streampool/runtime.h"

namespace streampool::python {

// Adds the submodule `pyacl` (with rt, media, himpi and util below it) to m.
void BindPyAcl(pybind11::module_& m);

// The AscendCL face's implicit runtime, made from STREAMPOOL_ACL_* if it does
// not exist yet. The pointer shares ownership of the face's runtime: dropping
// it never destroys the runtime the face still uses, and holding it keeps a
// runtime alive after aclFinalize replaced it.
absl::StatusOr<std::shared_ptr<Runtime>> AclFaceRuntime();

}  // namespace streampool::python

#endif  // STREAMPOOL_PYTHON_PYACL_BINDINGS_H_
