# fold.cmake — tests of the fold pass (passes/fold.c) and of the load-time code
# codegen makes of what it marks (owner: fold).  Besides these:
#   frontend.golden.fold       tests/golden/fold.net, the rewritten IR
#   oracle_fold_* and oracle_model_*_O0/_O1 (oracle.py, label fold): batchnorm
#                              folded and unfolded against PyTorch
#
#   fold.kernels               examples with batchnorm at -O0/-O1/-O3 and --jit:
#                              no inference kernel computes a batchnorm once
#                              folded; the load-time kernels do, in <model>_prepare(),
#                              called by create and load; report and code agree
#   fold.run[.fuse|.cublas]    codegen's test models with batchnorm (tests/cg),
#                              folded, on the emulator against PyTorch: M_load,
#                              M_save and reload, a second M_load into the same
#                              instance equal to a fresh one (the folded values
#                              follow the parameters), both fiber orders, checked mode
#   fold.verbose               -v prints the pass's statistics
#   fold.unit                  tests/fold/test_fold.c: constants, identities, statistics
#                              that are inputs, training, on hand-built graphs

add_executable(test_fold ${CMAKE_CURRENT_SOURCE_DIR}/fold/test_fold.c)
target_link_libraries(test_fold PRIVATE ncccore)
add_test(NAME fold.unit COMMAND test_fold)
set_tests_properties(fold.unit PROPERTIES LABELS "fold")

add_test(NAME fold.kernels
         COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/fold/check_fold.py $<TARGET_FILE:ncc>
                 ${CMAKE_CURRENT_SOURCE_DIR}/../examples ${CMAKE_CURRENT_BINARY_DIR}/fold-kernels)
set_tests_properties(fold.kernels PROPERTIES LABELS "fold;codegen" TIMEOUT 300)

set(_fold_cases norms net fused)
foreach(_v "run;--fold" "run.fuse;--fold;--fuse" "run.cublas;--fold;--fuse;--cublas")
  list(GET _v 0 _name)
  list(REMOVE_AT _v 0)
  add_test(NAME fold.${_name}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cg/run_cases.sh $<TARGET_FILE:cg_build_graphs>
                   ${CMAKE_CURRENT_SOURCE_DIR}/../runtime $<TARGET_FILE_DIR:nccrt>
                   ${CMAKE_CURRENT_BINARY_DIR}/cg/fold_${_name} ${NCC_PYTEST_SH} ${_v} ${_fold_cases})
  set(_env "NCC_EMU_THREADS=2;NCC_CHECK=1")
  if(NCC_SANITIZE)
    list(APPEND _env "CG_CFLAGS=-fsanitize=address,undefined")
  endif()
  set_tests_properties(fold.${_name} PROPERTIES LABELS "fold;codegen" TIMEOUT 600 ENVIRONMENT "${_env}")
endforeach()

add_test(NAME fold.verbose
         COMMAND $<TARGET_FILE:ncc> ${CMAKE_CURRENT_SOURCE_DIR}/golden/fold.net --emit=report -v)
set_tests_properties(fold.verbose PROPERTIES LABELS "fold"
  PASS_REGULAR_EXPRESSION "pass fold: 5 batchnorms folded \\(2 into convolutions, 3 into scale/shift\\), 0 constants folded, 4 identities removed, [0-9]+ load-time nodes")
