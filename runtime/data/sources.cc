#include "runtime/data/sources.h"

#include <ATen/ATen.h>

#include <cstring>

#include "runtime/common/error.h"
#include "runtime/data/idx.h"
#include "runtime/random/philox.h"
#include "store/sha256.h"

namespace vt::data {
namespace {

constexpr double kFashionMean = 0.2860;
constexpr double kFashionStd = 0.3530;

void CheckIndex(int64_t index, int64_t size, const std::string& name) {
  if (index < 0 || index >= size) {
    throw Error(name + ": example index " + std::to_string(index) + " out of range [0, " +
                std::to_string(size) + ")");
  }
}

// 32 random bits for augmentation of example `index` in `epoch`, lane `lane`.
uint32_t AugmentBits(uint64_t seed, int64_t epoch, int64_t index, uint32_t lane) {
  const uint32_t counter[4] = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                               static_cast<uint32_t>(RandomStream::kAugment),
                               static_cast<uint32_t>(epoch) * 4 + lane};
  uint32_t out[4];
  Philox4x32(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), counter, out);
  return out[0];
}

class ImageDataset : public Dataset {
 public:
  ImageDataset(const ImageOptions& o) : options_(o) {
    const std::string prefix = o.dir + "/" + (o.split == "train" ? "train" : "t10k");
    if (o.split != "train" && o.split != "test") {
      throw Error("fashion_mnist: split must be 'train' or 'test', got '" + o.split + "'");
    }
    images_ = ReadIdx(prefix + "-images-idx3-ubyte.gz");
    labels_ = ReadIdx(prefix + "-labels-idx1-ubyte.gz");
    if (images_.dim() != 3 || labels_.dim() != 1 || images_.size(0) != labels_.size(0)) {
      throw Error("fashion_mnist: images and labels in " + o.dir + " do not match");
    }
    if (o.limit < 0) throw Error("fashion_mnist: limit must be >= 0");
    if (o.limit > 0 && o.limit < images_.size(0)) {
      images_ = images_.narrow(0, 0, o.limit).contiguous();
      labels_ = labels_.narrow(0, 0, o.limit).contiguous();
    }
    if (o.crop_padding < 0 || o.crop_padding > 14)
      throw Error("fashion_mnist: crop_padding must be in [0, 14]");
    store::Sha256 h;
    h.Update(labels_.data_ptr(), labels_.numel());
    h.Update(images_.data_ptr(), images_.numel());
    digest_ = store::ToHex(h.Final());
  }

  int64_t size() const override { return images_.size(0); }
  std::string name() const override { return "fashion-mnist:" + options_.split; }
  std::string digest() const override { return digest_; }
  int64_t classes() const override { return 10; }
  std::vector<int64_t> input_shape() const override {
    return {1, images_.size(1), images_.size(2)};
  }
  std::map<std::string, std::string> settings() const override {
    return {{"crop_padding", std::to_string(options_.crop_padding)},
            {"flip", options_.flip ? "true" : "false"},
            {"normalize", options_.normalize ? "true" : "false"}};
  }

  Batch Get(const std::vector<int64_t>& indices, uint64_t seed, int64_t epoch) const override {
    const int64_t h = images_.size(1), w = images_.size(2),
                  b = static_cast<int64_t>(indices.size());
    at::Tensor x = at::zeros({b, 1, h, w}, at::kDouble);
    at::Tensor y = at::empty({b}, at::kLong);
    double* xp = x.data_ptr<double>();
    int64_t* yp = y.data_ptr<int64_t>();
    const uint8_t* img = images_.data_ptr<uint8_t>();
    const uint8_t* lab = labels_.data_ptr<uint8_t>();
    const int64_t pad = options_.crop_padding;
    for (int64_t k = 0; k < b; ++k) {
      const int64_t i = indices[k];
      CheckIndex(i, size(), name());
      yp[k] = lab[i];
      int64_t dy = 0, dx = 0;
      bool flip = false;
      if (pad > 0) {
        dy = AugmentBits(seed, epoch, i, 0) % (2 * pad + 1) - pad;
        dx = AugmentBits(seed, epoch, i, 1) % (2 * pad + 1) - pad;
      }
      if (options_.flip) flip = AugmentBits(seed, epoch, i, 2) & 1;
      for (int64_t r = 0; r < h; ++r) {
        for (int64_t c = 0; c < w; ++c) {
          const int64_t sr = r + dy, sc0 = c + dx;
          const int64_t sc = flip ? (w - 1 - sc0) : sc0;
          double v = 0.0;
          if (sr >= 0 && sr < h && sc >= 0 && sc < w) v = img[(i * h + sr) * w + sc] / 255.0;
          xp[(k * h + r) * w + c] = options_.normalize ? (v - kFashionMean) / kFashionStd : v;
        }
      }
    }
    return {x, y};
  }

 private:
  ImageOptions options_;
  at::Tensor images_, labels_;
  std::string digest_;
};

