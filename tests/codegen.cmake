# codegen.cmake — tests of the code generator (owner: codegen).
#   codegen.c11.CASE       tests/cg/build_graphs.c models (one per op family, every
#                          attribute that changes the index arithmetic), tiled and
#                          cuBLAS paths and the --jit host file, compiled with gcc
#                          -std=c11 -Werror; with CUDA: nvcc sm_80+sm_90 --Werror
#                          all-warnings (host side -Werror too) and NVRTC (label
#                          compilers: the sanitizer stage leaves them out, since
#                          codegen.run.* runs the sanitized build_graphs on every
#                          case, and the compilers would see the release stage's code)
#   codegen.run.tiled|cublas  every case run on the CPU emulation through its
#                          generated API (load, infer_io, save/reload), in both
#                          fiber orders, in checked mode (guarded buffers: any
#                          out-of-bounds access fails), compared with PyTorch
#   codegen.run.fuse*     the same after the fuse and plan passes at -O3 (build_graphs --fuse)
#   codegen.ptxas          registers/spills/barriers per kernel (ptxas -v); fails on
#                          a spill or an NCC_KF_BARRIER flag ptxas disagrees with
#   codegen.ptxas.train    the same for the training code of every example with a
#                          train block, at -O0 and -O3, sm_80 and sm_90
#   codegen.example.NAME   examples/*.net through ncc: every compiler, cleanly (label
#                          compilers: the sanitizer stage of run_all.sh leaves them out)
#   codegen.bad.NAME       tests/cg/bad/*.net: refused with exit 1, a message, no output
#   codegen.readable       names by role and by buffer, no arithmetic noise, kernels still shared
#   codegen.batch_grids    every inference launch of every example follows the call's batch (m->nb)
#   codegen.graphs.*       CUDA graphs under emulation (tests/cg/graphs_check.c): inference at
#                          changing batches and inputs, and K training steps, bit-identical with
#                          graphs on and off, and the captures and replays counted
#   codegen.report_waves   the report's blocks, blocks per SM and waves are the generated launches'
#                          by the documented occupancy model; a small conv under one wave is
#                          timed at roofline / (blocks / SMs) (check_report_waves.py)
#   codegen.banks          the tile stores laid out for the shared-memory banks meet each bank once,
#                          worked out from the generated source (banks.sh, bank_report.py): a float32
#                          operand's A tile at fp16, bf16 and tf32, int8's gathered B tile, the
#                          convolutions' gathered B tile at tf32, fp16 and bf16 (a warp 16 columns
#                          wide), every store of the CUDA-core kernels (ResNet-18 at fp32)
# Working files under build/tests/cg go when a test passes (NCC_KEEP_WORK=1
# keeps them); a test whose compiler is missing reports itself skipped.

set(NCC_CG_DIR ${CMAKE_CURRENT_SOURCE_DIR}/cg)
set(NCC_CG_OUT ${CMAKE_CURRENT_BINARY_DIR}/cg)
set(NCC_CG_RT ${CMAKE_CURRENT_SOURCE_DIR}/../runtime)
set(NCC_CG_CASES unary binary conv pool norms softmax move gemm loss net fused)

add_executable(cg_build_graphs ${NCC_CG_DIR}/build_graphs.c)
target_link_libraries(cg_build_graphs PRIVATE ncccore)

# nvcc and NVRTC as tests/CMakeLists.txt found them; compile_model.sh takes
# "-" for a missing one, runs the other compilers and then reports itself
# skipped (NCC_SKIP_CODE): a test that could not do all it says is not a pass
set(cg_nvcc -)
set(cg_nvrtc -)
if(NCC_NVCC)
  set(cg_nvcc ${NCC_NVCC})
endif()
if(NCC_NVRTC_LIB AND NCC_NVRTC_INC)
  add_executable(cg_nvrtc_check ${NCC_CG_DIR}/nvrtc_check.c)
  target_include_directories(cg_nvrtc_check PRIVATE ${NCC_NVRTC_INC})
  target_link_libraries(cg_nvrtc_check PRIVATE ${NCC_NVRTC_LIB})
  set(cg_nvrtc $<TARGET_FILE:cg_nvrtc_check>)
endif()

# the case list here must be build_graphs' own
string(REPLACE ";" " " cg_cases_str "${NCC_CG_CASES}")
add_test(NAME codegen.case_list
         COMMAND sh -c "[ \"$(echo $(\"$1\" --list))\" = \"$2\" ]" _ $<TARGET_FILE:cg_build_graphs> "${cg_cases_str}")

