#include "runtime/tensor/npy.h"

#include <ATen/ATen.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "runtime/common/error.h"

namespace vt {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kArrayAlign = 64;           // numpy.lib.format.ARRAY_ALIGN
constexpr size_t kGrowthAxisMaxDigits = 21;  // numpy.lib.format.GROWTH_AXIS_MAX_DIGITS

struct DtypeCode {
  at::ScalarType type;
  const char* descr;
};

constexpr DtypeCode kDtypes[] = {
    {at::kHalf, "<f2"}, {at::kFloat, "<f4"}, {at::kDouble, "<f8"},
    {at::kChar, "|i1"}, {at::kShort, "<i2"}, {at::kInt, "<i4"},
    {at::kLong, "<i8"}, {at::kByte, "|u1"},  {at::kBool, "|b1"},
};

std::string SupportedDescrs() {
  std::string out;
  for (const auto& d : kDtypes) {
    if (!out.empty()) out += ", ";
    out += d.descr;
  }
  return out;
}

const char* DescrFor(at::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.descr;
  }
  throw Error(std::string("cannot save dtype ") + c10::toString(type) +
              " as .npy (supported: float16, float32, float64, int8, int16, int32, int64, "
              "uint8, bool)");
}

// The parsed header dictionary of a .npy file.
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Parses the Python literal dict NumPy writes, e.g.
// {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  Header Parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    Expect('{');
    while (true) {
      SkipSpace();
      if (Peek() == '}') break;
      std::string key = ParseString();
      Expect(':');
      SkipSpace();
      if (key == "descr") {
        if (Peek() != '\'' && Peek() != '"') {
          Fail("field 'descr' is not a simple dtype string (structured dtypes are not supported)");
        }
        h.descr = ParseString();
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = ParseBool();
        have_order = true;
      } else if (key == "shape") {
        h.shape = ParseShape();
        have_shape = true;
      } else {
        Fail("unknown header key '" + key + "'");
      }
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      SkipSpace();
      if (Peek() != '}') Fail("expected ',' or '}' in header");
    }
    if (!have_descr || !have_order || !have_shape) {
      Fail("header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return h;
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void Expect(char c) {
    SkipSpace();
    if (Peek() != c) Fail(std::string("expected '") + c + "' in header");
    ++pos_;
  }
  [[noreturn]] void Fail(const std::string& why) const {
    throw Error(what_ + ": malformed .npy header: " + why);
  }
  std::string ParseString() {
    SkipSpace();
    char quote = Peek();
    if (quote != '\'' && quote != '"') Fail("expected a quoted string");
    ++pos_;
    size_t end = s_.find(quote, pos_);
    if (end == std::string::npos) Fail("unterminated string");
    std::string out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  bool ParseBool() {
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    Fail("'fortran_order' must be True or False");
  }
  std::vector<int64_t> ParseShape() {
    std::vector<int64_t> shape;
    Expect('(');
    while (true) {
      SkipSpace();
      if (Peek() == ')') {
        ++pos_;
        return shape;
      }
      if (!std::isdigit(static_cast<unsigned char>(Peek())))
        Fail("shape must be a tuple of integers");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(Peek()))) {
        if (v > (int64_t{1} << 50)) Fail("shape dimension too large");
        v = v * 10 + (s_[pos_++] - '0');
      }
      if (Peek() == 'L') ++pos_;  // Python 2 longs
      shape.push_back(v);
      SkipSpace();
      if (Peek() == ',') ++pos_;
    }
  }

  const std::string& s_;
  const std::string& what_;
  size_t pos_ = 0;
};

std::string ShapeRepr(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << '(';
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out << ", ";
    out << sizes[i];
  }
  if (sizes.size() == 1) out << ',';
  out << ')';
  return out.str();
}

uint32_t ReadLittle(const std::string& bytes, size_t offset, size_t width) {
  uint32_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= uint32_t(uint8_t(bytes[offset + i])) << (8 * i);
  return v;
}

}  // namespace