class TextDataset : public Dataset {
 public:
  explicit TextDataset(const TextOptions& o) : options_(o) {
    if (o.context < 1) throw Error("text: context must be >= 1, got " + std::to_string(o.context));
    bytes_ = ReadFileBytes(o.path);
    if (static_cast<int64_t>(bytes_.size()) < o.context + 1) {
      throw Error("text: '" + o.path + "' has " + std::to_string(bytes_.size()) +
                  " bytes, fewer than context + 1 = " + std::to_string(o.context + 1));
    }
    digest_ = store::ToHex(store::Sha256Of(bytes_));
    size_t slash = o.path.rfind('/');
    base_ = slash == std::string::npos ? o.path : o.path.substr(slash + 1);
  }

  int64_t size() const override {
    return (static_cast<int64_t>(bytes_.size()) - 1) / options_.context;
  }
  std::string name() const override { return "text:" + base_; }
  std::string digest() const override { return digest_; }
  int64_t classes() const override { return 256; }
  std::vector<int64_t> input_shape() const override { return {options_.context}; }
  std::map<std::string, std::string> settings() const override {
    return {{"context", std::to_string(options_.context)}};
  }

  Batch Get(const std::vector<int64_t>& indices, uint64_t, int64_t) const override {
    const int64_t t = options_.context, b = static_cast<int64_t>(indices.size());
    at::Tensor x = at::empty({b, t}, at::kLong), y = at::empty({b, t}, at::kLong);
    int64_t* xp = x.data_ptr<int64_t>();
    int64_t* yp = y.data_ptr<int64_t>();
    const uint8_t* p = reinterpret_cast<const uint8_t*>(bytes_.data());
    for (int64_t k = 0; k < b; ++k) {
      CheckIndex(indices[k], size(), name());
      const int64_t offset = indices[k] * t;
      for (int64_t j = 0; j < t; ++j) {
        xp[k * t + j] = p[offset + j];
        yp[k * t + j] = p[offset + j + 1];
      }
    }
    return {x, y};
  }

 private:
  TextOptions options_;
  std::string bytes_, digest_, base_;
};

class SyntheticDataset : public Dataset {
 public:
  explicit SyntheticDataset(const SyntheticOptions& o) : options_(o) {
    if (o.size < 1) throw Error("synthetic: size must be >= 1");
    if (o.classes < 2) throw Error("synthetic: classes must be >= 2");
    if (o.input_shape.empty()) throw Error("synthetic: input_shape must not be empty");
    std::vector<int64_t> shape = {o.size};
    int64_t features = 1;
    for (int64_t d : o.input_shape) {
      if (d < 1) throw Error("synthetic: input_shape entries must be >= 1");
      shape.push_back(d);
      features *= d;
    }
    inputs_ = NormalTensor(shape, at::kDouble, o.seed, static_cast<uint32_t>(RandomStream::kUser));
    // The teacher's weights come from the next seed, so inputs and teacher are independent.
    at::Tensor teacher = NormalTensor({features, o.classes}, at::kDouble, o.seed + 1,
                                      static_cast<uint32_t>(RandomStream::kUser));
    // Labels from exact integer-free logic: argmax of a float64 product computed one row at a
    // time in a fixed order (no BLAS), so every machine labels alike.
    labels_ = at::empty({o.size}, at::kLong);
    const double* x = inputs_.data_ptr<double>();
    const double* wt = teacher.data_ptr<double>();
    for (int64_t i = 0; i < o.size; ++i) {
      int64_t best = 0;
      double best_v = 0;
      for (int64_t c = 0; c < o.classes; ++c) {
        double v = 0;
        for (int64_t f = 0; f < features; ++f) v += x[i * features + f] * wt[f * o.classes + c];
        if (c == 0 || v > best_v) {
          best = c;
          best_v = v;
        }
      }
      labels_.data_ptr<int64_t>()[i] = best;
    }
    store::Sha256 h;
    h.Update(inputs_.data_ptr(), inputs_.numel() * sizeof(double));
    h.Update(labels_.data_ptr(), labels_.numel() * sizeof(int64_t));
    digest_ = store::ToHex(h.Final());
  }

  int64_t size() const override { return options_.size; }
  std::string name() const override { return "synthetic"; }
  std::string digest() const override { return digest_; }
  int64_t classes() const override { return options_.classes; }
  std::vector<int64_t> input_shape() const override { return options_.input_shape; }

  Batch Get(const std::vector<int64_t>& indices, uint64_t, int64_t) const override {
    for (int64_t i : indices) CheckIndex(i, size(), name());
    at::Tensor idx = at::tensor(indices, at::kLong);
    return {inputs_.index_select(0, idx), labels_.index_select(0, idx)};
  }

 private:
  SyntheticOptions options_;
  at::Tensor inputs_, labels_;
  std::string digest_;
};

}  // namespace

std::shared_ptr<Dataset> FashionMnist(const ImageOptions& options) {
  return std::make_shared<ImageDataset>(options);
}

std::shared_ptr<Dataset> TextCorpus(const TextOptions& options) {
  return std::make_shared<TextDataset>(options);
}

std::shared_ptr<Dataset> Synthetic(const SyntheticOptions& options) {
  return std::make_shared<SyntheticDataset>(options);
}

}  // namespace vt::data
