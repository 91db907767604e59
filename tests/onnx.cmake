# ONNX import (frontend/onnx.c, docs/onnx.md), label onnx: models exported by
# torch.onnx and run by ncc against PyTorch, parameter counts, bad input.
# A build without ONNX support (no protobuf-c or onnx.proto, see the top
# CMakeLists.txt) registers the same names as skipped tests.
set(NCC_ONNX_PY ${CMAKE_CURRENT_SOURCE_DIR}/onnx/onnx_check.py)
set(NCC_ONNX_RUN conv conv_groups_dilation conv_depthwise gemm matmul pools global_pool add_broadcast
    concat softmax flatten_reshape relu6 hardswish leaky_relu batchnorm gelu_layernorm gelu_layernorm17 mobilenet_v2 vgg11)
set(NCC_ONNX_BAD truncated garbage empty opset99 unsupported_op asym_pads dynamic_dim fuzz_findings auto_pad_uneven
    ceil_mode old_opset_op)
set(NCC_ONNX_PARAMS resnet18 mobilenet_v2 vgg11)
function(ncc_onnx_test name)
  if(NCC_HAVE_ONNX)
    add_test(NAME ${name} COMMAND ${NCC_PYTEST} ${NCC_ONNX_PY} ${ARGN} --ncc $<TARGET_FILE:ncc>)
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
# --emit=net: each model's .net translation and the weights written beside it
# give the ONNX model's bits, build its graph, and translate to themselves
foreach(c ${NCC_ONNX_RUN} resnet18)
  ncc_onnx_test(onnx.net.${c} ${c} --net)
endforeach()
ncc_onnx_test(onnx.net.resnet18_bn resnet18 --keep-bn --net)
# int8 calibration on an imported model whose node names hold spaces and '%',
# its calibration cache written and read back (docs/precision.md, "INT8")
ncc_onnx_test(onnx.int8 int8 --int8)
# training an imported classifier through its translation (docs/onnx.md, "Training")
ncc_onnx_test(onnx.train.mlp mlp --train)
foreach(c ${NCC_ONNX_PARAMS})
  ncc_onnx_test(onnx.params.${c} ${c} --params)
endforeach()
foreach(c ${NCC_ONNX_BAD})
  ncc_onnx_test(onnx.bad.${c} ${c} --bad)
endforeach()
# ONNX's own node conformance cases (tests/onnx/conformance.py, docs/onnx.md
# "Conformance"), generated at test time by the installed onnx package: one
# test per operator of frontend/onnx.c's op table, labels onnx and conformance.
set(NCC_ONNX_CONF_PY ${CMAKE_CURRENT_SOURCE_DIR}/onnx/conformance.py)
file(READ ${PROJECT_SOURCE_DIR}/frontend/onnx.c _onnx_src)
string(REGEX MATCH "static const OpRow op_table\\[\\] = {[^;]*};" _onnx_table "${_onnx_src}")
string(REGEX MATCHALL "{\"[A-Za-z]+\"," _onnx_rows "${_onnx_table}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/frontend/onnx.c)
foreach(row ${_onnx_rows})
  string(REGEX REPLACE "{\"([A-Za-z]+)\"," "\\1" op "${row}")
  set(name onnx.conformance.${op})
  if(NCC_HAVE_ONNX)
    add_test(NAME ${name} COMMAND ${NCC_PYTEST} ${NCC_ONNX_CONF_PY} --op ${op} --ncc $<TARGET_FILE:ncc>)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${NCC_SKIP_CODE} TIMEOUT 300)
  else()
    ncc_skipped_test(${name} "ncc was built without ONNX support (protobuf-c, onnx.proto)")
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "onnx;conformance")
endforeach()

# fuzz_onnx: libFuzzer target for the importer, only with -DNCC_FUZZ=ON, clang
# and ONNX support (tests/fuzz/run_fuzz_onnx.sh builds, seeds and runs it);
# frontend.cmake instruments ncccore for it
if(NCC_FUZZ AND NCC_HAVE_ONNX)
  add_executable(fuzz_onnx ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_onnx.c)
  target_compile_options(fuzz_onnx PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
  target_link_options(fuzz_onnx PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_onnx PRIVATE ncccore)
endif()

# onnx.bench_import: ResNet-50 exported by torch.onnx, `ncc resnet50.onnx -o
# r.cu` and `--emit=ir` timed (tests/onnx/bench_import.py prints the figures
# docs/onnx.md quotes); fails only past a sanity bound of 5 s
set(NCC_ONNX_BENCH_PY ${CMAKE_CURRENT_SOURCE_DIR}/onnx/bench_import.py)
if(NCC_HAVE_ONNX)
  add_test(NAME onnx.bench_import COMMAND ${NCC_PYTEST} ${NCC_ONNX_BENCH_PY} --ncc $<TARGET_FILE:ncc>)
  set_tests_properties(onnx.bench_import PROPERTIES LABELS onnx SKIP_RETURN_CODE ${NCC_SKIP_CODE} TIMEOUT 600 RUN_SERIAL TRUE)
else()
  ncc_skipped_test(onnx.bench_import "ncc was built without ONNX support (protobuf-c, onnx.proto)")
  set_tests_properties(onnx.bench_import PROPERTIES LABELS onnx)
endif()
