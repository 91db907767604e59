# driver.cmake — tests of the `ncc` command itself (owner: driver): the option
# table against every --help and the parser, parameter initialisation from the
# IR's parameter kinds and --seed, the compile cache's location and reuse, one
# path per error message, finding the runtime from the executable (build
# folder, installed prefix, NCC_RUNTIME_DIR); `ncc train`'s checks of its flags
# and data (tests/driver/test_train.py).
# One ctest test per case of each script; each removes its working folder
# when it passes.
foreach(_script test_driver test_train)
  set(NCC_DRIVER_PY ${CMAKE_CURRENT_SOURCE_DIR}/driver/${_script}.py)
  execute_process(COMMAND ${NCC_PYTHON} ${NCC_DRIVER_PY} --list
                  OUTPUT_VARIABLE _driver_cases RESULT_VARIABLE _driver_rc ERROR_VARIABLE _driver_err)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${NCC_DRIVER_PY})
  if(NOT _driver_rc EQUAL 0)
    message(WARNING "driver tests disabled: ${NCC_PYTHON} ${NCC_DRIVER_PY} --list failed: ${_driver_err}")
  else()
    string(REPLACE "\n" ";" _driver_cases "${_driver_cases}")
    foreach(_case ${_driver_cases})
      if(_case STREQUAL "")
        continue()
      endif()
      add_test(NAME driver.${_case}
               COMMAND ${NCC_PYTEST} ${NCC_DRIVER_PY} ${_case} --ncc $<TARGET_FILE:ncc>
                       --work ${CMAKE_BINARY_DIR}/driver-work/${_case} --build ${CMAKE_BINARY_DIR})
      # train_digits trains for minutes, int8_storage calibrates and runs three models nine
      # times (two minutes under the sanitizers), half_storage runs three models twenty times:
      # slow, so the sanitizer stage leaves them out (its oracle_fp16_*, oracle_bf16_* and
      # oracle_int8_* cases run the storage pass)
      set(_labels driver)
      if(_case STREQUAL "train_digits" OR _case STREQUAL "int8_storage" OR _case STREQUAL "half_storage")
        list(APPEND _labels slow)
      endif()
      set_tests_properties(driver.${_case} PROPERTIES LABELS "${_labels}" TIMEOUT 600
                           ENVIRONMENT "NCC_CACHE_DIR=${NCC_TEST_CACHE_DIR}"
                           SKIP_RETURN_CODE ${NCC_SKIP_CODE})
    endforeach()
  endif()
endforeach()

# the order of the samples and the loader thread of `ncc train`, without a model
add_executable(driver_test_train_data ${CMAKE_CURRENT_SOURCE_DIR}/driver/test_train_data.c
               ${CMAKE_CURRENT_SOURCE_DIR}/../driver/train_data.c)
target_link_libraries(driver_test_train_data PRIVATE nccrt Threads::Threads)
add_test(NAME driver.train_data COMMAND driver_test_train_data)
