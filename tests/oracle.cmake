# oracle.cmake — numeric tests of `ncc run` against PyTorch (tests/oracle/oracle.py),
# the embedding example (examples/embed) and the emulation benchmark.
#
# Every oracle case is its own ctest test (oracle_<case>), so that `ctest -j2`
# runs them in parallel and a failure names the op and attribute combination.
# Labels: oracle plus the case's own (op, conv, cublas, model, check, fiber, bad,
# slow ...).  `ctest -LE slow` skips the 224x224 VGG/ResNet-50/MobileNet runs.
# Compiled models are cached in the build tree (NCC_TEST_CACHE_DIR, by default
# build/ncc-cache, shared by the cases), not in ~/.cache.  A case's working files (build/oracle-work/CASE) are
# removed when it passes and kept when it fails; NCC_KEEP_WORK=1 keeps them all.
# A case that cannot run here exits 77: ctest reports it skipped.
set(NCC_ORACLE_PY ${CMAKE_CURRENT_SOURCE_DIR}/oracle/oracle.py)
execute_process(COMMAND ${NCC_PYTHON} ${NCC_ORACLE_PY} --list --labels
                OUTPUT_VARIABLE _oracle_cases RESULT_VARIABLE _oracle_rc
                ERROR_VARIABLE _oracle_err)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${NCC_ORACLE_PY})
if(NOT _oracle_rc EQUAL 0)
  message(WARNING "oracle tests disabled: ${NCC_PYTHON} ${NCC_ORACLE_PY} --list failed: ${_oracle_err}")
else()
  string(REPLACE "\n" ";" _oracle_lines "${_oracle_cases}")
  foreach(_line ${_oracle_lines})
    if(_line STREQUAL "")
      continue()
    endif()
    string(REPLACE " " ";" _parts "${_line}")
    list(GET _parts 0 _case)
    set(_labels oracle)
    list(LENGTH _parts _np)
    if(_np GREATER 1)
      list(GET _parts 1 _l)
      string(REPLACE "," ";" _l "${_l}")
      list(APPEND _labels ${_l})
    endif()
    add_test(NAME oracle_${_case}
             COMMAND ${NCC_PYTEST} ${NCC_ORACLE_PY} ${_case} --ncc $<TARGET_FILE:ncc>
                     --work ${CMAKE_BINARY_DIR}/oracle-work/${_case})
    set(_timeout 300)
    if("slow" IN_LIST _labels)
      set(_timeout 1800)
      list(APPEND _labels train-slow)   # the big models: tests/run_all.sh leaves them out
    elseif("model" IN_LIST _labels)
      set(_timeout 900)
    endif()
    set_tests_properties(oracle_${_case} PROPERTIES
      LABELS "${_labels}" TIMEOUT ${_timeout} SKIP_RETURN_CODE ${NCC_SKIP_CODE}
      ENVIRONMENT "NCC_CACHE_DIR=${NCC_TEST_CACHE_DIR}")
  endforeach()
endif()

# Training against PyTorch (tests/oracle/train_oracle.py): every case is a
# ctest test train_<case> labelled train plus the case's own (grad, optim,
# resume, dropout, model, slow ...): `ctest -L train -LE slow` runs the quick
# ones.  Working files go to build/train-oracle-work/CASE (kept on failure).
set(NCC_TRAIN_ORACLE_PY ${CMAKE_CURRENT_SOURCE_DIR}/oracle/train_oracle.py)
execute_process(COMMAND ${NCC_PYTHON} ${NCC_TRAIN_ORACLE_PY} --list --labels
                OUTPUT_VARIABLE _train_cases RESULT_VARIABLE _train_rc
                ERROR_VARIABLE _train_err)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${NCC_TRAIN_ORACLE_PY})
if(NOT _train_rc EQUAL 0)
  message(WARNING "training oracle tests disabled: ${NCC_PYTHON} ${NCC_TRAIN_ORACLE_PY} --list failed: ${_train_err}")
