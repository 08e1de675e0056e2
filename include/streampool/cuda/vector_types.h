/*
 * CUDA's built-in vector types (char1 ... double4, dim3) for host code, with
 * CUDA's alignment for the two- and four-component types, and the make_*
 * constructors. Part of streampool's CUDA compatibility layer.
 */
#ifndef STREAMPOOL_CUDA_VECTOR_TYPES_H_
#define STREAMPOOL_CUDA_VECTOR_TYPES_H_

#include "host_defines.h"

#define SPCUDA_VECTOR1(T, name)             \
  struct name {                             \
    T x;                                    \
  };                                        \
  typedef struct name name;                 \
  static __inline__ name make_##name(T x) { \
    name v;                                 \
    v.x = x;                                \
    return v;                               \
  }
#define SPCUDA_VECTOR2(T, name)                  \
  struct __align__(2 * sizeof(T)) name {         \
    T x, y;                                      \
  };                                             \
  typedef struct name name;                      \
  static __inline__ name make_##name(T x, T y) { \
    name v;                                      \
    v.x = x;                                     \
    v.y = y;                                     \
    return v;                                    \
  }
#define SPCUDA_VECTOR3(T, name)                       \
  struct name {                                       \
    T x, y, z;                                        \
  };                                                  \
  typedef struct name name;                           \
  static __inline__ name make_##name(T x, T y, T z) { \
    name v;                                           \
    v.x = x;                                          \
    v.y = y;                                          \
    v.z = z;                                          \
    return v;                                         \
  }
#define SPCUDA_VECTOR4(T, name)                            \
  struct __align__(4 * sizeof(T)) name {                   \
    T x, y, z, w;                                          \
  };                                                       \
  typedef struct name name;                                \
  static __inline__ name make_##name(T x, T y, T z, T w) { \
    name v;                                                \
    v.x = x;                                               \
    v.y = y;                                               \
    v.z = z;                                               \
    v.w = w;                                               \
    return v;                                              \
  }
#define SPCUDA_VECTORS(T, base) \
  SPCUDA_VECTOR1(T, base##1)    \
  SPCUDA_VECTOR2(T, base##2)    \
  SPCUDA_VECTOR3(T, base##3)    \
  SPCUDA_VECTOR4(T, base##4)

SPCUDA_VECTORS(signed char, char)
SPCUDA_VECTORS(unsigned char, uchar)
SPCUDA_VECTORS(short, short)
SPCUDA_VECTORS(unsigned short, ushort)
SPCUDA_VECTORS(int, int)
SPCUDA_VECTORS(unsigned int, uint)
SPCUDA_VECTORS(long, long)
SPCUDA_VECTORS(unsigned long, ulong)
SPCUDA_VECTORS(long long, longlong)
SPCUDA_VECTORS(unsigned long long, ulonglong)
SPCUDA_VECTORS(float, float)
SPCUDA_VECTORS(double, double)

#undef SPCUDA_VECTORS
#undef SPCUDA_VECTOR1
#undef SPCUDA_VECTOR2
#undef SPCUDA_VECTOR3
#undef SPCUDA_VECTOR4

/* A grid's or block's extent: every component defaults to 1, so dim3(n) is a
 * one-dimensional extent of n. */
struct dim3 {
  unsigned int x, y, z;
#ifdef __cplusplus
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
#endif
};
typedef struct dim3 dim3;

#endif /* STREAMPOOL_CUDA_VECTOR_TYPES_H_ */
