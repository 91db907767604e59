# runtime.cmake — tests of libnccrt (owner: runtime): the emulator against plain
# C loops, the device interface, safetensors/.npy (with PyTorch and NumPy as the
# independent writers), and the shared kernel subset compiled by gcc -std=c11,
# nvcc and NVRTC.  Everything here runs without a GPU.

set(NCC_RT_TESTS ${CMAKE_CURRENT_SOURCE_DIR}/rt)
set(NCC_RT_INC ${CMAKE_CURRENT_SOURCE_DIR}/../runtime)

# the emulator: test_emu.c includes kernels.cu as C (NCC_EMU);
# -ffp-contract=off so that the reference loops add exactly like the kernels
add_executable(rt_test_emu ${NCC_RT_TESTS}/test_emu.c)
target_compile_definitions(rt_test_emu PRIVATE NCC_EMU)
target_compile_options(rt_test_emu PRIVATE -ffp-contract=off)
target_include_directories(rt_test_emu PRIVATE ${NCC_RT_TESTS})
target_link_libraries(rt_test_emu PRIVATE nccrt Threads::Threads m)
add_test(NAME rt.emu COMMAND rt_test_emu)
set_tests_properties(rt.emu PROPERTIES ENVIRONMENT "NCC_EMU_THREADS=2")
# every barrier kernel again with the fibers of each phase in reverse order
add_test(NAME rt.emu_reverse COMMAND rt_test_emu)
set_tests_properties(rt.emu_reverse PROPERTIES ENVIRONMENT "NCC_EMU_THREADS=2;NCC_FIBER_ORDER=reverse")
add_test(NAME rt.emu_one_thread COMMAND rt_test_emu)
set_tests_properties(rt.emu_one_thread PROPERTIES ENVIRONMENT "NCC_EMU_THREADS=1")
# and in checked mode: barrier-free kernels then run thread by thread
add_test(NAME rt.emu_checked COMMAND rt_test_emu)
set_tests_properties(rt.emu_checked PROPERTIES ENVIRONMENT "NCC_EMU_THREADS=2;NCC_CHECK=1")
# test_emu skips itself (NCC_SKIP_CODE) when it has one thread it was not asked for:
# the concurrency check needs two
set_tests_properties(rt.emu rt.emu_reverse rt.emu_one_thread rt.emu_checked PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE})

# a kernel that runs on fibers is compiled once in the emulation build: no whole-block copy
add_test(NAME rt.fiber_only_copy
         COMMAND sh ${NCC_RT_TESTS}/fiber_only_copy.sh $<TARGET_FILE:ncc> ${NCC_RT_INC}
                 ${CMAKE_CURRENT_BINARY_DIR}/fiber_only_copy ${CMAKE_CURRENT_SOURCE_DIR}/../examples)

# the portable fiber switch (ucontext, used where there is no x86-64 assembly),
# forced on x86-64 in a second build of the library so that it stays tested
add_library(rt_nccrt_ucontext SHARED ${NCC_RT_SRC})
target_compile_definitions(rt_nccrt_ucontext PRIVATE NCC_EMU_UCONTEXT)
target_include_directories(rt_nccrt_ucontext PUBLIC ${NCC_RT_INC})
target_link_libraries(rt_nccrt_ucontext PRIVATE PkgConfig::CJSON ${BLAS_LIBRARIES} Threads::Threads ${CMAKE_DL_LIBS} m)
add_executable(rt_test_emu_ucontext ${NCC_RT_TESTS}/test_emu.c)
target_compile_definitions(rt_test_emu_ucontext PRIVATE NCC_EMU)
target_compile_options(rt_test_emu_ucontext PRIVATE -ffp-contract=off)
target_include_directories(rt_test_emu_ucontext PRIVATE ${NCC_RT_TESTS})
target_link_libraries(rt_test_emu_ucontext PRIVATE rt_nccrt_ucontext Threads::Threads m)
add_test(NAME rt.emu_ucontext COMMAND rt_test_emu_ucontext)
set_tests_properties(rt.emu_ucontext PROPERTIES ENVIRONMENT "NCC_EMU_THREADS=2;NCC_FIBER_ORDER=reverse")

# the kernels as strict C11, exactly the flags of the emulation build (docs/generated-code.md)
add_test(NAME rt.kernels_c11
         COMMAND ${CMAKE_C_COMPILER} -x c -std=c11 -DNCC_EMU -Wall -Wextra -Werror -pedantic
                 -Werror=implicit-function-declaration -I${NCC_RT_INC} -c ${NCC_RT_TESTS}/kernels.cu -o /dev/null)

