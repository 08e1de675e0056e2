/// \file
/// STREAMPOOL_EXPORT marks the C++ declarations that make up the public API.
///
/// The library is compiled with hidden visibility (-fvisibility=hidden,
/// -fvisibility-inlines-hidden), so in a shared build only what carries
/// STREAMPOOL_EXPORT (C++) or SP_API (C, in streampool.h) is in the dynamic
/// symbol table; everything in namespace streampool::internal stays private to
/// the library. On a class it exports the out-of-line members, the vtable and
/// the typeinfo (so a user's subclass of PhysicalMemory and the library agree
/// on one typeinfo). It changes nothing for a static build.
#ifndef STREAMPOOL_EXPORT_H_
#define STREAMPOOL_EXPORT_H_

#if defined(_WIN32)
/// Marks a public C++ class or function (no-op on Windows: not supported).
#define STREAMPOOL_EXPORT
#else
/// Marks a public C++ class or function: default visibility, so a shared
/// libstreampool exports it.
#define STREAMPOOL_EXPORT __attribute__((visibility("default")))
#endif

#endif  // STREAMPOOL_EXPORT_H_
