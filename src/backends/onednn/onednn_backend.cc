// Placeholder: the onednn backend claims nothing yet.
#include "backends/backend.h"

namespace tessera {
namespace {
class OnednnBackend final : public Backend {
 public:
  std::string name() const override { return "onednn"; }
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

const Backend& onednn_backend() {
  static const OnednnBackend b;
  return b;
}

}  // namespace tessera
