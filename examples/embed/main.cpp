// main.cpp — the same model embedded in a C++17 program: lenet.h is plain C
// with extern "C", so a C++ program includes it as it is and links the
// generated lenet.cu (compiled as C, -DNCC_EMU) and libnccrt.
//
//   embed_lenet_cpp WEIGHTS.safetensors IMAGES.npy
//
// prints the predicted class of each image, as embed_lenet (main.c) does.
// The model handle lives in a std::unique_ptr whose deleter is lenet_destroy;
// every failure is an exception carrying lenet_error()'s message.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "lenet.h"
#include "ncc_rt.h"

namespace {

struct Destroy {
  void operator()(lenet *m) const { lenet_destroy(m); }
};
using Model = std::unique_ptr<lenet, Destroy>;

Model create() {
  lenet *m = nullptr;
  if (lenet_create_on(&m, NCC_DEV_EMU) != 0) {
    std::string msg = m ? lenet_error(m) : "failed";
    lenet_destroy(m);
    throw std::runtime_error("create: " + msg);
  }
  return Model(m);
}

int64_t numel(const ncc_tensor_info &t) {
  int64_t n = 1;
  for (int i = 0; i < t.rank; i++) n *= t.shape[i];
  return n;
}

int run(const char *weights, const char *images_path) {
  char err[512];
  int dtype = 0, rank = 0;
  int64_t shape[8];
  void *images = nullptr;
  if (ncc_npy_read(images_path, &dtype, &rank, shape, &images, err, sizeof err) != 0) throw std::runtime_error(err);
  std::unique_ptr<void, void (*)(void *)> own_images(images, std::free);
  const ncc_model_info *info = lenet_info();
  // the inputs in info order: the images, zeros for what inference does not read
  std::vector<std::vector<float>> zeros;
  std::vector<const void *> inputs;
  for (int i = 0; i < info->ninputs; i++) {
    const ncc_tensor_info &t = info->inputs[i];
    if (std::strcmp(t.name, "x") == 0) {
      bool same = dtype == t.dtype && rank == t.rank;
      for (int k = 0; same && k < rank; k++) same = shape[k] == t.shape[k];
      if (!same) throw std::runtime_error(std::string(images_path) + ": not the images lenet.h was compiled for");
      inputs.push_back(images);
    } else {
      zeros.emplace_back(static_cast<size_t>(numel(t)), 0.0f);
      inputs.push_back(zeros.back().data());
    }
  }
  Model m = create();
  if (lenet_load(m.get(), weights) != 0) throw std::runtime_error(std::string("load: ") + lenet_error(m.get()));
  const ncc_tensor_info &lo = info->outputs[0];
  std::vector<float> logits(static_cast<size_t>(numel(lo)));
  void *outputs[1] = {logits.data()};
  if (lenet_infer_io(m.get(), inputs.data(), outputs) != 0)
    throw std::runtime_error(std::string("infer: ") + lenet_error(m.get()));
  const int64_t n = lo.shape[0], classes = lo.shape[1];
  for (int64_t i = 0; i < n; i++) {
    int64_t best = 0;
    for (int64_t c = 1; c < classes; c++)
      if (logits[static_cast<size_t>(i * classes + c)] > logits[static_cast<size_t>(i * classes + best)]) best = c;
    std::printf("image %lld: class %lld\n", static_cast<long long>(i), static_cast<long long>(best));
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s WEIGHTS.safetensors IMAGES.npy\n", argv[0]);
    return 1;
  }
  try {
    return run(argv[1], argv[2]);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
