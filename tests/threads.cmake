# threads.cmake — embedding in products: many threads (owner: runtime).  Two
# generated models (examples/lenet.net at N=2, examples/mlp.net at N=4) compiled
# as C under NCC_EMU into one program, tests/threads/stress_threads.c:
#   threads.stress         16 threads, each creating its own instance and running
#                          125 inferences on random inputs (2000 in all; 40 each
#                          under the sanitizers); every
#                          result equals the single-threaded one bit for bit
#   threads.stress_graphs  threads.stress with graphs on (NCC_GRAPHS=1)
#   threads.create_cuda    16 threads at once ask this CPU build for a CUDA
#                          device: an error status and a message, never an abort
#   threads.stress_tsan    threads.stress with the program and libnccrt's sources
#                          built together with -fsanitize=thread (fewer
#                          inferences: ThreadSanitizer is ~10x slower); any report fails
#   threads.tsan_live      that build on ONE instance shared by four threads (what
#                          the contract forbids) must report a data race: the
#                          sanitizer is live
# `ctest -L threads` runs them all.

set(NCC_THR_DIR ${CMAKE_CURRENT_SOURCE_DIR}/threads)
set(NCC_THR_OUT ${CMAKE_CURRENT_BINARY_DIR}/threads)

# MODEL.cu and MODEL.h from the ncc command; the .cu is C under NCC_EMU and is
# copied to a .c name since compilers pick the language from the extension
function(ncc_thr_model name n)
  set(net ${CMAKE_CURRENT_SOURCE_DIR}/../examples/${name}.net)
  add_custom_command(
    OUTPUT ${NCC_THR_OUT}/${name}.cu ${NCC_THR_OUT}/${name}.h ${NCC_THR_OUT}/${name}_emu.c
    COMMAND ${CMAKE_COMMAND} -E make_directory ${NCC_THR_OUT}
    COMMAND $<TARGET_FILE:ncc> ${net} --set N=${n} -o ${NCC_THR_OUT}/${name}.cu
    COMMAND ${CMAKE_COMMAND} -E copy ${NCC_THR_OUT}/${name}.cu ${NCC_THR_OUT}/${name}_emu.c
    DEPENDS ncc ${net}
    COMMENT "ncc: ${name}.net at N=${n} for the thread tests")
endfunction()
ncc_thr_model(lenet 2)
ncc_thr_model(mlp 4)
set(NCC_THR_SRC ${NCC_THR_DIR}/stress_threads.c ${NCC_THR_OUT}/lenet_emu.c ${NCC_THR_OUT}/mlp_emu.c)

add_executable(thr_stress ${NCC_THR_SRC})
target_compile_definitions(thr_stress PRIVATE NCC_EMU)
target_include_directories(thr_stress PRIVATE ${NCC_THR_OUT})
target_link_libraries(thr_stress PRIVATE nccrt Threads::Threads m)
# Under the sanitizers 40 inferences a thread, not 125: ASan and UBSan see the
# same code paths in fewer rounds (races are ThreadSanitizer's, below), and
# each round costs three times as much.
if(NCC_SANITIZE)
  set(_thr_iters 40)
else()
  set(_thr_iters 125)
endif()
add_test(NAME threads.stress COMMAND thr_stress --threads 16 --iters ${_thr_iters})
add_test(NAME threads.create_cuda COMMAND thr_stress --create-cuda --threads 16)
# two block threads: the pool is busy with one launch while others run on their own threads
set_tests_properties(threads.stress threads.create_cuda PROPERTIES LABELS threads TIMEOUT 300
                     ENVIRONMENT "NCC_EMU_THREADS=2")
# the same with every instance's inferences captured as graphs and replayed
# (the emulator's recorded graphs, NCC_GRAPHS=1): one graph per batch size per instance
add_test(NAME threads.stress_graphs COMMAND thr_stress --threads 16 --iters ${_thr_iters})
set_tests_properties(threads.stress_graphs PROPERTIES LABELS "threads;graphs" TIMEOUT 300
                     ENVIRONMENT "NCC_EMU_THREADS=2;NCC_GRAPHS=1")

# ThreadSanitizer: libnccrt's sources compiled into a static library of their
# own with -fsanitize=thread, so that every access of the runtime is seen.  Not
# in the ASan build (the two sanitizers exclude each other), nor where the
# compiler has no libtsan.
include(CheckCSourceCompiles)
set(CMAKE_REQUIRED_FLAGS -fsanitize=thread)
set(CMAKE_REQUIRED_LINK_OPTIONS -fsanitize=thread)
check_c_source_compiles("int main(void) { return 0; }" NCC_HAVE_TSAN)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(NCC_SANITIZE)
  foreach(t threads.stress_tsan threads.tsan_live)
    ncc_skipped_test(${t} "ThreadSanitizer cannot join AddressSanitizer (NCC_SANITIZE=ON); the release build runs it")
  endforeach()
elseif(NOT NCC_HAVE_TSAN)
  foreach(t threads.stress_tsan threads.tsan_live)
    ncc_skipped_test(${t} "the compiler cannot build with -fsanitize=thread (no libtsan?)")
  endforeach()
else()
  add_library(thr_nccrt_tsan STATIC ${NCC_RT_SRC})
  target_compile_options(thr_nccrt_tsan PRIVATE -fsanitize=thread -g)
  target_include_directories(thr_nccrt_tsan PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/../runtime)
  target_link_libraries(thr_nccrt_tsan PUBLIC PkgConfig::CJSON ${BLAS_LIBRARIES} Threads::Threads ${CMAKE_DL_LIBS} m)
  add_executable(thr_stress_tsan ${NCC_THR_SRC})
  target_compile_definitions(thr_stress_tsan PRIVATE NCC_EMU)
  target_compile_options(thr_stress_tsan PRIVATE -fsanitize=thread -g)
  target_link_options(thr_stress_tsan PRIVATE -fsanitize=thread)
  target_include_directories(thr_stress_tsan PRIVATE ${NCC_THR_OUT})
  target_link_libraries(thr_stress_tsan PRIVATE thr_nccrt_tsan)
  # run_tsan.sh: a report fails the test (exit status 66); a kernel whose memory
  # layout this libtsan cannot handle makes it skip, never pass
  add_test(NAME threads.stress_tsan
           COMMAND sh ${NCC_THR_DIR}/run_tsan.sh $<TARGET_FILE:thr_stress_tsan> --threads 16 --iters 10)
  add_test(NAME threads.tsan_live
           COMMAND sh ${NCC_THR_DIR}/run_tsan.sh $<TARGET_FILE:thr_stress_tsan> --shared-instance --threads 4 --iters 3)
  set_tests_properties(threads.stress_tsan threads.tsan_live PROPERTIES LABELS threads TIMEOUT 600
                       SKIP_RETURN_CODE ${NCC_SKIP_CODE} ENVIRONMENT "NCC_EMU_THREADS=2")
  set_tests_properties(threads.tsan_live PROPERTIES PASS_REGULAR_EXPRESSION "WARNING: ThreadSanitizer: data race")
endif()