foreach(c ${NCC_CG_CASES})
  add_test(NAME codegen.c11.${c}
           COMMAND sh ${NCC_CG_DIR}/compile_model.sh ${NCC_CG_OUT}/tiled ${NCC_CG_RT} ${cg_nvcc} ${cg_nvrtc}
                   --case $<TARGET_FILE:cg_build_graphs> ${c})
  add_test(NAME codegen.c11.${c}.cublas
           COMMAND sh ${NCC_CG_DIR}/compile_model.sh ${NCC_CG_OUT}/cublas ${NCC_CG_RT} ${cg_nvcc} ${cg_nvrtc}
                   --case $<TARGET_FILE:cg_build_graphs> ${c} --cublas)
  # nvcc is the slow part: the cuBLAS variant's kernels are the simple ones, sm_90 is enough
  set_tests_properties(codegen.c11.${c}.cublas PROPERTIES ENVIRONMENT "CG_ARCHS=90")
  set_tests_properties(codegen.c11.${c} codegen.c11.${c}.cublas PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE}
                       LABELS compilers)
endforeach()

add_test(NAME codegen.run.tiled
         COMMAND sh ${NCC_CG_DIR}/run_cases.sh $<TARGET_FILE:cg_build_graphs> ${NCC_CG_RT}
                 $<TARGET_FILE_DIR:nccrt> ${NCC_CG_OUT}/run_tiled ${NCC_PYTEST_SH})
add_test(NAME codegen.run.cublas
         COMMAND sh ${NCC_CG_DIR}/run_cases.sh $<TARGET_FILE:cg_build_graphs> ${NCC_CG_RT}
                 $<TARGET_FILE_DIR:nccrt> ${NCC_CG_OUT}/run_cublas ${NCC_PYTEST_SH} --cublas)
# the fuse and plan passes at -O3: the chains of the `fused` case and a whole net
add_test(NAME codegen.run.fuse
         COMMAND sh ${NCC_CG_DIR}/run_cases.sh $<TARGET_FILE:cg_build_graphs> ${NCC_CG_RT}
                 $<TARGET_FILE_DIR:nccrt> ${NCC_CG_OUT}/run_fuse ${NCC_PYTEST_SH} --fuse fused net)
add_test(NAME codegen.run.fuse_cublas
         COMMAND sh ${NCC_CG_DIR}/run_cases.sh $<TARGET_FILE:cg_build_graphs> ${NCC_CG_RT}
                 $<TARGET_FILE_DIR:nccrt> ${NCC_CG_OUT}/run_fuse_cublas ${NCC_PYTEST_SH} --cublas --fuse fused net)
# fusion must actually merge: the `fused` case launches 29 kernels unfused and
# 13 fused (conv+bias+relu, conv+bn+relu, residual add+relu, bn+relu6, dw*scale+hardswish,
# matmul+add+tanh, sub+leaky_relu+silu; the linear output with two readers
# stays stored; the pool output with two elementwise readers is computed
# again for the second one, -O3's recompute rule; the avgpool read only by
# the linear is computed in its GEMM's loads, -O3's pool-prologue rule)
add_test(NAME codegen.fuse_count
         COMMAND sh -c "d=\"$2\" && rm -rf \"$d\" && mkdir -p \"$d/a\" \"$d/b\" && \"$1\" \"$d/a\" fused && \"$1\" \"$d/b\" --fuse fused && [ $(grep -c 'ncc_launch(' \"$d/a/fused.cu\") = 29 ] && [ $(grep -c 'ncc_launch(' \"$d/b/fused.cu\") = 13 ] && rm -rf \"$d\""
                 _ $<TARGET_FILE:cg_build_graphs> ${NCC_CG_OUT}/fuse_count)
# A sanitized libnccrt needs the ASan runtime first in the program's library
# list: the test programs are then built with the same sanitizers.
set(cg_env "NCC_EMU_THREADS=2;NCC_CHECK=1")
if(NCC_SANITIZE)
  list(APPEND cg_env "CG_CFLAGS=-fsanitize=address,undefined")
endif()
set_tests_properties(codegen.run.tiled codegen.run.cublas codegen.run.fuse codegen.run.fuse_cublas
                     PROPERTIES ENVIRONMENT "${cg_env}")

