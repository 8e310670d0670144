// The parts of backend.h that every backend shares: names of the enums, the DeviceBuffer
// handle, and Memory's accounting (current bytes by kind, and the breakdown at the peak).
#include "runtime/backend/backend.h"

#include <numeric>
#include <string>
#include <utility>

#include "src/util/check.h"

namespace shardsim::runtime {

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kWeights:
      return "weights";
    case MemoryKind::kGradients:
      return "gradients";
    case MemoryKind::kOptimizer:
      return "optimizer";
    case MemoryKind::kActivations:
      return "activations";
    case MemoryKind::kOther:
      return "other";
  }
  CHECK(false) << "unknown MemoryKind " << static_cast<int>(kind);
  return "";
}

const char* GroupName(Group g) {
  switch (g) {
    case Group::kWorld:
      return "world";
    case Group::kTp:
      return "tp";
    case Group::kCp:
      return "cp";
    case Group::kDp:
      return "dp";
    case Group::kPp:
      return "pp";
    case Group::kEp:
      return "ep";
    case Group::kEdp:
      return "edp";
    case Group::kEtp:
      return "etp";
  }
  CHECK(false) << "unknown Group " << static_cast<int>(g);
  return "";
}

int64_t Backend::Mark() {
  host_marks_.push_back(Now());
  return static_cast<int64_t>(host_marks_.size()) - 1;
}

double Backend::MarkSeconds(int64_t mark) {
  CHECK(mark >= 0 && mark < static_cast<int64_t>(host_marks_.size())) << "no mark " << mark;
  return host_marks_[mark];
}

int64_t ElementBytes(DType type) {
  CHECK(type == DType::kFp32 || type == DType::kBf16) << "the runtime stores fp32 or bf16, not " << DTypeName(type);
  return type == DType::kFp32 ? 4 : 2;
}

int64_t MemoryUsage::total() const {
  return std::accumulate(bytes.begin(), bytes.end(), int64_t{0});
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      kind_(other.kind_),
      counted_(other.counted_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    owner_ = std::exchange(other.owner_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = other.kind_;
    counted_ = other.counted_;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { Reset(); }

void DeviceBuffer::Reset() {
  if (owner_ != nullptr) owner_->Release(*this);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

namespace {

// "weights 1024, gradients 0, ..." in bytes: what an out-of-memory message shows.
std::string Breakdown(const MemoryUsage& u) {
  std::string s;
  for (int k = 0; k < kMemoryKindCount; ++k) {
    if (k > 0) s += ", ";
    s += std::string(MemoryKindName(static_cast<MemoryKind>(k))) + " " + std::to_string(u.bytes[k]);
  }
  return s;
}

}  // namespace

// A zero-byte request returns an empty buffer (data() == nullptr) without asking the device:
// nothing to count, nothing to free.
StatusOr<DeviceBuffer> Memory::Allocate(MemoryKind kind, int64_t bytes, std::string_view what) {
  CHECK(bytes >= 0) << "negative allocation of " << bytes << " bytes for " << what;
  DeviceBuffer b;
  b.kind_ = kind;
  if (bytes == 0) return b;
  void* p = RawAllocate(bytes);
  if (p == nullptr) {
    return Status::Error("out of memory allocating " + std::string(what) + ": " +
                         std::to_string(bytes) + " bytes requested with " +
                         std::to_string(current_.total()) + " bytes held (" + Breakdown(current_) +
                         ")");
  }
  b.owner_ = this;
  b.data_ = p;
  b.bytes_ = bytes;
  current_.bytes[static_cast<int>(kind)] += bytes;
  if (current_.total() > at_peak_.total()) at_peak_ = current_;
  return b;
}

StatusOr<DeviceBuffer> Memory::AllocateUncounted(int64_t bytes, std::string_view what) {
  CHECK(bytes >= 0) << "negative allocation of " << bytes << " bytes for " << what;
  DeviceBuffer b;
  b.counted_ = false;
  if (bytes == 0) return b;
  void* p = RawAllocate(bytes);
  if (p == nullptr) {
    return Status::Error("out of memory allocating " + std::string(what) + ": " +
                         std::to_string(bytes) + " bytes (not counted) requested with " +
                         std::to_string(current_.total()) + " bytes held");
  }
  b.owner_ = this;
  b.data_ = p;
  b.bytes_ = bytes;
  return b;
}

void Memory::Release(DeviceBuffer& b) {
  if (!b.counted_) {
    RawFree(b.data_);
    return;
  }
  int64_t& held = current_.bytes[static_cast<int>(b.kind_)];
  CHECK(b.owner_ == this && b.data_ != nullptr && held >= b.bytes_)
      << "releasing " << b.bytes_ << " bytes of " << MemoryKindName(b.kind_) << " with " << held
      << " held";
  held -= b.bytes_;
  RawFree(b.data_);
}

}  // namespace shardsim::runtime
