#include "backends/ref/misc_kernels.h"

namespace tessera {

void register_misc_kernels(RefKernelTable& t) {
  register_misc_resize_kernels(t);
  register_misc_rnn_kernels(t);
  register_misc_vision_kernels(t);
  register_misc_signal_kernels(t);
  register_misc_text_kernels(t);
}

}  // namespace tessera