# generated models through the runtime's NVRTC prelude (--emit=ptx, as --jit loads them); no GPU needed
add_test(NAME codegen.emit_ptx
         COMMAND sh ${NCC_CG_DIR}/emit_ptx.sh $<TARGET_FILE:ncc> ${CMAKE_CURRENT_SOURCE_DIR}/../examples
                 ${NCC_CG_OUT}/emit_ptx)
set_tests_properties(codegen.emit_ptx PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE} LABELS "codegen;compilers")

if(NCC_NVCC)
  add_test(NAME codegen.ptxas
           COMMAND sh -c "d=\"$3\" && rm -rf \"$d\" && mkdir -p \"$d\" && \"$1\" \"$d\" && \"$4\" \"$2\"/ptxas_report.py --check --nvcc \"$5\" -I \"$6\" -I \"$d\" \"$d\"/*.cu && rm -rf \"$d\""
                   _ $<TARGET_FILE:cg_build_graphs> ${NCC_CG_DIR} ${NCC_CG_OUT}/ptxas ${NCC_PYTHON} ${NCC_NVCC} ${NCC_CG_RT})
  add_test(NAME codegen.ptxas.train
           COMMAND sh ${NCC_CG_DIR}/ptxas_train.sh $<TARGET_FILE:ncc> ${NCC_PYTHON} ${NCC_NVCC} ${NCC_CG_RT}
                   ${NCC_CG_OUT}/ptxas_train ${CMAKE_CURRENT_SOURCE_DIR}/../examples)
  # slow: a minute of ptxas over every example's training code; the sanitizer stage leaves it out
  set_tests_properties(codegen.ptxas.train PROPERTIES LABELS "codegen;slow")
  # ptxas over code the release stage compiles too: left out under the sanitizers
  set_tests_properties(codegen.ptxas PROPERTIES LABELS "codegen;compilers")
else()
  ncc_skipped_test(codegen.ptxas "nvcc not found (CUDA_HOME=${NCC_CUDA_HOME}, PATH)")
  ncc_skipped_test(codegen.ptxas.train "nvcc not found (CUDA_HOME=${NCC_CUDA_HOME}, PATH)")
endif()

# the generated code reads like code written by hand: kernel parameters named
# by role, buffers by name, no "1 &&" or "* 1"; identical kernels still shared
add_test(NAME codegen.readable
         COMMAND ${NCC_PYTEST} ${NCC_CG_DIR}/check_readable.py $<TARGET_FILE:ncc> $<TARGET_FILE:cg_build_graphs>
                 ${CMAKE_CURRENT_SOURCE_DIR}/../examples ${NCC_CG_OUT}/readable)

