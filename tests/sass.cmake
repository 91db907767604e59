# sass.cmake — the kernel-quality report from the SASS (tests/cg/sass_report.py,
# docs/gpu.md) (owner: codegen).
#   sass.parse    the report's parsers on hand-written SASS in nvdisasm's and
#                 cuobjdump's formats (loops, the main loop, the instruction
#                 mix), the launch-geometry parser and the occupancy rules; no
#                 tool needed
#   sass.report   the report on examples/lenet.net at -O3, sm_80 and sm_90:
#                 every kernel has a register count, a block size and an
#                 occupancy, every forward convolution and linear layer a main
#                 loop with FFMAs and shared loads.  Needs nvcc and nvdisasm or
#                 cuobjdump (the pip wheels in the venv tests/install-deps.sh
#                 makes, ~/.cache/ncc/sass-venv, or $NCC_SASS_VENV): skipped
#                 without them.
#   sass.tensor_cores  ResNet-18 and the MLP at --precision=tf32 (and ResNet-18
#                 at fp16, the MLP at bf16; ResNet-50 at tf32, MobileNetV2 at bf16
#                 and VGG-16 at fp16 at sm_90): every tiled
#                 GEMM is a tensor-core kernel whose main loop has MMAs, at
#                 most 2 shared loads per MMA, no spills, no stack frame, >= 2 blocks per SM;
#                 so too a training step's two strided data gradients by phases
#                 (a 3x3 and a 1x1 at stride 2, fp16), the 3x3's transposed weight
#                 staged by cp.async (tools as sass.report; skipped without them)
#   sass.fp32_wide  the float32 GEMM's float4 tiles at sm_80 and sm_90: the wide one (128 x 128,
#                 8 x 8 a thread) at least 80% FFMA, one 128-bit shared load for 16 FFMAs at
#                 most; the 64 x 64 one (4 x 4) 70%, one for 8; no spills, two blocks per SM;
#                 the wide tile double-buffered (one barrier a K tile), 64x64 with
#                 --gemm-stages=2; the epilogues four columns a 128-bit store where the
#                 output allows (tools as sass.report)
add_test(NAME sass.parse COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/cg/check_sass_report.py --parse)
if(NCC_NVCC)
  add_test(NAME sass.report
           COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/cg/check_sass_report.py --report $<TARGET_FILE:ncc>
                   ${NCC_NVCC} ${CMAKE_CURRENT_SOURCE_DIR}/../examples/lenet.net ${CMAKE_CURRENT_BINARY_DIR}/cg/sass_report)
  add_test(NAME sass.tensor_cores
           COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/cg/check_sass_report.py --tensor-cores $<TARGET_FILE:ncc>
                   ${NCC_NVCC} ${CMAKE_CURRENT_SOURCE_DIR}/../examples ${CMAKE_CURRENT_BINARY_DIR}/cg/sass_tc)
  add_test(NAME sass.fp32_wide
           COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/cg/check_sass_report.py --fp32-wide $<TARGET_FILE:ncc>
                   ${NCC_NVCC} ${CMAKE_CURRENT_BINARY_DIR}/cg/sass_wide)
  set_tests_properties(sass.report sass.tensor_cores sass.fp32_wide PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE})
else()
  ncc_skipped_test(sass.report "nvcc not found (CUDA_HOME=${NCC_CUDA_HOME}, PATH)")
  ncc_skipped_test(sass.tensor_cores "nvcc not found (CUDA_HOME=${NCC_CUDA_HOME}, PATH)")
  ncc_skipped_test(sass.fp32_wide "nvcc not found (CUDA_HOME=${NCC_CUDA_HOME}, PATH)")
endif()
set_tests_properties(sass.parse sass.report sass.fp32_wide PROPERTIES LABELS "sass;codegen")
# slow: a minute of nvcc and disassembly; the sanitizer stage leaves it out
set_tests_properties(sass.tensor_cores PROPERTIES LABELS "sass;codegen;slow")
