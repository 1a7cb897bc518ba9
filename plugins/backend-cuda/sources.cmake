# The CUDA backend's C sources, written once: the plugin (CMakeLists.txt here) and its two
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
