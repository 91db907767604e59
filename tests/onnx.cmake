# ONNX import (frontend/onnx.c, docs/onnx.md), label onnx: models exported by
# torch.onnx and run by ncc against PyTorch, parameter counts, bad input.
# A build without ONNX support (no protobuf-c or onnx.proto, see the top
# CMakeLists.txt) registers the same names as skipped tests.
set(NCC_ONNX_PY ${CMAKE_CURRENT_SOURCE_DIR}/onnx/onnx_check.py)
set(NCC_ONNX_RUN conv conv_groups_dilation conv_depthwise gemm matmul pools global_pool add_broadcast
    concat softmax flatten_reshape relu6 hardswish leaky_relu batchnorm mobilenet_v2 vgg11)
set(NCC_ONNX_BAD truncated garbage empty opset99 unsupported_op asym_pads dynamic_dim)
set(NCC_ONNX_PARAMS resnet18 mobilenet_v2 vgg11)
function(ncc_onnx_test name)
  if(NCC_HAVE_ONNX)
    add_test(NAME ${name} COMMAND ${NCC_PYTHON} ${NCC_ONNX_PY} ${ARGN} --ncc $<TARGET_FILE:ncc>)
    set_tests_properties(${name} PROPERTIES LABELS onnx SKIP_RETURN_CODE ${NCC_SKIP_CODE} TIMEOUT 600)
  else()
    ncc_skipped_test(${name} "ncc was built without ONNX support (protobuf-c, onnx.proto)")
    set_tests_properties(${name} PROPERTIES LABELS onnx)
  endif()
endfunction()
foreach(c ${NCC_ONNX_RUN})
  ncc_onnx_test(onnx.run.${c} ${c})
endforeach()
# resnet18 with BatchNormalization nodes kept (TrainingMode.PRESERVE)
ncc_onnx_test(onnx.run.resnet18_bn resnet18 --keep-bn)
foreach(c ${NCC_ONNX_PARAMS})
  ncc_onnx_test(onnx.params.${c} ${c} --params)
endforeach()
foreach(c ${NCC_ONNX_BAD})
  ncc_onnx_test(onnx.bad.${c} ${c} --bad)
endforeach()
