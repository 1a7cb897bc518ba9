# The CUDA backend's sources, written once: the plugin (CMakeLists.txt here) and its two
# builds against the emulated device (tests/cudaemu/CMakeLists.txt) compile this list.
set(FULGUR_CUDA_BACKEND_C_SOURCES
  cuda_plugin.c
  cuda_device.c
  cuda_event.c
  cuda_graph.c
  cuda_gemm.c
  cuda_gemm_fp8.c
  cuda_conv.c
  cuda_conv_algo.c
  cuda_layout.c
  cuda_ops.c
  cuda_optim_fused.c
  cuda_loss_scale.c
  cuda_layer_ops.c
  cuda_lm_ops.c
  cuda_llama_ops.c
  cuda_sync_bn_ops.c
  cuda_attention_gemm.c
  cuda_sdpa.c
  cuda_sdpa_exec.c
  cuda_sdpa_graph.c
  cuda_sdpa_plan.c)
# The kernels: every kernels/cuda/*.cu and every kernels/cuda/ops/*.cu, the ops written in one
# file each (kernels, launch and extern "C" fg_cuda_op_<entry>; sdk/README.md, "Adding an
# op"). The nvcc plugin and both emulated builds (plain and asan) compile this same set; a new
# file is built without a CMake edit (CONFIGURE_DEPENDS re-globs at build time).
file(GLOB FULGUR_CUDA_KERNEL_SOURCES CONFIGURE_DEPENDS
  "${CMAKE_CURRENT_LIST_DIR}/../../kernels/cuda/*.cu"
  "${CMAKE_CURRENT_LIST_DIR}/../../kernels/cuda/ops/*.cu")
list(SORT FULGUR_CUDA_KERNEL_SOURCES)
