# embed_test.cmake — builds examples/embed against an installed ncc and checks
# that it predicts the classes PyTorch predicts for the same weights and images.
#   cmake -DNCC=... -DBUILD_DIR=... -DSRC_DIR=... -DWORK=... -DPYTHON=... -P embed_test.cmake
# Steps: `cmake --install` the build tree into WORK/prefix (runtime/install.cmake's
# rules, with find_package(ncc) config), configure and build examples/embed with
# CMAKE_PREFIX_PATH=WORK/prefix, write weights/images/expected classes with
# oracle.py --embed-data, run the program, compare its output line by line.
# WORK is removed when the test passes and kept when it fails.
cmake_minimum_required(VERSION 3.20)
foreach(v NCC BUILD_DIR SRC_DIR WORK PYTHON)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "embed_test.cmake: -D${v}=... missing")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "embed test: ${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
endfunction()

if(NOT EXISTS ${SRC_DIR}/runtime/install.cmake)
  message(FATAL_ERROR "embed test: runtime/install.cmake (install rules, find_package(ncc) config) is missing")
endif()
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK}/prefix)
# A sanitized libnccrt needs the ASan runtime first in the program's library
# list: build the example with the same sanitizers then.
set(san_flags)
if(SANITIZE)
  set(san_flags "-DCMAKE_C_FLAGS=-fsanitize=address,undefined" "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined"
                "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
endif()
run("configuring examples/embed" ${CMAKE_COMMAND} -S ${SRC_DIR}/examples/embed -B ${WORK}/build
    -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release ${san_flags})
run("building examples/embed" ${CMAKE_COMMAND} --build ${WORK}/build)
run("oracle.py --embed-data" ${PYTHON} ${SRC_DIR}/tests/oracle/oracle.py --embed-data ${WORK}/data)
# The installed libnccrt is found through the executable's RUNPATH or, failing
# that, LD_LIBRARY_PATH: set both library dirs a prefix may use.
set(ENV{LD_LIBRARY_PATH} "${WORK}/prefix/lib:${WORK}/prefix/lib64:$ENV{LD_LIBRARY_PATH}")
run("running embed_lenet" ${WORK}/build/embed_lenet ${WORK}/data/lenet.safetensors ${WORK}/data/images.npy)
file(READ ${WORK}/data/expected.txt expected)
message(STATUS "embed_lenet printed:\n${last_out}")
if(NOT last_out STREQUAL expected)
  message(FATAL_ERROR "embed_lenet's classes differ from PyTorch's:\nexpected:\n${expected}\ngot:\n${last_out}")
endif()
message(STATUS "embed_lenet agrees with PyTorch")
# the C++17 program (built with -Wall -Wextra -Werror) prints the same
run("running embed_lenet_cpp" ${WORK}/build/embed_lenet_cpp ${WORK}/data/lenet.safetensors ${WORK}/data/images.npy)
if(NOT last_out STREQUAL expected)
  message(FATAL_ERROR "embed_lenet_cpp's classes differ from PyTorch's:\nexpected:\n${expected}\ngot:\n${last_out}")
endif()
message(STATUS "embed_lenet_cpp (C++17) agrees with PyTorch")
# The training loop: 40 steps on the four images with other labels, a
# checkpoint saved and loaded back; inference then predicts those labels.
run("writing labels" ${PYTHON} -c
    "import numpy as np\nnp.save('${WORK}/data/labels.npy', np.array([3, 1, 4, 1], dtype=np.int32))")
run("running embed_lenet (training)" ${WORK}/build/embed_lenet ${WORK}/data/lenet.safetensors
    ${WORK}/data/images.npy ${WORK}/data/labels.npy 40 ${WORK}/data/ck.safetensors)
message(STATUS "embed_lenet (training) printed:\n${last_out}")
set(want "checkpoint ${WORK}/data/ck.safetensors: step 40\nimage 0: class 3\nimage 1: class 1\nimage 2: class 4\nimage 3: class 1\n")
string(FIND "${last_out}" "${want}" at)
if(at LESS 0 OR NOT last_out MATCHES "^step 1: loss ")
  message(FATAL_ERROR "embed_lenet did not learn the four labels in 40 steps, or its checkpoint round trip failed")
endif()
if(NOT EXISTS ${WORK}/data/ck.safetensors)
  message(FATAL_ERROR "embed_lenet wrote no checkpoint")
endif()
# passed: the install prefix, the build and the data go (NCC_KEEP_WORK=1 keeps them)
if(NOT "$ENV{NCC_KEEP_WORK}" STREQUAL "1")
  file(REMOVE_RECURSE ${WORK})
endif()
