# The CPU backend's sources, written once (CMakeLists.txt here reads them). The kernels are
# every kernels/cpu/*.c (oneDNN's two only with oneDNN) and every kernels/cpu/ops/*.c, the
# ops written in one file each (kernel and fg_cpu_op_<entry>; sdk/README.md, "Adding an op"):
# a new file there is built without a CMake edit (CONFIGURE_DEPENDS re-globs at build time).
set(FULGUR_CPU_BACKEND_C_SOURCES
  cpu_plugin.c
  cpu_device.c
  cpu_event.c
  cpu_ops.c
  cpu_optim_fused.c
  cpu_loss_scale.c
  cpu_fp8.c
  cpu_nhwc.c
  cpu_ops_lm.c
  cpu_ops_llama.c
  cpu_ops_sync_bn.c
  cpu_conv.c
  cpu_bf16.c
  cpu_gemm_choice.c
  cpu_gemm_route.c
  cpu_tuning.c
  cpu_tuning_measure.c
  cpu_machine.c)
file(GLOB FULGUR_CPU_KERNEL_SOURCES CONFIGURE_DEPENDS
  "${PROJECT_SOURCE_DIR}/kernels/cpu/*.c" "${PROJECT_SOURCE_DIR}/kernels/cpu/ops/*.c")
list(SORT FULGUR_CPU_KERNEL_SOURCES)
# oneDNN's kernels: the plugin adds them when oneDNN was found
set(FULGUR_CPU_DNNL_SOURCES
  "${PROJECT_SOURCE_DIR}/kernels/cpu/gemm_dnnl.c" "${PROJECT_SOURCE_DIR}/kernels/cpu/conv2d_dnnl.c")
list(REMOVE_ITEM FULGUR_CPU_KERNEL_SOURCES ${FULGUR_CPU_DNNL_SOURCES})