else()
  string(REPLACE "\n" ";" _train_lines "${_train_cases}")
  foreach(_line ${_train_lines})
    if(_line STREQUAL "")
      continue()
    endif()
    string(REPLACE " " ";" _parts "${_line}")
    list(GET _parts 0 _case)
    list(GET _parts 1 _l)
    string(REPLACE "," ";" _labels "${_l}")
    add_test(NAME train_${_case}
             COMMAND ${NCC_PYTEST} ${NCC_TRAIN_ORACLE_PY} ${_case} --ncc $<TARGET_FILE:ncc>
                     --work ${CMAKE_BINARY_DIR}/train-oracle-work/${_case})
    set(_timeout 300)
    if("slow" IN_LIST _labels)
      set(_timeout 1800)
      list(APPEND _labels train-slow)   # the big models: tests/run_all.sh leaves them out
    elseif("model" IN_LIST _labels)
      set(_timeout 900)
    endif()
    set_tests_properties(train_${_case} PROPERTIES
      LABELS "${_labels}" TIMEOUT ${_timeout} SKIP_RETURN_CODE ${NCC_SKIP_CODE}
      ENVIRONMENT "NCC_CACHE_DIR=${NCC_TEST_CACHE_DIR}")
    # every gradient case again on the cuBLAS path (at tf32/fp16/bf16 its
    # reduced-precision compute type, ncc_gemm_ex), and on the tiled path in
    # checked mode (guarded buffers) in reverse fiber order (label matrix)
    if("grad" IN_LIST _labels)
      set(_variants cublas checked)
      if("tile" IN_LIST _labels OR "gemm" IN_LIST _labels)   # a forced tensor-core tile (--gemm-tile), or
                                                              # --gemm-stages, --gemm-pipeline: no cuBLAS path
        set(_variants checked)
      endif()
      foreach(_v ${_variants})
        add_test(NAME train_${_case}_${_v}
                 COMMAND ${NCC_PYTEST} ${NCC_TRAIN_ORACLE_PY} ${_case} --ncc $<TARGET_FILE:ncc>
                         --work ${CMAKE_BINARY_DIR}/train-oracle-work/${_case}_${_v})
        # the emulator's stream orders too (docs/emulator.md, "Two streams"): the
        # side stream held back in checked mode, stream 0 on the cuBLAS path
        if(_v STREQUAL "cublas")
          set(_env "NCC_TRAIN_ORACLE_FLAGS=--cublas;NCC_STREAM_ORDER=main-last")
        else()
          set(_env "NCC_CHECK=1;NCC_FIBER_ORDER=reverse;NCC_STREAM_ORDER=side-last")
        endif()
        set_tests_properties(train_${_case}_${_v} PROPERTIES
          LABELS "${_labels};matrix" TIMEOUT ${_timeout} SKIP_RETURN_CODE ${NCC_SKIP_CODE}
          ENVIRONMENT "NCC_CACHE_DIR=${NCC_TEST_CACHE_DIR};${_env}")
      endforeach()
    endif()
    # the example models whose steps use both streams, unchecked (the memory
    # plan's shared bytes), in each held-back order
    if(_case STREQUAL "ex_resnet18" OR _case STREQUAL "ex_mobilenet_v2")
      foreach(_o side-last main-last)
        add_test(NAME train_${_case}_${_o}
                 COMMAND ${NCC_PYTEST} ${NCC_TRAIN_ORACLE_PY} ${_case} --ncc $<TARGET_FILE:ncc>
                         --work ${CMAKE_BINARY_DIR}/train-oracle-work/${_case}_${_o})
        set_tests_properties(train_${_case}_${_o} PROPERTIES
          LABELS "${_labels};matrix;streams" TIMEOUT ${_timeout} SKIP_RETURN_CODE ${NCC_SKIP_CODE}
          ENVIRONMENT "NCC_CACHE_DIR=${NCC_TEST_CACHE_DIR};NCC_STREAM_ORDER=${_o}")
      endforeach()
    endif()
  endforeach()
endif()

# ResNet-18, batch 2, 64x64 under emulation: prints ms/batch (aim: < 2 s on 2 cores).
add_test(NAME bench_emu_resnet18
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench_emu.sh $<TARGET_FILE:ncc>)
set_tests_properties(bench_emu_resnet18 PROPERTIES LABELS "bench;slow" TIMEOUT 900
  ENVIRONMENT "NCC_CACHE_DIR=${NCC_TEST_CACHE_DIR}")

# examples/embed: a C program embedding generated lenet code, built with
# find_package(ncc) against an install of this build tree in a temporary prefix.
add_test(NAME embed_lenet
         COMMAND ${CMAKE_COMMAND} -DNCC=$<TARGET_FILE:ncc> -DBUILD_DIR=${CMAKE_BINARY_DIR}
                 -DSRC_DIR=${CMAKE_SOURCE_DIR} -DWORK=${CMAKE_BINARY_DIR}/embed-work
                 -DPYTHON=${NCC_PYTHON} -DSANITIZE=${NCC_SANITIZE}
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/oracle/embed_test.cmake)
set_tests_properties(embed_lenet PROPERTIES LABELS "oracle;embed" TIMEOUT 600)
