// The data sets vtrun ships: Fashion-MNIST (Debian's dataset-fashion-mnist), any text file as
// a byte-level corpus, and synthetic sets for fast tests.
#pragma once

#include <memory>
#include <string>

#include "runtime/data/dataset.h"

namespace vt::data {

struct ImageOptions {
  std::string dir = "/usr/share/datasets/fashion-mnist";  // Default: Debian's package folder.
  std::string split = "train";  // "train" (60000) or "test" (10000). Default: "train".
  int64_t limit = 0;            // Use only the first `limit` examples; 0 = all. Default: 0.
  int64_t crop_padding = 0;     // Random crop after zero padding by this many pixels. Default: 0.
  bool flip = false;            // Random horizontal flip. Default: false.
  bool normalize = true;        // (x/255 - 0.2860) / 0.3530 instead of x/255. Default: true.
};

// Fashion-MNIST from IDX files. Inputs float64 [B, 1, 28, 28]; 10 classes. The digest is
// SHA-256 over the decompressed label bytes then image bytes of the examples used.
std::shared_ptr<Dataset> FashionMnist(const ImageOptions& options);

struct TextOptions {
  std::string path;      // A text file, read as bytes (vocabulary 256).
  int64_t context = 64;  // Tokens per example. Default: 64.
};

// Byte-level corpus: example i is the window of `context` bytes at offset i * context, its
// targets the same window shifted by one. Inputs and targets int64 [B, context]. Digest:
// SHA-256 of the file's bytes.
std::shared_ptr<Dataset> TextCorpus(const TextOptions& options);

struct SyntheticOptions {
  int64_t size = 1024;                      // Examples. Default: 1024.
  std::vector<int64_t> input_shape = {32};  // One example's shape. Default: {32}.
  int64_t classes = 10;                     // Default: 10.
  uint64_t seed = 0;                        // Default: 0.
};

// Gaussian inputs (Philox) labelled by a fixed random linear teacher (argmax of W x), so a
// model can learn them. Digest: SHA-256 of the generated inputs and labels.
std::shared_ptr<Dataset> Synthetic(const SyntheticOptions& options);

}  // namespace vt::data
