// STREAMPOOL_COMPAT_EXPORT marks what the API faces call in the
// compatibility core. The core is one library (libstreampool-compat) that
// every face links, so that a program using two faces has one core: one
// registry of implicit runtimes, one exit handler, one set of per-thread
// states. In a shared build the faces reach it across libraries, so these
// internal declarations need default visibility, which nothing else under
// streampool::internal has; no program is meant to call them.
#ifndef STREAMPOOL_SRC_COMPAT_EXPORT_H_
#define STREAMPOOL_SRC_COMPAT_EXPORT_H_

#if defined(_WIN32)
#define STREAMPOOL_COMPAT_EXPORT
#else
#define STREAMPOOL_COMPAT_EXPORT __attribute__((visibility("default")))
#endif

#endif  // STREAMPOOL_SRC_COMPAT_EXPORT_H_
