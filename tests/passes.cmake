# passes.cmake — tests of the passes (owner: passes).
#   passes.golden.NAME  tests/golden/passes/*.net: the listing, report or dot
#                       after the passes, with their -v statistics and every
#                       "not fused" line, equals the text embedded in the
#                       file (run_golden.sh); one file per pass and per
#                       fusion rule, positive and negative cases
#   passes.unit         every example at -O0..-O3 with the verifier after each
#                       pass; the verifier catches corrupted groups and plans;
#                       load-time nodes (test_passes.c)
#   passes.autodiff     the autodiff pass and the training pipelines on lenet,
#                       mlp, resnet18 and small models using every op with a
#                       gradient rule: gradients, optimizer, training forms,
#                       verifier after each pass (test_autodiff.c)
#   passes.autodiff.torch.NAME  the gradients autodiff wires, evaluated op by
#                       op in float64 with PyTorch from ops.def's meaning of
#                       each training op, equal autograd's (check_autodiff.py):
#                       tests/passes/autodiff/*.net, lenet, mlp, resnet18
#   passes.plan.MODEL   the generated .cu's inputs-and-activations region is
#                       the report's peak_memory, below naive_memory once
#                       planned, at every -O level (check_plan.py)

file(GLOB NCC_PASS_GOLDEN CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/golden/passes/*.net)
foreach(f ${NCC_PASS_GOLDEN})
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME passes.golden.${n}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run_golden.sh $<TARGET_FILE:ncc> ${f}
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/golden/passes)
endforeach()

add_executable(test_passes ${CMAKE_CURRENT_SOURCE_DIR}/passes/test_passes.c)
target_link_libraries(test_passes PRIVATE ncccore)
add_test(NAME passes.unit COMMAND test_passes ${CMAKE_CURRENT_SOURCE_DIR}/../examples)

add_executable(test_autodiff ${CMAKE_CURRENT_SOURCE_DIR}/passes/test_autodiff.c)
target_link_libraries(test_autodiff PRIVATE ncccore)
add_test(NAME passes.autodiff COMMAND test_autodiff ${CMAKE_CURRENT_SOURCE_DIR}/../examples)

file(GLOB NCC_AUTODIFF_MODELS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/passes/autodiff/*.net)
foreach(f ${NCC_AUTODIFF_MODELS})
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME passes.autodiff.torch.${n}
           COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/passes/check_autodiff.py $<TARGET_FILE:ncc> ${f})
endforeach()
foreach(m lenet mlp)
  add_test(NAME passes.autodiff.torch.${m}
           COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/passes/check_autodiff.py $<TARGET_FILE:ncc>
                   ${CMAKE_CURRENT_SOURCE_DIR}/../examples/${m}.net --set N=4)
endforeach()
# the data gradients of stride-1 convolutions as convolutions (autodiff's
# dgrad_as_conv, at tf32, fp16 and bf16 only: --passes=autodiff leaves the
# rounding out, so the listing is exact), beside the ones it leaves
add_test(NAME passes.autodiff.torch.dgrad
         COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/passes/check_autodiff.py $<TARGET_FILE:ncc>
                 ${CMAKE_CURRENT_SOURCE_DIR}/passes/dgrad.net --precision=bf16)
add_test(NAME passes.autodiff.torch.resnet18
         COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/passes/check_autodiff.py $<TARGET_FILE:ncc>
                 ${CMAKE_CURRENT_SOURCE_DIR}/../examples/resnet18.net --set N=2 --set S=32)

foreach(m lenet mlp resnet18 resnet50 mobilenet_v2 vgg16)
  add_test(NAME passes.plan.${m}
           COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/passes/check_plan.py $<TARGET_FILE:ncc>
                   ${CMAKE_CURRENT_SOURCE_DIR}/../examples/${m}.net ${CMAKE_CURRENT_BINARY_DIR}/plan-work/${m})
endforeach()

# the batch pass's verdicts on small models: 1..N from one build, or N only
# naming the node that mixed rows (passes/batch.c)
add_test(NAME passes.batch COMMAND ${NCC_PYTEST} ${CMAKE_CURRENT_SOURCE_DIR}/passes/check_batch.py
                                   $<TARGET_FILE:ncc> ${CMAKE_CURRENT_BINARY_DIR}/passes-work/batch)
set_tests_properties(passes.batch PROPERTIES LABELS "passes" TIMEOUT 120)
