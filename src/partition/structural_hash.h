// The structural hash of a subgraph: the key of a measured cost in the cost database.
//
// Two subgraphs hash alike when one kernel built from either would do the same work: the same ops
// (domain, type, opset) in the same order, with the same attributes, wired the same way (each
// input named by its position: a subgraph input, a constant, or an output of an earlier inside
// node), with the same types and shapes of every value, and the same outputs. Weight values do not
// count, so the same layer in another model (or with retrained weights) reuses the measurement;
// small integer constants do (axes, shapes, pads: they change what the kernel computes).
//
// The hash is FNV-1a 64 over a canonical text (structural_signature), so it is the same across
// runs, processes and machines; node and value indices of the graph do not enter it.
#pragma once

#include <cstdint>
#include <string>

#include "ir/subgraph.h"

namespace tessera {

// The canonical text the hash is taken over (readable, for debugging a cache miss).
std::string structural_signature(const SubGraph& sg);
uint64_t structural_hash(const SubGraph& sg);
// structural_hash as 16 lowercase hex digits.
std::string structural_hash_hex(const SubGraph& sg);

// FNV-1a 64 of `bytes`.
uint64_t fnv1a64(const void* bytes, size_t size, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace tessera
