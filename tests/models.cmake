# models.cmake — the IR's unit tests and the example models checked against
# torchvision (owner: ir).  Figures are torchvision's published ones (model
# table of the docs: "Params" and "GFLOPS", the latter being multiply-adds
# per 224x224 image), never ncc's own output.

set(NCC_MODELS_DIR ${CMAKE_CURRENT_SOURCE_DIR}/models)
set(NCC_EXAMPLES_DIR ${CMAKE_CURRENT_SOURCE_DIR}/../examples)

# shape rules, verifier and report figures on hand-built graphs (no frontend)
add_executable(test_ir ${NCC_MODELS_DIR}/test_ir.c)
target_link_libraries(test_ir PRIVATE ncccore)
add_test(NAME models.unit.ir COMMAND test_ir)

# the torch.nn rebuilds themselves reproduce torchvision's parameter counts
add_test(NAME models.torch_rebuild_counts COMMAND ${NCC_PYTEST} ${NCC_MODELS_DIR}/torch_models.py --check-counts)

# ncc_model_test(NAME model.net ARGS...) -> test models.NAME running check_model.py
function(ncc_model_test name file)
  add_test(NAME models.${name}
           COMMAND ${NCC_PYTEST} ${NCC_MODELS_DIR}/check_model.py $<TARGET_FILE:ncc> ${NCC_EXAMPLES_DIR}/${file} ${ARGN})
  set_tests_properties(models.${name} PROPERTIES LABELS "models" TIMEOUT 300)
endfunction()

# parameter counts (exact), multiply-adds per image (1%; MobileNetV2's published
# 0.30 G has two digits, so its own rounding is +-1.7%: 2% there), and
# parameter names and shapes equal to the rebuilt torchvision state_dict
ncc_model_test(lenet        lenet.net        --params 21840     --names lenet)
ncc_model_test(mlp          mlp.net          --params 235146    --names mlp)
ncc_model_test(vgg11        vgg11.net        --params 132863336 --macs 7.61e9  --names vgg11)
ncc_model_test(vgg16        vgg16.net        --params 138357544 --macs 15.47e9 --names vgg16)
ncc_model_test(vgg19        vgg19.net        --params 143667240 --macs 19.63e9 --names vgg19)
ncc_model_test(resnet18     resnet18.net     --params 11689512  --macs 1.81e9  --names resnet18)
ncc_model_test(resnet50     resnet50.net     --params 25557032  --macs 4.09e9  --names resnet50)
ncc_model_test(mobilenet_v2 mobilenet_v2.net --params 3504872   --macs 0.30e9 --rel 0.02 --names mobilenet_v2)

# the batch and the image size are consts that --set overrides: a batch of 3
# keeps params and multiply-adds per image; smaller images keep the params of
# the fully convolutional nets, and shrink VGG's classifier.0 from 25088 to
# 2048 inputs (512 * 2 * 2 at 64x64): 138357544 - 23040 * 4096
ncc_model_test(resnet50_batch3     resnet50.net     --same-per-sample-as N=3 --params 25557032)
ncc_model_test(mobilenet_v2_batch2 mobilenet_v2.net --same-per-sample-as N=2 --params 3504872)
ncc_model_test(resnet18_s64        resnet18.net     --set S=64 --params 11689512)
ncc_model_test(mobilenet_v2_s96    mobilenet_v2.net --set S=96 --params 3504872)
ncc_model_test(vgg11_s64           vgg11.net        --set S=64 --params 38491496)

# shape errors reach the user as docs/language.md "Errors" says: file:line:col, the shapes, exit 1, no output
file(GLOB NCC_MODEL_ERRORS CONFIGURE_DEPENDS ${NCC_MODELS_DIR}/errors/*.net)
foreach(f ${NCC_MODEL_ERRORS})
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME models.error.${n} COMMAND ${NCC_PYTEST} ${NCC_MODELS_DIR}/check_error.py $<TARGET_FILE:ncc> ${f})
endforeach()

# the frontend + report on ResNet-50 stays fast (best of 10 under 50 ms); a
# timing, so labelled bench and slow: the sanitizer build leaves it out
add_test(NAME models.bench_frontend
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bench_frontend.sh $<TARGET_FILE:ncc> ${NCC_EXAMPLES_DIR}/resnet50.net 50)
set_tests_properties(models.bench_frontend PROPERTIES LABELS "bench;slow")

# shape rules against PyTorch on 400 random configurations (fixed seed): same
# output shape where torch accepts, a located error where torch refuses
add_test(NAME models.shape_oracle COMMAND ${NCC_PYTEST} ${NCC_MODELS_DIR}/shape_oracle.py $<TARGET_FILE:ncc>)