# nvcc (compile only: no GPU needed): device code, and the host side with
# ncc_cudart.h; NCC_NVCC is found in tests/CMakeLists.txt
if(NCC_NVCC)
  add_test(NAME rt.kernels_nvcc_cubin
           COMMAND ${NCC_NVCC} -arch=sm_90 -cubin --Werror all-warnings -I${NCC_RT_INC}
                   ${NCC_RT_TESTS}/kernels.cu -o ${CMAKE_CURRENT_BINARY_DIR}/rt_kernels.cubin)
  add_test(NAME rt.kernels_nvcc_host
           COMMAND ${NCC_NVCC} -arch=sm_90 -c --Werror all-warnings -Xcompiler -Wall,-Wextra -I${NCC_RT_INC}
                   ${NCC_RT_TESTS}/kernels.cu -o ${CMAKE_CURRENT_BINARY_DIR}/rt_kernels_host.o)
  # ptxas's barrier count must agree with every kernel's NCC_KF_BARRIER flag
  add_test(NAME rt.kernels_barrier_flags
           COMMAND sh ${NCC_RT_TESTS}/check_barrier_flags.sh ${NCC_NVCC} ${NCC_RT_INC} ${NCC_RT_TESTS}/kernels.cu
                   k_unflagged_barrier)
else()
  foreach(t rt.kernels_nvcc_cubin rt.kernels_nvcc_host rt.kernels_barrier_flags)
    ncc_skipped_test(${t} "nvcc not found (CUDA_HOME=${NCC_CUDA_HOME}, PATH)")
  endforeach()
endif()

# NVRTC through ncc_nvrtc_ptx and the jit prelude (NVRTC needs no GPU)
add_executable(rt_test_nvrtc ${NCC_RT_TESTS}/test_nvrtc.c)
target_link_libraries(rt_test_nvrtc PRIVATE nccrt)
add_test(NAME rt.nvrtc COMMAND rt_test_nvrtc ${NCC_RT_TESTS}/kernels.cu)
set_tests_properties(rt.nvrtc PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE})   # NVRTC does not load
# the prelude NVRTC gets defines what ncc_kernel.h defines (no NVRTC needed)
add_test(NAME rt.nvrtc_prelude
         COMMAND ${NCC_PYTHON} ${NCC_RT_TESTS}/prelude_check.py ${NCC_RT_INC}/ncc_kernel.h
                 ${CMAKE_CURRENT_SOURCE_DIR}/../runtime/dev_cuda.c)

# devices, sgemm, safetensors, npy
add_executable(rt_test_dev_io ${NCC_RT_TESTS}/test_dev_io.c)
target_link_libraries(rt_test_dev_io PRIVATE nccrt m)
add_test(NAME rt.dev_io COMMAND rt_test_dev_io)
add_test(NAME rt.torch_files
         COMMAND sh -c "d=$(mktemp -d) && ${NCC_PYTHON} ${NCC_RT_TESTS}/gen_torch_files.py $d && $<TARGET_FILE:rt_test_dev_io> $d; s=$?; rm -rf $d; exit $s")
# test_dev_io exits 77 when a GPU answers but NVRTC does not load
set_tests_properties(rt.dev_io rt.torch_files PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE})

# the micro-benchmark builds and runs (tiny sizes); real figures: rt_bench_emu
add_executable(rt_bench_emu ${NCC_RT_TESTS}/bench_emu.c)
target_compile_definitions(rt_bench_emu PRIVATE NCC_EMU)
target_include_directories(rt_bench_emu PRIVATE ${NCC_RT_TESTS})
target_link_libraries(rt_bench_emu PRIVATE nccrt m)
add_test(NAME rt.bench_smoke COMMAND rt_bench_emu --quick)

