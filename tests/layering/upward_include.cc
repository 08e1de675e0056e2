// Not a unit test: the CTest layering_upward_include (tests/CMakeLists.txt,
// cmake/StreampoolLayers.cmake) compiles this file with the include path of
// the pool layer, and never links it.
//
// With STREAMPOOL_LAYERING_UPWARD it includes a runtime header, a layer above
// pool (src/README.md): that compile must fail, the header not found. Without
// it, it includes only what pool may include, and must compile: that shows
// the failure comes from the layering and not from a broken include path.
#ifdef STREAMPOOL_LAYERING_UPWARD
#include "src/runtime/runtime_impl.h"
#endif

#include "src/ordering/oracle.h"
#include "src/ordering/vector_clock.h"
#include "src/pool/size_index.h"
#include "src/util/check.h"
#include "streampool/physical_memory.h"
