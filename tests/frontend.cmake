# frontend.cmake — tests of the .net frontend (owner: frontend).
#   frontend.golden.*  tests/golden/*.net: `ncc FILE --emit=ir` equals the text
#                      embedded in the file (#> lines); see run_golden.sh
#   frontend.bad.*     tests/bad/*.net: malformed models exit 1 with
#                      file:line:col and the stated message, no output file,
#                      no signal, within seconds; see run_bad.sh
#   frontend.net.*     --emit=net of every example and golden model compiles
#                      to the same IR and translates to itself; see
#                      run_net_roundtrip.sh
#   frontend.dot       --emit=dot of an example is a Graphviz digraph
#   fuzz_frontend      libFuzzer target, only with -DNCC_FUZZ=ON and clang
#                      (tests/fuzz/run_fuzz.sh builds and runs it)

file(GLOB NCC_GOLDEN CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/golden/*.net)
foreach(f ${NCC_GOLDEN})
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME frontend.golden.${n}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run_golden.sh $<TARGET_FILE:ncc> ${f}
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/golden)
endforeach()

file(GLOB NCC_BAD CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/bad/*.net)
foreach(f ${NCC_BAD})
  get_filename_component(n ${f} NAME_WE)
  # run from the folder so that diagnostics name the file as the expectations do
  get_filename_component(base ${f} NAME)
  add_test(NAME frontend.bad.${n}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run_bad.sh $<TARGET_FILE:ncc> ${base}
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/bad)
endforeach()

# frontend.net.*: `--emit=net` of every example and golden model compiles to
# the same IR and translates to itself (run_net_roundtrip.sh)
file(GLOB NCC_NET_RT CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/examples/*.net ${CMAKE_CURRENT_SOURCE_DIR}/golden/*.net
     ${CMAKE_CURRENT_SOURCE_DIR}/golden/passes/*.net ${CMAKE_CURRENT_SOURCE_DIR}/passes/autodiff/*.net)
foreach(f ${NCC_NET_RT})
  get_filename_component(n ${f} NAME_WE)
  get_filename_component(dir ${f} DIRECTORY)
  get_filename_component(dir ${dir} NAME)
  add_test(NAME frontend.net.${dir}.${n} COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run_net_roundtrip.sh $<TARGET_FILE:ncc> ${f})
endforeach()

add_test(NAME frontend.dot
         COMMAND sh -c "\"$1\" \"$2\" --emit=dot > \"$3\" && grep -q '^digraph' \"$3\" && grep -q 'conv1.weight f32\\[10, 1, 5, 5\\]' \"$3\" && grep -q -- '-> out0' \"$3\""
                 _ $<TARGET_FILE:ncc> ${CMAKE_CURRENT_SOURCE_DIR}/../examples/lenet.net ${CMAKE_CURRENT_BINARY_DIR}/lenet.dot)

if(NCC_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "NCC_FUZZ=ON needs clang (libFuzzer): configure with -DCMAKE_C_COMPILER=clang")
  endif()
  # coverage instrumentation for the code under test, the fuzzer main for the target
  target_compile_options(ncccore PRIVATE -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined)
  add_executable(fuzz_frontend ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_frontend.c)
  target_compile_options(fuzz_frontend PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
  target_link_options(fuzz_frontend PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_frontend PRIVATE ncccore)
endif()
