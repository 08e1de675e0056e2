/*
 * The part of CUDA's driver API that programs written against the runtime API
 * borrow, for streampool's CUDA compatibility layer: the names the CUDA
 * guide's snippets use, and the device queries and error strings of the
 * driver that CUDA's samples call (cuInit, cuDeviceGet, cuDeviceGetAttribute,
 * cuGetErrorName ...). Contexts, modules and the driver's memory calls are
 * not provided.
 *
 * The driver calls work on the runtime the cuda* calls use (one for the
 * process, README "CUDA programs"). As in CUDA, the driver is initialized by
 * cuInit(0) or by the first runtime call; until then the device calls return
 * CUDA_ERROR_NOT_INITIALIZED. Unlike the runtime API, a driver call never
 * becomes the thread's last error (cudaGetLastError).
 */
#ifndef STREAMPOOL_CUDA_CUDA_H_
#define STREAMPOOL_CUDA_CUDA_H_
/* CUDA's own include guard, which programs test to know cuda.h is in. */
#ifndef __cuda_cuda_h__
#define __cuda_cuda_h__
#endif

#include <stdint.h>

#include "driver_types.h"

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;

/* The driver's names for the runtime's cudaMemAllocationHandleType values. */
#define CU_MEM_HANDLE_TYPE_NONE cudaMemHandleTypeNone
#define CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR cudaMemHandleTypePosixFileDescriptor

/* The driver's codes. Each has the number of the runtime's cudaError_t for the
 * same condition (CUDA numbers them alike), which is what the calls below
 * return for it. */
typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999
} CUresult;

/* A device, by its ordinal (as in CUDA). */
typedef int CUdevice_v1;
typedef CUdevice_v1 CUdevice;

/* The attributes cuDeviceGetAttribute answers: the driver's names for the
 * runtime's cudaDeviceAttr values, with the same numbers and answers. */
typedef enum CUdevice_attribute_enum {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_PITCH = 11,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT = 14,
  CU_DEVICE_ATTRIBUTE_GPU_OVERLAP = 15,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT = 17,
  CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
  CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
  CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
  CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
  CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
  CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
  CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES = 119
} CUdevice_attribute;

/* The driver's names for the runtime's cudaComputeMode values. */
typedef enum CUcomputemode_enum {
  CU_COMPUTEMODE_DEFAULT = 0,
  CU_COMPUTEMODE_PROHIBITED = 2,
  CU_COMPUTEMODE_EXCLUSIVE_PROCESS = 3
} CUcomputemode;

#ifdef __cplusplus
extern "C" {
#endif

/* Initializes the driver: creates the process's runtime if there is none.
 * Flags must be 0. */
SPCUDA_API CUresult cuInit(unsigned int Flags) SPCUDA_NOEXCEPT;
/* CUDART_VERSION, as cudaDriverGetVersion. Needs no initialization. */
SPCUDA_API CUresult cuDriverGetVersion(int* driverVersion) SPCUDA_NOEXCEPT;

/* The simulated devices, as cudaGetDeviceCount. */
SPCUDA_API CUresult cuDeviceGetCount(int* count) SPCUDA_NOEXCEPT;
/* The device of ordinal `ordinal`: CUDA_ERROR_INVALID_DEVICE out of range. */
SPCUDA_API CUresult cuDeviceGet(CUdevice* device, int ordinal) SPCUDA_NOEXCEPT;
/* The device's name (cudaDeviceProp::name), cut to len - 1 characters and
 * terminated. */
SPCUDA_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) SPCUDA_NOEXCEPT;
/* What cudaDeviceGetAttribute answers for the attribute of the same number;
 * CUDA_ERROR_INVALID_VALUE for one not in CUdevice_attribute. */
SPCUDA_API CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib,
                                         CUdevice dev) SPCUDA_NOEXCEPT;

/* "CUDA_ERROR_INVALID_VALUE" and a sentence for a code. They need no
 * initialization. A value not in CUresult: CUDA_ERROR_INVALID_VALUE, and
 * *pStr is set to NULL. */
SPCUDA_API CUresult cuGetErrorName(CUresult error, const char** pStr) SPCUDA_NOEXCEPT;
SPCUDA_API CUresult cuGetErrorString(CUresult error, const char** pStr) SPCUDA_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STREAMPOOL_CUDA_CUDA_H_ */
