# docs.cmake — the documentation cannot drift from what ncc does (owner: docs).
#   docs.examples  every ```net block of docs/*.md and README.md compiles with
#                  ncc (an ```net error block fails with the error it shows),
#                  every ```python block of docs/*.md runs (the module ncc),
#                  the ```c pass example compiles against the IR's headers, and
#                  every link stays inside the repository (tests/docs_check.py)
#   docs.readme    every `$ ` command of the README runs and prints what the
#                  README shows, figures included; ncc's help accepts every
#                  flag the README names (tests/readme_check.py, which prints
#                  the actual output to paste when a figure changes)
file(GLOB NCC_DOCS_MD CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/../docs/*.md)
add_test(NAME docs.examples
         COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/docs_check.py $<TARGET_FILE:ncc>
                 ${NCC_DOCS_MD} ${CMAKE_CURRENT_SOURCE_DIR}/../README.md)
add_test(NAME docs.readme
         COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/readme_check.py --ncc $<TARGET_FILE:ncc>
                 --python ${NCC_PYTHON})
set_tests_properties(docs.examples PROPERTIES LABELS docs TIMEOUT 900)
if(NCC_ASAN_PRELOAD)     # the ```python blocks load libnccrt into Python
  set_tests_properties(docs.examples PROPERTIES ENVIRONMENT "NCC_PYTHON_PRELOAD=${NCC_ASAN_PRELOAD}")
endif()
# the README's commands train the digits network and time a ResNet-18 training
# step: minutes, tens of minutes under the sanitizers, so labelled slow too
# (tests/run_all.sh's sanitizer stage leaves it out; the release stage runs it)
set_tests_properties(docs.readme PROPERTIES LABELS "docs;slow" TIMEOUT 900)