# libFuzzer targets for the two readers (clang, -DNCC_FUZZ=ON); they compile
# the readers themselves so that libFuzzer sees their coverage
if(NCC_FUZZ)
  file(GLOB NCC_RT_FUZZ_SRC ${NCC_RT_INC}/*.c)
  foreach(t safetensors npy)
    add_executable(fuzz_${t} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${t}.c ${NCC_RT_FUZZ_SRC})
    target_include_directories(fuzz_${t} PRIVATE ${NCC_RT_INC})
    target_compile_options(fuzz_${t} PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_${t} PRIVATE PkgConfig::CJSON ${BLAS_LIBRARIES} Threads::Threads ${CMAKE_DL_LIBS} m)
    set_target_properties(fuzz_${t} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  endforeach()
endif()

# cmake --install into a temporary prefix, then find_package(ncc) from a project outside
# (not in sanitizer builds: an outside program cannot load an ASan libnccrt)
if(NOT NCC_SANITIZE)
  add_test(NAME rt.install_find_package COMMAND sh ${NCC_RT_TESTS}/test_install.sh ${CMAKE_BINARY_DIR})
endif()

# the jit backend without a GPU: fake_cuda.c stands in for libcuda.so.1
# (found first through LD_LIBRARY_PATH), NVRTC is the real one
add_library(rt_fake_cuda SHARED ${NCC_RT_TESTS}/fake_cuda.c)
set_target_properties(rt_fake_cuda PROPERTIES OUTPUT_NAME cuda SOVERSION 1
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fakecuda)
add_executable(rt_test_jit ${NCC_RT_TESTS}/test_jit.c)
target_link_libraries(rt_test_jit PRIVATE nccrt ${CMAKE_DL_LIBS})
add_dependencies(rt_test_jit rt_fake_cuda)
add_test(NAME rt.jit_fake_driver COMMAND rt_test_jit ${NCC_RT_TESTS}/kernels.cu)
set_tests_properties(rt.jit_fake_driver PROPERTIES ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fakecuda"
                     SKIP_RETURN_CODE ${NCC_SKIP_CODE})   # NVRTC does not load

# the cudart backend: test_cudart.cu + kernels.cu built whole by nvcc and run
# (without a GPU it checks the error path; with one, the kernels and cuBLAS);
# not in sanitizer builds, for the same reason as the install test
if(NCC_NVCC AND NOT NCC_SANITIZE)
  get_filename_component(NCC_CUDA_LIB ${NCC_NVCC} DIRECTORY)
  set(NCC_CUDA_LIB ${NCC_CUDA_LIB}/../lib64)
  add_test(NAME rt.cudart
           COMMAND sh -c "${NCC_NVCC} -arch=sm_90 --Werror all-warnings -I${NCC_RT_INC} -I${NCC_RT_TESTS} ${NCC_RT_TESTS}/test_cudart.cu -o rt_test_cudart -L$<TARGET_FILE_DIR:nccrt> -lnccrt -L${NCC_CUDA_LIB} -lcublas -Xlinker -rpath,$<TARGET_FILE_DIR:nccrt>:${NCC_CUDA_LIB} && ./rt_test_cudart")
elseif(NOT NCC_SANITIZE)
  ncc_skipped_test(rt.cudart "nvcc not found (CUDA_HOME=${NCC_CUDA_HOME}, PATH)")
endif()

# checkpoints (owner: trainer): I64/F64 scalars, optional tensors, atomic saves
# under a full disk (a 64 KiB tmpfs when mountable, RLIMIT_FSIZE always) and
# under SIGKILL at random moments (50 kills)
add_executable(rt_test_checkpoint ${NCC_RT_TESTS}/test_checkpoint.c)
target_link_libraries(rt_test_checkpoint PRIVATE nccrt)
add_test(NAME rt.checkpoint COMMAND rt_test_checkpoint)

# CUDA graphs on the emulator (owner: cuda-graphs): capture runs nothing,
# replays use the argument values copied at capture except live ones, GEMMs and
# memsets replayed, host copies and sync refused inside a capture, counters
add_executable(rt_test_graph ${NCC_RT_TESTS}/test_graph.c)
target_compile_definitions(rt_test_graph PRIVATE NCC_EMU)
target_include_directories(rt_test_graph PRIVATE ${NCC_RT_TESTS})
target_link_libraries(rt_test_graph PRIVATE nccrt Threads::Threads m)
add_test(NAME rt.graph COMMAND rt_test_graph)
set_tests_properties(rt.graph PROPERTIES ENVIRONMENT "NCC_EMU_THREADS=2")

# Two streams on the emulator (owner: streams): the orders that hold one
# stream's work back, events, joins at sync and copies, graphs with both
add_executable(rt_test_streams ${NCC_RT_TESTS}/test_streams.c)
target_compile_definitions(rt_test_streams PRIVATE NCC_EMU)
target_include_directories(rt_test_streams PRIVATE ${NCC_RT_TESTS})
target_link_libraries(rt_test_streams PRIVATE nccrt Threads::Threads m)
add_test(NAME rt.streams COMMAND rt_test_streams)
set_tests_properties(rt.streams PROPERTIES ENVIRONMENT "NCC_EMU_THREADS=2")
