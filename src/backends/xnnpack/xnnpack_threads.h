// XNNPACK's thread pool is tessera's (xnnpack_threads.cc defines the pthreadpool functions it
// calls): a pthreadpool_t from pthreadpool_create() runs its loops on the ThreadPool bound here.
#pragma once

#include <pthreadpool.h>

#include "ir/parallel.h"

namespace tessera::xnnpack {

// XNNPACK's loops on p run on `pool` until bound again (nullptr: on the calling thread).
void bind_thread_pool(pthreadpool_t p, ThreadPool* pool);

// Whether XNNPACK calls these functions and not libpthreadpool's: this program's definitions must
// be in its dynamic symbol table (they are when it links libXNNPACK, which references them).
bool xnnpack_uses_tessera_threads();

}  // namespace tessera::xnnpack
