#include "backends/backend.h"

namespace tessera {

const char* fusion_style_name(FusionStyle s) {
  switch (s) {
    case FusionStyle::kNone: return "none";
    case FusionStyle::kTvmLike: return "tvm-like";
    case FusionStyle::kArbitrary: return "arbitrary";
  }
  return "?";
}

Status Backend::accepts(const SubGraph& sg) const {
  if (sg.size() != 1) return unimplemented(name() + " runs single nodes only");
  return Status();
}

const Backend* find_backend(const std::string& name) {
  for (const Backend* b : all_backends())
    if (b->name() == name) return b;
  return nullptr;
}

std::string backend_names() {
  std::string s;
  for (const Backend* b : all_backends()) s += (s.empty() ? "" : ", ") + b->name();
  return s;
}

}  // namespace tessera
