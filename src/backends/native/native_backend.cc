// Placeholder: the native backend claims nothing yet.
#include "backends/backend.h"

namespace tessera {
namespace {
class NativeBackend final : public Backend {
 public:
  std::string name() const override { return "native"; }
  std::string version() const override { return "not yet"; }
  Status available() const override { return unimplemented("not written yet"); }
  FusionStyle fusion_style() const override { return FusionStyle::kNone; }
  Status supports(const Graph&, int) const override { return unimplemented("not written yet"); }
  std::vector<std::string> claimed_patterns() const override { return {}; }
  Result<std::unique_ptr<Kernel>> compile(const SubGraph&, const CompileOptions&) const override {
    return unimplemented("not written yet");
  }
};
}  // namespace

const Backend& native_backend() {
  static const NativeBackend b;
  return b;
}

}  // namespace tessera
