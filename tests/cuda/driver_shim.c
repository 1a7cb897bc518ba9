/* A CUDA driver on a machine with no GPU: libcuda.so.1 for `sdpa_aot plans` (ctest
 * cuda.sdpa_aot), so the real libcudnn finalizes execution plans for an H100 that this
 * machine does not have.
 *
 * Why it is needed: cuDNN's SDPA engines are runtime-compiled, and their plan finalization
 * opens libcuda.so.1 and resolves the driver entry points below. Without one the engines
 * report "cannot load libcuda" (CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING);
 * the toolkit's stub libcuda.so, linked under that name, makes cuDNN go on to load the
 * compiled engine, which the stub refuses (CUDA_ERROR_STUB_LIBRARY). This driver answers as a real
 * one does on a machine without a device: cuInit fails with CUDA_ERROR_NO_DEVICE, the
 * device count is 0 (CUDA_ERROR_NOT_INITIALIZED), and every other entry point exists and
 * fails. cuDNN then finalizes the plan for the device the DEVICEPROP JSON describes (its
 * deviceless ahead-of-time path) and loads nothing. So the test proves the library accepts
 * the graphs and picks and configures an engine for the H100, not that the engine computes
 * the right values: the emulated device's parity tests and tests/cuda/gpu_checks.sh on a
 * real H100 do that. */
#define SHIM_ERROR_NOT_INITIALIZED 3
#define SHIM_ERROR_NO_DEVICE 100

/* Entry points cuDNN 9.19 resolves from libcuda.so.1 (found with LD_DEBUG=bindings) beyond
 * those defined below: each exists, so the library opens, and fails as without a device. */
#define SHIM_WITHOUT_DEVICE(X)                                                                \
    X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxGetLimit) X(cuCtxPopCurrent)                  \
    X(cuCtxPushCurrent) X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRelease)   \
    X(cuDevicePrimaryCtxReset) X(cuDevicePrimaryCtxRetain) X(cuFuncGetAttribute)              \
    X(cuFuncSetAttribute) X(cuKernelGetAttribute) X(cuKernelSetAttribute)                     \
    X(cuLaunchCooperativeKernel) X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuLibraryGetKernel)  \
    X(cuLibraryLoadData) X(cuLibraryLoadFromFile) X(cuLibraryUnload) X(cuLinkAddData)         \
    X(cuLinkAddData_v2) X(cuLinkAddFile_v2) X(cuLinkComplete) X(cuLinkCreate)                 \
    X(cuLinkCreate_v2) X(cuLinkDestroy) X(cuMemcpyDtoH_v2) X(cuModuleGetFunction)             \
    X(cuModuleGetGlobal_v2) X(cuModuleLoadData) X(cuModuleLoadDataEx)                         \
    X(cuModuleLoadFatBinary) X(cuModuleUnload) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
    X(cuOccupancyMaxPotentialClusterSize) X(cuStreamGetCtx) X(cuStreamSynchronize)            \
    X(cuTensorMapEncodeTiled) X(cuGetExportTable)

#define SHIM_DEFINE_WITHOUT_DEVICE(name)                                                      \
    int name(void);                                                                           \
    int name(void) { return SHIM_ERROR_NOT_INITIALIZED; }
SHIM_WITHOUT_DEVICE(SHIM_DEFINE_WITHOUT_DEVICE)

int cuInit(unsigned flags);
int cuInit(unsigned flags)
{
    (void)flags;
    return SHIM_ERROR_NO_DEVICE;
}

int cuDeviceGetCount(int *count);
int cuDeviceGetCount(int *count)
{
    *count = 0;
    return SHIM_ERROR_NOT_INITIALIZED;
}

int cuDriverGetVersion(int *version);
int cuDriverGetVersion(int *version)
{
    *version = 13000;
    return 0;
}

int cuGetErrorString(int error, const char **text);
int cuGetErrorString(int error, const char **text)
{
    *text = error == SHIM_ERROR_NO_DEVICE ? "no CUDA-capable device is detected (driver shim)"
                                          : "initialization error (driver shim: no device)";
    return 0;
}

int cuGetErrorName(int error, const char **name);
int cuGetErrorName(int error, const char **name)
{
    *name = error == SHIM_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_NOT_INITIALIZED";
    return 0;
}