std::string EncodeNpy(const at::Tensor& tensor) {
  const char* descr = DescrFor(tensor.scalar_type());
  at::Tensor t = tensor.to(at::kCPU).contiguous();
  std::string dict = std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': " + ShapeRepr(t.sizes()) + ", }";
  if (t.dim() > 0) {
    // Spare room NumPy leaves so the first axis can grow in place.
    size_t digits = std::to_string(t.size(0)).size();
    dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  size_t hlen = dict.size() + 1;  // + '\n'
  size_t prefix = kMagicLen + 2 + 2;
  size_t version = 1;
  if (prefix + hlen + kArrayAlign > 65535) {
    version = 2;
    prefix = kMagicLen + 2 + 4;
  }
  size_t pad = kArrayAlign - ((prefix + hlen) % kArrayAlign);
  size_t header_len = hlen + pad;
  std::string out(kMagic, kMagicLen);
  out.push_back(static_cast<char>(version));
  out.push_back('\0');
  for (size_t i = 0; i < (version == 1 ? 2u : 4u); ++i) {
    out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  }
  out += dict;
  out.append(pad, ' ');
  out.push_back('\n');
  size_t nbytes = t.numel() * t.element_size();
  out.append(static_cast<const char*>(t.data_ptr()), nbytes);
  return out;
}

void SaveNpy(const at::Tensor& tensor, const std::string& path) {
  std::string bytes = EncodeNpy(tensor);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("cannot open '" + path + "' for writing: " + std::strerror(errno));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw Error("failed writing '" + path + "': " + std::strerror(errno));
}

at::Tensor DecodeNpy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < kMagicLen + 2 || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0) {
    throw Error(what + ": not a .npy file (missing the \\x93NUMPY magic)");
  }
  int major = static_cast<uint8_t>(bytes[kMagicLen]);
  if (major < 1 || major > 3) {
    throw Error(what + ": unsupported .npy format version " + std::to_string(major) +
                " (supported: 1, 2, 3)");
  }
  size_t len_width = major == 1 ? 2 : 4;
  size_t prefix = kMagicLen + 2 + len_width;
  if (bytes.size() < prefix) throw Error(what + ": truncated .npy header");
  size_t header_len = ReadLittle(bytes, kMagicLen + 2, len_width);
  if (bytes.size() < prefix + header_len) {
    throw Error(what + ": truncated .npy header (declares " + std::to_string(header_len) +
                " bytes, file has " + std::to_string(bytes.size() - prefix) + ")");
  }
  Header h = HeaderParser(bytes.substr(prefix, header_len), what).Parse();
  if (h.fortran_order) {
    throw Error(what +
                ": Fortran-order arrays are not supported; save "
                "numpy.ascontiguousarray(a) instead");
  }
  const DtypeCode* code = nullptr;
  for (const auto& d : kDtypes) {
    std::string alt = d.descr;  // NumPy writes '<u1' as '|u1'; accept either byte-order mark.
    if (h.descr == alt ||
        (alt[0] == '|' && (h.descr == "<" + alt.substr(1) || h.descr == "=" + alt.substr(1)))) {
      code = &d;
    }
  }
  if (code == nullptr) {
    if (!h.descr.empty() && h.descr[0] == '>') {
      throw Error(what + ": big-endian dtype '" + h.descr +
                  "' is not supported; convert with "
                  "a.astype(a.dtype.newbyteorder('<'))");
    }
    throw Error(what + ": unsupported dtype '" + h.descr + "' (supported: " + SupportedDescrs() +
                ")");
  }
  int64_t numel = 1;
  for (int64_t d : h.shape) {
    if (d != 0 && numel > (int64_t{1} << 52) / d) throw Error(what + ": shape too large");
    numel *= d;
  }
  // The data must be all there before anything is allocated: a header may declare any shape
  // (a fuzzer's 2 x 444444444444444 x 3 int64 array asked for 21 PB).
  const size_t nbytes = static_cast<size_t>(numel) * c10::elementSize(code->type);
  const size_t data_offset = prefix + header_len;
  if (bytes.size() - data_offset != nbytes) {
    throw Error(what + ": data is " + std::to_string(bytes.size() - data_offset) +
                " bytes, shape " + ShapeRepr(h.shape) + " of '" + h.descr + "' needs " +
                std::to_string(nbytes) +
                (bytes.size() - data_offset < nbytes ? " (truncated)" : ""));
  }
  at::Tensor t = at::empty(h.shape, at::TensorOptions().dtype(code->type));
  if (nbytes > 0) std::memcpy(t.data_ptr(), bytes.data() + data_offset, nbytes);
  if (code->type == at::kBool) {
    // Any byte other than 0/1 would be an invalid bool in LibTorch.
    const uint8_t* p = static_cast<const uint8_t*>(t.data_ptr());
    for (size_t i = 0; i < nbytes; ++i) {
      if (p[i] > 1) throw Error(what + ": bool array holds byte " + std::to_string(p[i]));
    }
  }
  return t;
}

at::Tensor LoadNpy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << f.rdbuf();
  return DecodeNpy(buffer.str(), "'" + path + "'");
}

}  // namespace vt
