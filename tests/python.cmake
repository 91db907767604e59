# python.cmake — the Python module `ncc` (python/ncc, docs/python.md; owner:
# python): LeNet and the MLP against PyTorch with weights from a safetensors
# file and from a dict, --cublas and --precision=tf32, which batches go, bad
# arrays and ncc's errors as ncc.Error, the report, and the module imported
# from a `cmake --install` prefix.  One ctest test per case of
# tests/python/test_python.py, label `python`; a case without numpy or torch
# reports skipped.
#
# Under the sanitizers the cases run with the ASan runtime preloaded
# (NCC_ASAN_PRELOAD, tests/CMakeLists.txt): libnccrt needs it loaded first.
set(NCC_PYTHON_PY ${CMAKE_CURRENT_SOURCE_DIR}/python/test_python.py)
execute_process(COMMAND ${NCC_PYTHON} ${NCC_PYTHON_PY} --list
                OUTPUT_VARIABLE _py_cases RESULT_VARIABLE _py_rc ERROR_VARIABLE _py_err)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${NCC_PYTHON_PY})
set(_py_env "NCC_CACHE_DIR=${NCC_TEST_CACHE_DIR}")
if(NCC_ASAN_PRELOAD)
  list(APPEND _py_env "LD_PRELOAD=${NCC_ASAN_PRELOAD}" "ASAN_OPTIONS=detect_leaks=0")
endif()
if(NOT _py_rc EQUAL 0)
  message(WARNING "python tests disabled: ${NCC_PYTHON} ${NCC_PYTHON_PY} --list failed: ${_py_err}")
else()
  string(REPLACE "\n" ";" _py_cases "${_py_cases}")
  foreach(_case ${_py_cases})
    if(_case STREQUAL "")
      continue()
    endif()
    add_test(NAME python.${_case}
             COMMAND ${NCC_PYTEST} ${NCC_PYTHON_PY} ${_case} --ncc $<TARGET_FILE:ncc>
                     --work ${CMAKE_BINARY_DIR}/python-work/${_case} --build ${CMAKE_BINARY_DIR})
    set_tests_properties(python.${_case} PROPERTIES LABELS python TIMEOUT 600
                         ENVIRONMENT "${_py_env}" SKIP_RETURN_CODE ${NCC_SKIP_CODE})
  endforeach()
endif()