file(GLOB NCC_CG_EXAMPLES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/../examples/*.net)
foreach(f ${NCC_CG_EXAMPLES})
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME codegen.example.${n}
           COMMAND sh ${NCC_CG_DIR}/compile_model.sh ${NCC_CG_OUT}/examples ${NCC_CG_RT} ${cg_nvcc} ${cg_nvrtc}
                   --net $<TARGET_FILE:ncc> ${f})
  set_tests_properties(codegen.example.${n} PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE} LABELS compilers)
endforeach()

# models codegen refuses: exit 1, the stated message, no output file
file(GLOB NCC_CG_BAD CONFIGURE_DEPENDS ${NCC_CG_DIR}/bad/*.net)
foreach(f ${NCC_CG_BAD})
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME codegen.bad.${n}
           COMMAND sh ${NCC_CG_DIR}/run_bad.sh $<TARGET_FILE:ncc> ${f} ${NCC_CG_OUT}/bad/${n})
endforeach()

# the cuBLAS path on the examples that use all its branches (3x3 and strided
# convolutions through im2col, 1x1 convolutions straight, depthwise direct)
foreach(n resnet18 mobilenet_v2)
  add_test(NAME codegen.example.${n}.cublas
           COMMAND sh ${NCC_CG_DIR}/compile_model.sh ${NCC_CG_OUT}/examples_cublas ${NCC_CG_RT} ${cg_nvcc} ${cg_nvrtc}
                   --net $<TARGET_FILE:ncc> ${CMAKE_CURRENT_SOURCE_DIR}/../examples/${n}.net --cublas)
  set_tests_properties(codegen.example.${n}.cublas PROPERTIES ENVIRONMENT "CG_ARCHS=90"
                       SKIP_RETURN_CODE ${NCC_SKIP_CODE} LABELS compilers)
endforeach()

# the tensor-core GEMMs (--precision=tf32): inline PTX mma.sync through nvcc
# (sm_80, sm_90) and NVRTC, the emulation build as strict C11
foreach(n resnet18 mlp vgg11)
  add_test(NAME codegen.example.${n}.tf32
           COMMAND sh ${NCC_CG_DIR}/compile_model.sh ${NCC_CG_OUT}/examples_tf32 ${NCC_CG_RT} ${cg_nvcc} ${cg_nvrtc}
                   --net $<TARGET_FILE:ncc> ${CMAKE_CURRENT_SOURCE_DIR}/../examples/${n}.net --precision=tf32)
  set_tests_properties(codegen.example.${n}.tf32 PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE} LABELS compilers)
endforeach()
# fp16 and bf16 operands (ncc_fp16, ncc_bf16) on the same tensor cores
foreach(np resnet18:fp16 mobilenet_v2:bf16 mlp:bf16)
  string(REPLACE ":" ";" np_ ${np})
  list(GET np_ 0 n)
  list(GET np_ 1 p)
  add_test(NAME codegen.example.${n}.${p}
           COMMAND sh ${NCC_CG_DIR}/compile_model.sh ${NCC_CG_OUT}/examples_${p} ${NCC_CG_RT} ${cg_nvcc} ${cg_nvrtc}
                   --net $<TARGET_FILE:ncc> ${CMAKE_CURRENT_SOURCE_DIR}/../examples/${n}.net --precision=${p})
  set_tests_properties(codegen.example.${n}.${p} PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE} LABELS compilers)
endforeach()
# without the pipelined tiles (--gemm-pipeline=off; on, the default, is above): every compiler, cleanly
add_test(NAME codegen.example.resnet18.fp16.nopipeline
         COMMAND sh ${NCC_CG_DIR}/compile_model.sh ${NCC_CG_OUT}/examples_nopipeline ${NCC_CG_RT} ${cg_nvcc} ${cg_nvrtc}
                 --net $<TARGET_FILE:ncc> ${CMAKE_CURRENT_SOURCE_DIR}/../examples/resnet18.net
                 "--precision=fp16 --gemm-pipeline=off")
set_tests_properties(codegen.example.resnet18.fp16.nopipeline PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE} LABELS compilers)

# the training ops' kernels (tests/cg/build_train.c): each op's result against
# PyTorch's autograd in float64, on the emulation in checked mode, both fiber
# orders; every model also through nvcc for sm_80 where nvcc is found
add_executable(cg_build_train ${NCC_CG_DIR}/build_train.c)
target_link_libraries(cg_build_train PRIVATE ncccore)
# (not under the sanitizers: nvcc would compile the release stage's code again)
set(cg_train_nvcc ${cg_nvcc})
if(NCC_SANITIZE)
  set(cg_train_nvcc -)
endif()
add_test(NAME codegen.run.train
         COMMAND sh ${NCC_CG_DIR}/run_train.sh $<TARGET_FILE:cg_build_train> ${NCC_CG_RT}
                 $<TARGET_FILE_DIR:nccrt> ${NCC_CG_OUT}/run_train ${NCC_PYTEST_SH} ${cg_train_nvcc})
set(cg_train_env "NCC_EMU_THREADS=2")
if(NCC_SANITIZE)
  list(APPEND cg_train_env "CG_CFLAGS=-fsanitize=address,undefined")
endif()
set_tests_properties(codegen.run.train PROPERTIES ENVIRONMENT "${cg_train_env}")
# the optimizer update's kernel, every TrainCfg variant, three steps against torch.optim in float32
add_executable(cg_train_optimizer ${NCC_CG_DIR}/train_optimizer.c)
target_link_libraries(cg_train_optimizer PRIVATE ncccore)
add_test(NAME codegen.run.train_optimizer
         COMMAND ${NCC_PYTEST} ${NCC_CG_DIR}/check_train_optimizer.py $<TARGET_FILE:cg_train_optimizer> ${NCC_CG_RT}
                 $<TARGET_FILE_DIR:nccrt> ${NCC_CG_OUT}/train_optimizer)
set_tests_properties(codegen.run.train_optimizer PROPERTIES ENVIRONMENT "${cg_train_env}")

# a smaller batch launches less: every launch of every example's inference
# follows the call's batch (m->nb), at -O0/-O2/-O3 and on the cuBLAS path
add_test(NAME codegen.batch_grids
         COMMAND ${NCC_PYTEST} ${NCC_CG_DIR}/check_batch_grids.py $<TARGET_FILE:ncc>
                 ${CMAKE_CURRENT_SOURCE_DIR}/../examples ${NCC_CG_OUT}/batch_grids)
set_tests_properties(codegen.batch_grids PROPERTIES LABELS "codegen;batch" TIMEOUT 300)

# CUDA graphs: each step captured once and replayed, under emulation (the
# emulator records the launches with their argument values and replays them,
# as a GPU graph would); bit-identical to the same model with graphs off:
# lenet (SGD with momentum, dropout: live step and learning rate, partial
# training batches), mlp (Adam's bias corrections), the cuBLAS path, slices of
# the batch (--max-memory), and two convolution nets at -O3 for inference
set(cg_graph_cfgs
  "lenet|train|lenet.net --set N=4"
  "mlp|train|mlp.net --set N=8"
  "lenet_cublas|train|lenet.net --set N=4 --cublas"
  "lenet_slices|infer|lenet.net --set N=16 --freeze --max-memory=150K"
  "resnet18_cublas|infer|resnet18.net --set N=2 --set S=32 --cublas -O3"
  "mobilenet_v2|infer|mobilenet_v2.net --set N=2 --set S=32 -O3")
foreach(cfg ${cg_graph_cfgs})
  string(REPLACE "|" ";" parts "${cfg}")
  list(GET parts 0 n)
  list(GET parts 1 what)
  list(GET parts 2 args)
  separate_arguments(args UNIX_COMMAND "${args}")
  list(GET args 0 netfile)
  list(REMOVE_AT args 0)
  add_test(NAME codegen.graphs.${n}
           COMMAND sh ${NCC_CG_DIR}/run_graphs.sh $<TARGET_FILE:ncc> ${NCC_CG_RT} $<TARGET_FILE_DIR:nccrt>
                   ${NCC_CG_OUT}/graphs_${n} ${what} ${CMAKE_CURRENT_SOURCE_DIR}/../examples/${netfile} ${args})
  set_tests_properties(codegen.graphs.${n} PROPERTIES ENVIRONMENT "${cg_train_env}" LABELS "codegen;graphs")
endforeach()
# the report's occupancy and waves against the launches of the generated code
add_test(NAME codegen.report_waves
         COMMAND ${NCC_PYTEST} ${NCC_CG_DIR}/check_report_waves.py $<TARGET_FILE:ncc>
                 ${CMAKE_CURRENT_SOURCE_DIR}/../examples ${NCC_CG_OUT}/report_waves)
set_tests_properties(codegen.report_waves PROPERTIES LABELS "codegen;report" TIMEOUT 300)
add_test(NAME codegen.banks
         COMMAND sh ${NCC_CG_DIR}/banks.sh $<TARGET_FILE:ncc> ${NCC_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/..
                 ${NCC_CG_OUT}/banks)
set_tests_properties(codegen.banks PROPERTIES LABELS "codegen")

# --precision=int8 (int8 operands, int32 sums, the dequantizing epilogue):
# calibrated on random rows by `ncc bench`, then through gcc, nvcc (sm_80,
# sm_90) and NVRTC, and ptxas without spills: ResNet-18 (tiled convolutions,
# the GEMV head), MobileNetV2 (the direct depthwise kernel), LeNet at -O3
# (the pooling computed in the GEMM's loads)
foreach(spec "resnet18|3 32 32|2|--set S=32" "mobilenet_v2|3 32 32|2|--set S=32" "lenet|1 28 28|64|-O3")
  string(REPLACE "|" ";" spec_ "${spec}")
  list(GET spec_ 0 n)
  list(GET spec_ 1 shape)
  list(GET spec_ 2 rows)
  list(GET spec_ 3 extra)
  separate_arguments(extra_ UNIX_COMMAND "${extra}")
  add_test(NAME codegen.example.${n}.int8
           COMMAND sh ${NCC_CG_DIR}/int8_compile.sh $<TARGET_FILE:ncc> ${NCC_PYTHON}
                   ${CMAKE_CURRENT_SOURCE_DIR}/../examples/${n}.net ${NCC_CG_OUT}/examples_int8_${n} ${NCC_CG_RT}
                   ${cg_nvcc} ${cg_nvrtc} ${rows} "${shape}" ${extra_})
  # slow: nvcc's minutes, not ncc's; the sanitizer stage leaves them out (the
  # int8 calibration and codegen run there in driver.int8_inputs and oracle_int8_*)
  set_tests_properties(codegen.example.${n}.int8 PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE} LABELS "codegen;int8;slow")
endforeach()
