// The misc kernel family, split by area: resize, recurrent nets, vision (NMS, RoiAlign,
// GridSample), signal (DFT, STFT, windows, mel) and text (StringNormalizer, TfIdfVectorizer).
#pragma once

#include "backends/ref/ref_kernel.h"

namespace tessera {

void register_misc_resize_kernels(RefKernelTable& t);
void register_misc_rnn_kernels(RefKernelTable& t);
void register_misc_vision_kernels(RefKernelTable& t);
void register_misc_signal_kernels(RefKernelTable& t);
void register_misc_text_kernels(RefKernelTable& t);

}  // namespace tessera
