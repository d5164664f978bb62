// Schemas of the misc family: Resize/Upsample, RNN/GRU/LSTM, detection and sampling ops,
// signal ops (DFT, STFT, windows, mel matrix) and string ops.
#include <cmath>
#include <string>
#include <vector>

#include "ops/op_registry.h"

namespace tessera {
namespace {

// A constant input's values, or nullptr when the input is absent, not constant or empty.
const Tensor* nonempty_constant(const InferContext& ctx, int i) {
  if (!ctx.has_input(i) || i >= static_cast<int>(ctx.constants.size())) return nullptr;
  const Tensor* t = ctx.constants[i];
  return t && t->numel() > 0 ? t : nullptr;
}

Status infer_resize(InferContext& ctx, bool is_upsample) {
  const TensorType& x = ctx.inputs[0];
  TensorType out;
  out.dtype = x.dtype;
  if (!x.has_rank()) {
    ctx.outputs[0] = out;
    return Status();
  }
  const int rank = x.rank();
  const std::vector<Dim>& in = *x.shape;
  std::vector<Dim> dims(rank);  // unknown by default
  const int opset = ctx.node.opset;
  std::vector<double> scales;
  const Tensor* sizes = nullptr;
  if (is_upsample && opset < 9) {
    for (float s : ctx.node.attr_floats("scales")) scales.push_back(s);
  } else if (is_upsample || opset < 11) {
    if (const Tensor* s = nonempty_constant(ctx, 1)) scales = s->to_double_vector();
  } else {
    if (const Tensor* s = nonempty_constant(ctx, 2)) scales = s->to_double_vector();
    sizes = nonempty_constant(ctx, 3);
  }
  if (sizes) {
    if (sizes->numel() != rank) return invalid_argument("sizes length does not match the input rank");
    for (int d = 0; d < rank; ++d) {
      if (sizes->as_int64(d) < 0) return invalid_argument("sizes must be non-negative");
      dims[d] = Dim(sizes->as_int64(d));
    }
  } else if (!scales.empty()) {
    if (static_cast<int>(scales.size()) != rank) {
      return invalid_argument("scales length does not match the input rank");
    }
    for (int d = 0; d < rank; ++d) {
      if (!(scales[d] > 0)) return invalid_argument("scales must be positive");
      if (in[d].known()) {
        dims[d] = Dim(static_cast<int64_t>(std::floor(static_cast<double>(in[d].value) * scales[d])));
      } else if (scales[d] == 1.0) {
        dims[d] = in[d];
      }
    }
  }
  out.shape = dims;
  ctx.outputs[0] = out;
  return Status();
}

// RNN / GRU / LSTM: Y, Y_h (and Y_c) from X's dims and the hidden_size / direction attributes.
Status infer_recurrent(InferContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  const Node& n = ctx.node;
  int64_t hidden = n.attr_int("hidden_size", -1);
  std::string direction = n.attr_string("direction", "forward");
  int64_t dirs = direction == "bidirectional" ? 2 : 1;
  bool batch_first = n.attr_int("layout", 0) != 0;
  Dim seq, batch;
  if (x.has_rank()) {
    if (x.rank() != 3) return invalid_argument("X must have rank 3");
    seq = (*x.shape)[batch_first ? 1 : 0];
    batch = (*x.shape)[batch_first ? 0 : 1];
  }
  Dim h = hidden > 0 ? Dim(hidden) : Dim();
  if (hidden <= 0 && ctx.inputs.size() > 2 && ctx.inputs[2].has_rank() && ctx.inputs[2].rank() == 3) {
    h = (*ctx.inputs[2].shape)[2];
  }
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    TensorType t;
    t.dtype = x.dtype;
    if (o == 0) {
      t.shape = batch_first ? std::vector<Dim>{batch, seq, Dim(dirs), h}
                            : std::vector<Dim>{seq, Dim(dirs), batch, h};
    } else {
      t.shape = batch_first ? std::vector<Dim>{batch, Dim(dirs), h} : std::vector<Dim>{Dim(dirs), batch, h};
    }
    ctx.outputs[o] = t;
  }
  return Status();
}

// GridSample: [N, C, H_out, W_out] from X [N, C, H, W] and grid [N, H_out, W_out, 2].
Status infer_grid_sample(InferContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& grid = ctx.inputs[1];
  TensorType out;
  out.dtype = x.dtype;
  if (x.has_rank() && grid.has_rank() && x.rank() == 4 && grid.rank() == 4) {
    out.shape = std::vector<Dim>{(*x.shape)[0], (*x.shape)[1], (*grid.shape)[1], (*grid.shape)[2]};
  }
  ctx.outputs[0] = out;
  return Status();
}

// RoiAlign: [num_rois, C, output_height, output_width].
Status infer_roi_align(InferContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& rois = ctx.inputs[1];
  TensorType out;
  out.dtype = x.dtype;
  Dim num_rois = rois.has_rank() && rois.rank() == 2 ? (*rois.shape)[0] : Dim();
  Dim channels = x.has_rank() && x.rank() == 4 ? (*x.shape)[1] : Dim();
  out.shape = std::vector<Dim>{num_rois, channels, Dim(ctx.node.attr_int("output_height", 1)),
                               Dim(ctx.node.attr_int("output_width", 1))};
  ctx.outputs[0] = out;
  return Status();
}

}  // namespace

void register_misc_ops(OpRegistry& r) {
  r.add("Resize", OpKind::kInjective).set_inputs(1, 4).set_infer([](InferContext& ctx) {
    return infer_resize(ctx, false);
  });
  r.add("Upsample", OpKind::kInjective).set_inputs(1, 2).set_infer([](InferContext& ctx) {
    return infer_resize(ctx, true);
  });
  r.add("RNN", OpKind::kOpaque).set_inputs(3, 6).set_outputs(0, 2).set_infer(infer_recurrent);
  r.add("GRU", OpKind::kOpaque).set_inputs(3, 6).set_outputs(0, 2).set_infer(infer_recurrent);
  r.add("LSTM", OpKind::kOpaque).set_inputs(3, 8).set_outputs(0, 3).set_infer(infer_recurrent);
  r.add("NonMaxSuppression", OpKind::kOpaque).set_inputs(2, 5);
  r.add("RoiAlign", OpKind::kOpaque).set_inputs(3, 3).set_infer(infer_roi_align);
  r.add("GridSample", OpKind::kOpaque).set_inputs(2, 2).set_infer(infer_grid_sample);
  r.add("DFT", OpKind::kOpaque).set_inputs(1, 2);
  r.add("STFT", OpKind::kOpaque).set_inputs(2, 4);
  r.add("HannWindow", OpKind::kOpaque).set_inputs(1, 1);
  r.add("HammingWindow", OpKind::kOpaque).set_inputs(1, 1);
  r.add("BlackmanWindow", OpKind::kOpaque).set_inputs(1, 1);
  r.add("MelWeightMatrix", OpKind::kOpaque).set_inputs(5, 5);
  r.add("StringNormalizer", OpKind::kOpaque).set_inputs(1, 1);
  r.add("TfIdfVectorizer", OpKind::kOpaque).set_inputs(1, 1);
}

}  // namespace tessera
